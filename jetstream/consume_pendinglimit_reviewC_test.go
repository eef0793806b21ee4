package jetstream_test

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// The source's doc says what it fetched "waits in nats.go's subscription
// queue, which never drops". That queue has nats.go's pending limits
// (64 MB by default): a prefetch of large bodies that waits for busy
// workers overflows it, and nats.go drops the rest ("slow consumer"),
// which come back only after the ack wait, behind newer events of their
// subjects. 80 deliveries of 1 MB (http.max_body_bytes' default) with a
// prefetch of 80 (serve's prefetch is a quarter of its window, 64 with
// 16 workers) must all reach Next.
// (Review C found this against b1a5374, whose source used Consume; the
// pull loop of one Fetch at a time that replaced it passes.)
func TestReviewCLargeBodiesPrefetchedAreNotDropped(t *testing.T) {
	env := jstest.Start(t, "")
	ctx := t.Context()
	var slow atomic.Int64
	env.Conn.NC.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrSlowConsumer) {
			slow.Add(1)
		}
	})
	const n = 80
	body := bytes.Repeat([]byte("x"), 1<<20-512)
	for i := range n {
		if _, err := env.Conn.JS.Publish(ctx, "webhooks.p.a", append([]byte{byte(i)}, body...)); err != nil {
			t.Fatal(err)
		}
	}
	src, err := jetstream.OpenSource(ctx, env.Conn, jetstream.SourceOptions{MaxAckPending: 1000, Prefetch: n, AckWait: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Stop()
	// Every worker busy: nothing taken until the first pull has ended with
	// its deliveries on the client (a loaded machine may end the pull, of
	// 1 s, with 22 MB of the 80: ci and a run beside one; the rest come
	// by later pulls, once Next took these).
	reviewCWaitInfo(t, env, "the first pull delivered and ended", func(i *js.ConsumerInfo) bool { return i.NumAckPending > 0 && i.NumWaiting == 0 })
	got := 0
	for got < n {
		nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := src.Next(nctx)
		cancel()
		if err != nil {
			break
		}
		if int(m.Event.Body[0]) != got {
			t.Fatalf("delivery %d is event %d", got, m.Event.Body[0])
		}
		got++
		_ = m.Delivery.Ack(ctx)
	}
	if got != n {
		t.Fatalf("%d of %d prefetched 1 MB deliveries reached Next (%d slow-consumer errors): nats.go's subscription queue dropped the rest at its pending limit", got, n, slow.Load())
	}
}
