package jetstream

import (
	"context"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
)

// A consumer's pull subject with no responder yet (here: the consumer does
// not exist; on a cluster, its new leader's interest not yet propagated):
// awaitPullResponder keeps probing, returns once the leader answers, and
// its probes deliver nothing.
func TestAwaitPullResponderWaitsForTheLeader(t *testing.T) {
	e, c := pullResponderEnv(t)
	ctx := t.Context()
	if _, err := c.JS.CreateStream(ctx, js.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.JS.Publish(ctx, "s.a", []byte("one")); err != nil {
		t.Fatal(err)
	}
	inMsgs := func() int64 {
		v, err := e.Server().Varz(nil)
		if err != nil {
			t.Fatal(err)
		}
		return v.InMsgs
	}
	before := inMsgs()
	done := make(chan struct{})
	go func() {
		defer close(done)
		awaitPullResponder(ctx, c.JS.Conn(), pullSubject("S", "late"), time.Minute)
	}()
	// Five probes went unanswered (each is a message into the server).
	waitTrue(t, "five probes", func() bool { return inMsgs()-before >= 5 })
	select {
	case <-done:
		t.Fatal("awaitPullResponder returned while nothing answered the pull subject")
	default:
	}
	cons, err := c.JS.CreateOrUpdateConsumer(ctx, "S", js.ConsumerConfig{Durable: "late", AckPolicy: js.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("awaitPullResponder did not return within 10s of the consumer's creation")
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Delivered.Consumer != 0 || info.NumAckPending != 0 || info.NumPending != 1 {
		t.Fatalf("after the probes: delivered %d, ack pending %d, pending %d; want 0, 0, 1 (a probe delivers nothing)", info.Delivered.Consumer, info.NumAckPending, info.NumPending)
	}
	batch, err := cons.Fetch(1, js.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for m := range batch.Messages() {
		got = append(got, string(m.Data()))
		_ = m.Ack()
	}
	if len(got) != 1 || got[0] != "one" {
		t.Fatalf("first pull after the probe got %q, want [one]", got)
	}
}

// Nothing ever answers: awaitPullResponder gives up at its bound or when
// ctx ends, so a start is never held by it.
func TestAwaitPullResponderEnds(t *testing.T) {
	_, c := pullResponderEnv(t)
	for _, tc := range []struct {
		name   string
		bound  time.Duration
		cancel bool
	}{
		{"bound", 200 * time.Millisecond, false},
		{"ctx", time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan struct{})
			go func() {
				defer close(done)
				awaitPullResponder(ctx, c.JS.Conn(), pullSubject("S", "never"), tc.bound)
			}()
			if tc.cancel {
				cancel()
			}
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("awaitPullResponder still waiting after 10s")
			}
		})
	}
}

func pullResponderEnv(t *testing.T) (*Embedded, *Conn) {
	t.Helper()
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	t.Cleanup(func() { c.Close(); e.Shutdown() })
	return e, c
}
