package jetstream_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/nats-io/nats.go"
)

// TestOldestUnapplied: the time the oldest event not yet acknowledged by
// the durable consumer was stored; zero with no consumer or nothing
// waiting. WEBHOOKS deletes such an event at its max_age (review AS), so
// status and a metric watch it.
func TestOldestUnapplied(t *testing.T) {
	env := jstest.Start(t, "")
	ctx := t.Context()
	if got, err := jetstream.OldestUnapplied(ctx, env.Conn); err != nil || !got.IsZero() {
		t.Fatalf("no consumer yet: %v %v, want zero", got, err)
	}
	pub := jetstream.NewPublisher(env.Conn, 5*time.Second)
	var stored []time.Time
	for i, key := range []string{"k1", "k2", "k3"} {
		h := nats.Header{}
		h.Set("Hookgate-Key", key)
		if _, err := pub.Publish(ctx, jetstream.Message{Subject: "webhooks.p.default", Key: key, Header: h, Body: []byte{byte('a' + i)}}); err != nil {
			t.Fatal(err)
		}
		m, err := jetstream.GetMsg(ctx, env.Conn, jetstream.StreamWebhooks, uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, m.Time)
	}
	src, err := jetstream.OpenSource(ctx, env.Conn, jetstream.SourceOptions{MaxAckPending: 16, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Stop)
	oldest := func() time.Time {
		t.Helper()
		got, err := jetstream.OldestUnapplied(ctx, env.Conn)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := oldest(); !got.Equal(stored[0]) {
		t.Fatalf("nothing acknowledged: oldest %v, want k1's %v", got, stored[0])
	}
	// k1 acknowledged: k2 is the oldest; then all: none.
	for i := range 3 {
		nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		m, err := src.Next(nctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Delivery.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		want := time.Time{}
		if i < 2 {
			want = stored[i+1]
		}
		deadline := time.Now().Add(10 * time.Second)
		for got := oldest(); !got.Equal(want); got = oldest() {
			if time.Now().After(deadline) {
				t.Fatalf("after %d acknowledged: oldest %v, want %v", i+1, got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
