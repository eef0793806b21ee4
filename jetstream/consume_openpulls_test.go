package jetstream

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// A pull given up on (nothing came for a second past its expiry) may still
// be open at the server: one that took it late answers it later. Its
// deliveries are counted for it, not for the pull waited on then, and a
// stop reads the inbox until every open pull has ended. Before, the late
// deliveries counted for the current pull: at a stop the loop took that
// pull for complete and left, and the delivery the server still sent it
// went to an inbox no longer read, back only after the ack wait, behind
// newer events of its subject (a CI run: two events of a handover
// "superseded while retrying"). Here the source's pulls go to a relay that
// holds them, and hands both to the real consumer only once the source
// gave the first up: the server takes it late.
func TestSourceStopReadsWhatPullsStillOpenBring(t *testing.T) {
	c := startTCPServer(t).c
	nc := c.NC
	ctx := t.Context()
	if _, err := c.JS.CreateOrUpdateConsumer(ctx, StreamWebhooks, js.ConsumerConfig{
		Durable: DurableApply, AckPolicy: js.AckExplicitPolicy, MaxDeliver: -1,
	}); err != nil {
		t.Fatal(err)
	}
	const relay = "test.late.pulls"
	held := make(chan *nats.Msg, 8)
	sub, err := nc.Subscribe(relay, func(m *nats.Msg) { held <- m })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	src, err := startSource(nil, nc, relay, 2, inboxCapacity(0, 2), pullHealth{log: slog.New(slog.DiscardHandler), warnAfter: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Stop()
	nextPull := func() *nats.Msg {
		t.Helper()
		select {
		case m := <-held:
			return m
		case <-time.After(10 * time.Second):
			t.Fatal("no pull request within 10 s")
			return nil
		}
	}
	first := nextPull()
	second := nextPull() // the first went unanswered: given up
	src.Stop()
	// The server takes both now, each waiting 3 s (so the test does not
	// race their expiry), the first ahead of the second.
	for _, p := range []*nats.Msg{first, second} {
		var req map[string]any
		if err := json.Unmarshal(p.Data, &req); err != nil {
			t.Fatal(err)
		}
		req["expires"] = (3 * time.Second).Nanoseconds()
		body, _ := json.Marshal(req)
		if err := nc.PublishRequest(pullSubject(StreamWebhooks, DurableApply), p.Reply, body); err != nil {
			t.Fatal(err)
		}
	}
	publish := func(i int) {
		t.Helper()
		if _, err := c.JS.Publish(ctx, "webhooks.p.a", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	// Events 1 and 2 fill the first pull; the source, waiting on the
	// second, gets them.
	publish(1)
	publish(2)
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		src.mu.Lock()
		n := len(src.kept)
		src.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("%d deliveries kept within 10 s of the stop; want 2", n)
		}
	}
	// The second pull is still open at the server.
	publish(3)
	var seqs []uint64
	for _, m := range src.Unread() {
		seqs = append(seqs, m.Event.Seq)
	}
	if want := []uint64{1, 2, 3}; !slices.Equal(seqs, want) {
		t.Fatalf("Unread after the stop returned the deliveries of stream sequences %v; want %v (the last one answered the second pull, still open after the first's late deliveries)", seqs, want)
	}
}
