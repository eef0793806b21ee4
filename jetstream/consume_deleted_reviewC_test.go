package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	js "github.com/nats-io/nats.go/jetstream"
)

// reviewCConsumerInfo polls the durable consumer's info until cond holds
// (30 s), failing with what. A question that fails is asked again: under
// load (80 MB being delivered on the same connection) one timed out.
func reviewCWaitInfo(t *testing.T, env *jstest.Env, what string, cond func(*js.ConsumerInfo) bool) *js.ConsumerInfo {
	t.Helper()
	last := &js.ConsumerInfo{}
	var lastErr error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, err := env.Conn.JS.Consumer(t.Context(), jetstream.StreamWebhooks, jetstream.DurableApply)
		if err == nil {
			last = c.CachedInfo()
			if cond(last) {
				return last
			}
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("not within 30 s: %s (ack pending %d, waiting pulls %d, delivered %d; last error %v)", what, last.NumAckPending, last.NumWaiting, last.Delivered.Consumer, lastErr)
		}
	}
}

func reviewCPublish(t *testing.T, env *jstest.Env, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if _, err := env.Conn.JS.Publish(t.Context(), "webhooks.p.a", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
}

// The durable consumer deleted while the source's pull request has been
// fulfilled and its deliveries wait for Next (every worker busy: no pull
// request waits at the server, so none gets the "409 Consumer Deleted").
// Once Next has taken them, the source pulls again and the pull subject
// answers "503 no responders", which nats.go's Consume takes as
// recoverable: it pulls again after each two missed heartbeats, forever.
// Next must end with an error, as TestRunReturnsWhenDurableConsumerIsDeleted
// requires when a pull request waits.
// (Review C found this against b1a5374, whose source used Consume; the
// pull loop of one Fetch at a time that replaced it passes.)
func TestReviewCNextEndsWhenConsumerDeletedWhileDeliveriesWait(t *testing.T) {
	env := jstest.Start(t, "")
	ctx := t.Context()
	reviewCPublish(t, env, 0, 10)
	src, err := jetstream.OpenSource(ctx, env.Conn, jetstream.SourceOptions{MaxAckPending: 1000, Prefetch: 4, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Stop()
	// The first pull (4) is fulfilled; its deliveries wait for Next.
	reviewCWaitInfo(t, env, "4 deliveries out and no pull request waiting", func(i *js.ConsumerInfo) bool {
		return i.NumAckPending == 4 && i.NumWaiting == 0
	})
	if err := env.Conn.JS.DeleteConsumer(ctx, jetstream.StreamWebhooks, jetstream.DurableApply); err != nil {
		t.Fatal(err)
	}
	took := 0
	deadline := time.Now().Add(20 * time.Second)
	for {
		nctx, cancel := context.WithDeadline(ctx, deadline)
		m, err := src.Next(nctx)
		cancel()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Next still blocked 20 s after the durable consumer was deleted (it returned the %d deliveries received before): the source never reports the deletion", took)
			}
			if !errors.Is(err, js.ErrMsgIteratorClosed) || !errors.Is(err, js.ErrConsumerNotFound) {
				t.Fatalf("Next: %v, want the closed iterator's error naming the missing consumer", err)
			}
			t.Logf("Next: %v after %d deliveries", err, took)
			return
		}
		took++
		_ = m.Delivery.Ack(ctx)
	}
}
