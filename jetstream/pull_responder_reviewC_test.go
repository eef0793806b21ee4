package jetstream

import (
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
)

// The probe costs an existing consumer's start nothing: one request,
// answered at once (the leader's 400), and no delivery. Guard test
// (passes on the reviewed code).
func TestReviewCAwaitPullResponderIsImmediateForAnExistingConsumer(t *testing.T) {
	_, c := pullResponderEnv(t)
	ctx := t.Context()
	if _, err := c.JS.CreateStream(ctx, js.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.JS.Publish(ctx, "s.a", []byte("one")); err != nil {
		t.Fatal(err)
	}
	cons, err := c.JS.CreateOrUpdateConsumer(ctx, "S", js.ConsumerConfig{Durable: "d", AckPolicy: js.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	before := c.JS.Conn().Stats().OutMsgs
	start := time.Now()
	awaitPullResponder(ctx, c.JS.Conn(), pullSubject("S", "d"), time.Minute)
	took := time.Since(start)
	probes := c.JS.Conn().Stats().OutMsgs - before
	if probes != 1 {
		t.Fatalf("awaitPullResponder took %v and %d probes for an existing consumer, want one answered at once", took, probes)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Delivered.Consumer != 0 || info.NumPending != 1 {
		t.Fatalf("after the probe: delivered %d, pending %d; want 0, 1", info.Delivered.Consumer, info.NumPending)
	}
}
