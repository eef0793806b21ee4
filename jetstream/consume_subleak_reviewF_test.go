package jetstream

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// While the connection reconnects, a pull request's publish fails at once
// (ReconnectBufSize -1) and the source fetches again every pullPause. But
// nats.go's fetch subscribes to its inbox before it publishes, and returns
// the publish's error without unsubscribing: each failed Fetch leaves a
// subscription (and its channel of 2×prefetch) on the connection, resent
// to the server at the reconnect, for the connection's life.
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
	// Reconnecting for 3 s: about 12 failed pulls at pullPause.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if n := c.NC.NumSubscriptions(); n > base+3 {
			t.Fatalf("while reconnecting: %d subscriptions on the connection, %d before: each failed Fetch leaves its inbox subscription", n, base)
		}
	}
}
