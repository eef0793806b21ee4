package jetstream_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	js "github.com/nats-io/nats.go/jetstream"
)

// A reconnect while a delivery waits for Next (every worker busy): nats.go's
// Consume pulls a full batch again at the reconnect and re-arms its
// heartbeat timer, which the blocked callback can no longer stop; each
// two heartbeats later it counts a missed heartbeat and pulls another full
// batch. The source's buffer (what the server counts delivered and not
// acknowledged while Next takes nothing) must stay near the prefetch, not
// grow by a prefetch every 2 s up to MaxAckPending: those deliveries get
// no InProgress and wait out the ack wait in nats.go's queue.
// (Review C found this against b1a5374, whose source used Consume; the
// pull loop of one Fetch at a time that replaced it passes.)
func TestReviewCReconnectWhileBlockedKeepsBufferNearPrefetch(t *testing.T) {
	env := jstest.Start(t, "")
	ctx := t.Context()
	const prefetch = 4
	reviewCPublish(t, env, 0, 200)
	src, err := jetstream.OpenSource(ctx, env.Conn, jetstream.SourceOptions{MaxAckPending: 1000, Prefetch: prefetch, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Stop()
	// One delivery taken (a worker busy with it), the rest of the pull waits.
	nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if _, err := src.Next(nctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	reviewCWaitInfo(t, env, "the first pull fulfilled", func(i *js.ConsumerInfo) bool { return i.NumAckPending == prefetch })
	if err := env.Conn.NC.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	// nats.go pulls once more at a reconnect (the old pull may still
	// stand): allow two prefetches, and watch for 12 s (six heartbeat
	// periods of 2 s).
	limit := 2 * prefetch
	var info *js.ConsumerInfo
	for deadline := time.Now().Add(12 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		c, err := env.Conn.JS.Consumer(ctx, jetstream.StreamWebhooks, jetstream.DurableApply)
		if err != nil {
			continue // reconnecting
		}
		info = c.CachedInfo()
		if info.NumAckPending > limit {
			break
		}
	}
	if info == nil {
		t.Fatal("no consumer info after the reconnect within 12 s")
	}
	if info.NumAckPending > limit {
		// Show the growth: poll (10 s) until it passed four prefetches.
		first, now := info.NumAckPending, info.NumAckPending
		for deadline := time.Now().Add(10 * time.Second); now <= 4*prefetch && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if c, err := env.Conn.JS.Consumer(ctx, jetstream.StreamWebhooks, jetstream.DurableApply); err == nil {
				now = c.CachedInfo().NumAckPending
			}
		}
		t.Fatalf("after a reconnect, with Next taking nothing: %d deliveries outstanding (prefetch %d, limit %d), then %d: the source keeps pulling a full batch every 2 s while its callback blocks",
			first, prefetch, limit, now)
	}
	// The reconnect happened, and deliveries go on after it (review AG: a
	// source that stopped pulling passed the check above).
	if env.Conn.NC.Stats().Reconnects == 0 {
		t.Fatal("the connection never reconnected")
	}
	for i := range 3 * prefetch {
		nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		m, err := src.Next(nctx)
		cancel()
		if err != nil {
			t.Fatalf("delivery %d after the reconnect: %v", i, err)
		}
		if err := m.Delivery.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
