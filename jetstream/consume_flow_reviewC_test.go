package jetstream_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	js "github.com/nats-io/nats.go/jetstream"
)

// With the callback blocked (Next takes nothing) and no reconnect, the
// source pulls nothing more: through several heartbeat periods and a pull
// expiry the server counts no more than the prefetch delivered; once Next
// takes them, the rest follows in order. Guard test (passes on the
// reviewed code).
func TestReviewCBlockedCallbackStopsPulling(t *testing.T) {
	env := jstest.Start(t, "")
	ctx := t.Context()
	const prefetch = 4
	reviewCPublish(t, env, 0, 40)
	src, err := jetstream.OpenSource(ctx, env.Conn, jetstream.SourceOptions{MaxAckPending: 1000, Prefetch: prefetch, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Stop()
	reviewCWaitInfo(t, env, "the first pull fulfilled", func(i *js.ConsumerInfo) bool { return i.NumAckPending == prefetch })
	// Watch 7 s: past a pull expiry (5 s) and three heartbeat timeouts (2 s).
	for deadline := time.Now().Add(7 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		c, err := env.Conn.JS.Consumer(ctx, jetstream.StreamWebhooks, jetstream.DurableApply)
		if err != nil {
			t.Fatal(err)
		}
		if n := c.CachedInfo().NumAckPending; n > prefetch {
			t.Fatalf("with the callback blocked, %d delivered and unacknowledged, prefetch %d", n, prefetch)
		}
	}
	for i := range 40 {
		nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		m, err := src.Next(nctx)
		cancel()
		if err != nil {
			t.Fatalf("Next %d: %v", i, err)
		}
		if got := string(m.Event.Body); got != strconv.Itoa(i) {
			t.Fatalf("Next %d returned %s", i, got)
		}
		_ = m.Delivery.Ack(ctx)
	}
}
