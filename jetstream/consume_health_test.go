package jetstream_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	js "github.com/nats-io/nats.go/jetstream"
)

// Pulls the server keeps refusing (here its consumer's MaxRequestExpires
// set below the source's pull expiry behind hookgate's back) take no
// event; the log says so at warn once they have failed for WarnAfter, not
// only at debug, and says when they work again.
func TestSourceWarnsWhenPullsKeepFailing(t *testing.T) {
	env := jstest.Start(t, "")
	ctx := t.Context()
	logger, logged := captureLog()
	waitLog := func(want string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logged(), want); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the log within 10 s: %s", want, logged())
			}
		}
	}
	src, err := jetstream.OpenSource(ctx, env.Conn, jetstream.SourceOptions{MaxAckPending: 1000, Prefetch: 8, AckWait: time.Minute, Log: logger, WarnAfter: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Stop()
	setMaxRequestExpires := func(d time.Duration) {
		t.Helper()
		updateApplyConsumer(t, env, func(cfg *js.ConsumerConfig) { cfg.MaxRequestExpires = d })
	}
	setMaxRequestExpires(100 * time.Millisecond)
	waitLog("consumer pulls keep failing")
	for _, want := range []string{`"level":"WARN"`, "MaxRequestExpires"} {
		if !strings.Contains(logged(), want) {
			t.Errorf("the warning lacks %s: %s", want, logged())
		}
	}
	if strings.Contains(logged(), "consumer pulls work again") {
		t.Fatalf("pulls said to work again while refused: %s", logged())
	}
	setMaxRequestExpires(0)
	if _, err := env.Conn.JS.Publish(ctx, "webhooks.p.a", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := src.Next(nctx); err != nil {
		t.Fatalf("Next after the refusal went away: %v", err)
	}
	waitLog("consumer pulls work again")
}

// updateApplyConsumer changes the durable consumer's configuration behind
// the source's back (as an operator, or a server's limits, would).
func updateApplyConsumer(t *testing.T, env *jstest.Env, change func(*js.ConsumerConfig)) {
	t.Helper()
	c, err := env.Conn.JS.Consumer(t.Context(), jetstream.StreamWebhooks, jetstream.DurableApply)
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.CachedInfo().Config
	change(&cfg)
	if _, err := env.Conn.JS.UpdateConsumer(t.Context(), jetstream.StreamWebhooks, cfg); err != nil {
		t.Fatal(err)
	}
}

// A consumer whose pulls may ask for fewer than the source's prefetch
// (an external server's max_request_batch becomes every new consumer's
// MaxRequestBatch; set on the consumer here) refuses every pull as too
// large: the source pulls no more than the limit from then on, and every
// event reaches Next (before, none did: each pull was refused).
func TestSourcePullsWithinTheServersBatchLimit(t *testing.T) {
	env := jstest.Start(t, "")
	ctx := t.Context()
	src, err := jetstream.OpenSource(ctx, env.Conn, jetstream.SourceOptions{MaxAckPending: 1000, Prefetch: 16, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Stop()
	updateApplyConsumer(t, env, func(cfg *js.ConsumerConfig) { cfg.MaxRequestBatch = 3 })
	const n = 40 // more than the pull already waiting when the limit came (16)
	for range n {
		if _, err := env.Conn.JS.Publish(ctx, "webhooks.p.a", []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		m, err := src.Next(nctx)
		cancel()
		if err != nil {
			t.Fatalf("event %d of %d: Next: %v", i+1, n, err)
		}
		if err := m.Delivery.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
