package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/nats-io/nats.go"
)

// Review AK: the source's inbox channel holds 2*prefetch+64 messages,
// "large enough for two whole batches (a pull's, and a late one's of a
// pull given up on)". But pullOnce gives a pull up on its `lost` timer
// (pullExpiry+1s after it was published) also when the pull is not lost at
// all and its deliveries simply wait in the channel for a slow Next (every
// worker busy with a slow forward). It then pulls again while the rest of
// the batch still waits, and again 2 s later: the channel fills by up to
// a whole batch per 2 s, bounded only by MaxAckPending, not by its
// capacity, and nats.go drops deliveries ("slow consumer"). A dropped
// delivery comes back only after the ack wait, behind newer events of its
// subject (stale). Here one worker needs 500 ms an event (a slow forward),
// prefetch 64, MaxAckPending 1000: nats.go drops within a few pulls.
// serve's own sizing is exposed too: 8 workers give prefetch 32 (channel
// 128) under a MaxAckPending of 128 + retryRoom.
func TestReviewAKSlowNextOverflowsPullInbox(t *testing.T) {
	env := jstest.Start(t, "")
	ctx := t.Context()
	var slow atomic.Int64
	env.Conn.NC.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrSlowConsumer) {
			slow.Add(1)
		}
	})
	const n = 400
	for i := range n {
		if _, err := env.Conn.JS.Publish(ctx, "webhooks.p.a", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	src, err := jetstream.OpenSource(ctx, env.Conn, jetstream.SourceOptions{MaxAckPending: 1000, Prefetch: 64, AckWait: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Stop()
	taken := 0
	for taken < 40 && slow.Load() == 0 {
		nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		m, err := src.Next(nctx)
		cancel()
		if err != nil {
			t.Fatalf("Next after %d: %v", taken, err)
		}
		if m.Deliveries != 1 {
			t.Fatalf("delivery %d is a redelivery (%d)", taken, m.Deliveries)
		}
		taken++
		// The worker's work: a forward that takes 500 ms (not a wait for
		// any state of the source).
		time.Sleep(500 * time.Millisecond)
		_ = m.Delivery.Ack(ctx)
	}
	if s := slow.Load(); s != 0 {
		t.Fatalf("after %d deliveries taken at 2/s with prefetch 64: %d slow-consumer drops on the pull inbox (capacity 2*64+64): pullOnce pulls again every 2 s while its batch still waits for Next", taken, s)
	}
}
