package jetstream_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
)

// A trickle of events, fewer than prefetch, each published around the end
// of a pull request (pullExpiry) or in the middle of one: Next returns each
// while its pull is not complete. Guard test.
func TestReviewFPatternTrickleIsNotDelayed(t *testing.T) {
	env := jstest.Start(t, "")
	ctx := t.Context()
	src, err := jetstream.OpenSource(ctx, env.Conn, jetstream.SourceOptions{MaxAckPending: 1000, Prefetch: 64, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Stop()
	var worst time.Duration
	for i, gap := range []time.Duration{0, 300, 950, 1000, 1050, 500, 990, 1010, 20, 1200} {
		time.Sleep(gap * time.Millisecond) // the moment of the publish: the parameter under test
		start := time.Now()
		reviewCPublish(t, env, i, 1)
		nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := src.Next(nctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Delivery.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > worst {
			worst = d
		}
	}
	// A loop that held deliveries until its batch (64) was complete would
	// never hand these over: Next's 5 s would end first. How long they took
	// is reported, not asserted (timings belong to benchmarks).
	t.Logf("worst %v from a publish to Next", worst)
}
