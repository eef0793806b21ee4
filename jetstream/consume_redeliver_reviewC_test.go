package jetstream_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream"
	js "github.com/nats-io/nats.go/jetstream"
)

// Workers busy past the ack wait while deliveries wait in the source
// (no InProgress reaches them there), with a reconnect meanwhile: the
// pulls after the workers are free may get them again while the originals
// are still queued. Every event still applies once, the older event of each subject
// before the newer (none judged stale), and nothing stays unacknowledged.
// Guard test (passes on the reviewed code).
func TestReviewCRedeliveredWhileQueuedStillAppliesInOrder(t *testing.T) {
	e := newStopRestartEnv(t, 3*time.Second)
	e.opts.Prefetch = 4
	e.opts.MaxAckPending = 1000
	e.publish(0, 0, 30)
	e.publish(1, 0, 30)
	ctx := t.Context()
	release := make(chan struct{})
	held := consumer.EffectFunc(func(context.Context, consumer.Event) error {
		<-release
		return nil
	})
	src, err := jetstream.OpenSource(ctx, e.env.Conn, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Stop()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- e.processor(held).Run(runCtx, src, 2) }()
	// The source fetches no more than its prefetch while Next is not
	// called: two in the workers, the rest queued unsettled.
	reviewCWaitInfo(t, e.env, "the workers busy and the prefetch received", func(i *js.ConsumerInfo) bool { return i.NumAckPending >= 4 })
	if err := e.env.Conn.NC.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	// Past the queued deliveries' ack wait (3 s, by the server's clock of
	// the last delivery): the pulls after the release get them again
	// beside the originals.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		// Errors while the connection is back to the server are skipped.
		c, err := e.env.Conn.JS.Consumer(ctx, jetstream.StreamWebhooks, jetstream.DurableApply)
		if err == nil {
			if last := c.CachedInfo().Delivered.Last; last != nil && time.Since(*last) > 4*time.Second {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the last delivery not older than the ack wait within 20 s (last error %v)", err)
		}
	}
	close(release)
	grants, err := e.env.Conn.JS.Stream(ctx, jetstream.StreamGrants)
	if err != nil {
		t.Fatal(err)
	}
	var applied uint64
	var pending int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		info, err := grants.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if applied, pending = info.State.Msgs, e.ackPending(); applied == 60 && pending == 0 {
			break
		}
	}
	if applied != 60 || pending != 0 {
		t.Fatalf("GRANTS holds %d of 60 events, %d unacknowledged: redelivered copies of queued deliveries broke the order (stale) or were left", applied, pending)
	}
	c, err := e.env.Conn.JS.Consumer(ctx, jetstream.StreamWebhooks, jetstream.DurableApply)
	if err != nil {
		t.Fatal(err)
	}
	// Deliveries beyond one per stored event are redeliveries. The source
	// pulls only once Next took a whole batch, so whether the expired ones
	// come back before their originals are acknowledged is a race (CI saw
	// both): reported, not required.
	if info, err := c.Info(ctx); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("redeliveries: %d", info.Delivered.Consumer-info.Delivered.Stream)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
