package jetstream

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// While the connection reconnects, a pull request's publish fails at once
// (ReconnectBufSize -1). nats.go's fetch, which the source used until stop
// 31, subscribed to its inbox before it published and returned the
// publish's error without unsubscribing: each failed Fetch left a
// subscription (and its channel of 2×prefetch) on the connection, resent
// to the server at the reconnect, for the connection's life. The source now
// waits out a reconnect before it pulls (so no pull is tried here; review
// AG) and pulls on one inbox subscription for its life: this guards that
// no subscription piles up while the connection is down, whatever a later
// pull loop does.
func TestReviewFPatternNoSubscriptionLeakWhileReconnecting(t *testing.T) {
	srv := startTCPServer(t)
	c := srv.c
	ctx := t.Context()
	src, err := OpenSource(ctx, c, SourceOptions{MaxAckPending: 1000, Prefetch: 64, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Stop()
	base := c.NC.NumSubscriptions()
	srv.shutdown()
	for deadline := time.Now().Add(5 * time.Second); c.NC.Status() != nats.RECONNECTING; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("connection not reconnecting within 5 s: %v", c.NC.Status())
		}
	}
	// Reconnecting for 3 s.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if n := c.NC.NumSubscriptions(); n > base+3 {
			t.Fatalf("while reconnecting: %d subscriptions on the connection, %d before: each failed Fetch leaves its inbox subscription", n, base)
		}
	}
}
