package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// The durable consumer deleted under a running consumer (an operator's
// `nats consumer rm`, a stream reset): the source's iterator closes, and
// Run returns its error, so serve stops instead of running on without
// applying anything.
func TestRunReturnsWhenDurableConsumerIsDeleted(t *testing.T) {
	env := jstest.Start(t, "")
	ctx := t.Context()
	proc := consumer.NewProcessor(map[string]consumer.Rule{}, env.Marks, env.Applied, jetstream.NewEffects(env.Conn), discardAudit{},
		slog.New(slog.DiscardHandler), nil, consumer.Options{Owner: "me", LeaseTTL: 40 * time.Second})
	src, err := jetstream.OpenSource(ctx, env.Conn, jetstream.SourceOptions{MaxAckPending: 128, AckWait: 40 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- proc.Run(runCtx, src, 8) }()
	// Delete it once its pull request waits at the server (deleted before,
	// the pull goes unanswered and only the missed heartbeats end it).
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := env.Conn.JS.Consumer(ctx, jetstream.StreamWebhooks, jetstream.DurableApply)
		if err != nil {
			t.Fatal(err)
		}
		if c.CachedInfo().NumWaiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no pull request reached the server")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := env.Conn.JS.DeleteConsumer(ctx, jetstream.StreamWebhooks, jetstream.DurableApply); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, js.ErrMsgIteratorClosed) {
			t.Fatalf("Run returned %v, want the closed iterator's error", err)
		}
	case <-time.After(15 * time.Second):
		stop()
		t.Fatalf("Run still running 15 s after its durable consumer was deleted; returned %v only when ctx was cancelled", <-done)
	}
}

// A stop hands back the deliveries the source had received and not yet
// given to a worker (nats.go's prefetch buffer): a restart gets them at
// once. Dropped with the buffer, they waited out the ack wait while newer
// events of their subjects applied first and turned them stale.
func TestStopHandsBackPrefetchedDeliveries(t *testing.T) {
	env := jstest.Start(t, "")
	ctx := t.Context()
	const n = 200
	pub := jetstream.NewPublisher(env.Conn, 5*time.Second)
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for i := range n {
		key := fmt.Sprintf("p:default:evt:%d", i)
		h := nats.Header{}
		h.Set(event.HeaderKey, key)
		h.Set(event.HeaderProvider, "p")
		h.Set(event.HeaderAccount, "default")
		h.Set(event.HeaderSubject, fmt.Sprintf("G-%d", i))
		h.Set(event.HeaderOccurredAt, t0.Format(time.RFC3339Nano))
		if _, err := pub.Publish(ctx, jetstream.Message{Subject: "webhooks.p.default", Key: key, Header: h, Body: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	fx := jetstream.NewEffects(env.Conn)
	newProc := func(effects ...consumer.Effect) *consumer.Processor {
		effects = append(effects, consumer.GrantsEffect{Template: "grants.{provider}.{subject}", Grants: fx})
		return consumer.NewProcessor(map[string]consumer.Rule{"p": {Watermark: true, Effects: effects}}, env.Marks, env.Applied, fx, discardAudit{},
			slog.New(slog.DiscardHandler), nil, consumer.Options{Owner: "me", MaxDeliver: 3, LeaseTTL: time.Minute})
	}
	// The ack wait is far longer than the test waits below: a delivery left
	// unsettled shows.
	opts := jetstream.SourceOptions{MaxAckPending: 128, AckWait: 5 * time.Minute}

	release := make(chan struct{})
	held := consumer.EffectFunc(func(ctx context.Context, _ consumer.Event) error {
		<-release
		return nil
	})
	src, err := jetstream.OpenSource(ctx, env.Conn, opts)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- newProc(held).Run(runCtx, src, 4) }()
	// Wait until the source holds deliveries beyond the 4 the workers run.
	deadline := time.Now().Add(10 * time.Second)
	for {
		pending, err := src.Pending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		info, err := env.Conn.JS.Consumer(ctx, jetstream.StreamWebhooks, jetstream.DurableApply)
		if err != nil {
			t.Fatal(err)
		}
		if info.CachedInfo().NumAckPending > 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the source never prefetched beyond the workers' 4 (lag %d)", pending)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	close(release) // the 4 running events finish
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	src.Stop()

	// A restart applies every event, well inside the ack wait.
	src2, err := jetstream.OpenSource(ctx, env.Conn, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer src2.Stop()
	runCtx2, stop2 := context.WithCancel(ctx)
	defer stop2()
	go func() { _ = newProc().Run(runCtx2, src2, 4) }()
	grants, err := env.Conn.JS.Stream(ctx, jetstream.StreamGrants)
	if err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		info, err := grants.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after the restart GRANTS holds %d of %d events: deliveries of the stopped run wait out the ack wait", info.State.Msgs, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// 100 subjects, each with an older event (seq 1-100) and a newer one
// (seq 101-200). A stop while older ones are running, queued or prefetched,
// then what serve does in embedded mode: close, shut the server down,
// start it on the same data_dir, run again. Every event applies: what the
// stop handed back is redelivered before the newer events of its subjects.
// (A plain negative acknowledgement lives in the server's memory only: the
// restarted server redelivered those after the ack wait, behind the newer
// events, and 28 of 200 were judged stale.)
func TestEmbeddedRestartAfterStopKeepsOrder(t *testing.T) {
	dir := t.TempDir()
	env := jstest.Start(t, dir)
	ctx := t.Context()
	pub := jetstream.NewPublisher(env.Conn, 5*time.Second)
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for i := range 200 {
		key := fmt.Sprintf("p:default:evt:%d", i)
		h := nats.Header{}
		h.Set(event.HeaderKey, key)
		h.Set(event.HeaderProvider, "p")
		h.Set(event.HeaderAccount, "default")
		h.Set(event.HeaderSubject, fmt.Sprintf("G-%d", i%100))
		h.Set(event.HeaderOccurredAt, t0.Add(time.Duration(i/100)*time.Second).Format(time.RFC3339Nano))
		if _, err := pub.Publish(ctx, jetstream.Message{Subject: "webhooks.p.default", Key: key, Header: h, Body: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	newProc := func(env *jstest.Env, effects ...consumer.Effect) *consumer.Processor {
		fx := jetstream.NewEffects(env.Conn)
		effects = append(effects, consumer.GrantsEffect{Template: "grants.{provider}.{subject}", Grants: fx})
		return consumer.NewProcessor(map[string]consumer.Rule{"p": {Watermark: true, Effects: effects}}, env.Marks, env.Applied, fx, discardAudit{},
			slog.New(slog.DiscardHandler), nil, consumer.Options{Owner: "me", MaxDeliver: 3, LeaseTTL: time.Minute})
	}
	opts := jetstream.SourceOptions{MaxAckPending: 128, AckWait: 5 * time.Second}
	release := make(chan struct{})
	held := consumer.EffectFunc(func(context.Context, consumer.Event) error {
		<-release
		return nil
	})
	src, err := jetstream.OpenSource(ctx, env.Conn, opts)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- newProc(env, held).Run(runCtx, src, 4) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, err := env.Conn.JS.Consumer(ctx, jetstream.StreamWebhooks, jetstream.DurableApply)
		if err != nil {
			t.Fatal(err)
		}
		if c.CachedInfo().NumAckPending > 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the source never prefetched beyond the workers' 4")
		}
	}
	stop()
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	src.Stop()
	env.Conn.Close()
	env.Embedded.Shutdown()

	env2 := jstest.Start(t, dir)
	src2, err := jetstream.OpenSource(ctx, env2.Conn, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer src2.Stop()
	runCtx2, stop2 := context.WithCancel(ctx)
	defer stop2()
	go func() { _ = newProc(env2).Run(runCtx2, src2, 4) }()
	grants, err := env2.Conn.JS.Stream(ctx, jetstream.StreamGrants)
	if err != nil {
		t.Fatal(err)
	}
	var applied uint64
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		c, err := env2.Conn.JS.Consumer(ctx, jetstream.StreamWebhooks, jetstream.DurableApply)
		if err != nil {
			t.Fatal(err)
		}
		info, err := grants.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		applied = info.State.Msgs
		if ci := c.CachedInfo(); ci.NumAckPending == 0 && ci.NumPending == 0 {
			break
		}
	}
	if applied != 200 {
		t.Fatalf("%d of 200 events applied after the restart: older events were redelivered after their subject's newer event (stale) or not yet", applied)
	}
}

// What a stop hands back comes first after a restart of the server, before
// the newer events of the same subjects that arrived while hookgate was
// down. (With a plain negative acknowledgement, kept in the server's memory
// only, the newer events came first and 16 of the 20 older ones turned
// stale.)
func TestRestartPullsHandedBackEventsBeforeNewerOnes(t *testing.T) {
	dir := t.TempDir()
	env := jstest.Start(t, dir)
	ctx := t.Context()
	const subjects = 20
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	publish := func(env *jstest.Env, round int) {
		pub := jetstream.NewPublisher(env.Conn, 5*time.Second)
		for i := range subjects {
			key := fmt.Sprintf("p:default:evt:%d-%d", round, i)
			h := nats.Header{}
			h.Set(event.HeaderKey, key)
			h.Set(event.HeaderProvider, "p")
			h.Set(event.HeaderAccount, "default")
			h.Set(event.HeaderSubject, fmt.Sprintf("G-%d", i))
			h.Set(event.HeaderOccurredAt, t0.Add(time.Duration(round)*time.Second).Format(time.RFC3339Nano))
			if _, err := pub.Publish(ctx, jetstream.Message{Subject: "webhooks.p.default", Key: key, Header: h, Body: []byte("{}")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	newProc := func(env *jstest.Env, effects ...consumer.Effect) *consumer.Processor {
		fx := jetstream.NewEffects(env.Conn)
		effects = append(effects, consumer.GrantsEffect{Template: "grants.{provider}.{subject}", Grants: fx})
		return consumer.NewProcessor(map[string]consumer.Rule{"p": {Watermark: true, Effects: effects}}, env.Marks, env.Applied, fx, discardAudit{},
			slog.New(slog.DiscardHandler), nil, consumer.Options{Owner: "me", MaxDeliver: 3, LeaseTTL: time.Minute})
	}
	opts := jetstream.SourceOptions{MaxAckPending: 128, AckWait: time.Minute}

	// Run 1: the older event of every subject is delivered, 4 of them run
	// (held), the rest wait; then a stop and a server restart.
	publish(env, 0)
	release := make(chan struct{})
	held := consumer.EffectFunc(func(context.Context, consumer.Event) error {
		<-release
		return nil
	})
	src, err := jetstream.OpenSource(ctx, env.Conn, opts)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- newProc(env, held).Run(runCtx, src, 4) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, err := env.Conn.JS.Consumer(ctx, jetstream.StreamWebhooks, jetstream.DurableApply)
		if err != nil {
			t.Fatal(err)
		}
		if c.CachedInfo().NumAckPending == subjects {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events delivered", c.CachedInfo().NumAckPending, subjects)
		}
	}
	stop()
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	src.Stop()
	env.Conn.Close()
	env.Embedded.Shutdown()

	// The newer event of every subject arrives while hookgate is down;
	// then the consumer starts.
	env2 := jstest.Start(t, dir)
	publish(env2, 1)
	src2, err := jetstream.OpenSource(ctx, env2.Conn, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer src2.Stop()
	runCtx2, stop2 := context.WithCancel(ctx)
	defer stop2()
	go func() { _ = newProc(env2).Run(runCtx2, src2, 4) }()
	grants, err := env2.Conn.JS.Stream(ctx, jetstream.StreamGrants)
	if err != nil {
		t.Fatal(err)
	}
	var applied uint64
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		c, err := env2.Conn.JS.Consumer(ctx, jetstream.StreamWebhooks, jetstream.DurableApply)
		if err != nil {
			t.Fatal(err)
		}
		info, err := grants.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		applied = info.State.Msgs
		if ci := c.CachedInfo(); ci.NumAckPending == 0 && ci.NumPending == 0 {
			break
		}
	}
	if applied != 2*subjects {
		t.Fatalf("%d of %d events applied: handed-back older events came after the newer ones of their subjects (stale) or not at all", applied, 2*subjects)
	}
}
