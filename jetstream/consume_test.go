package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
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
	// Delete it once its pull request waits at the server, which answers
	// "409 Consumer Deleted" (deleted while no pull waits, the next pull
	// gets "no responders": TestReviewCNextEndsWhenConsumerDeletedWhileDeliveriesWait).
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

// stopRestartEnv runs the consumer over a real embedded server for the
// stop and restart tests: events of provider p, applied under watermark
// ordering with a publish to GRANTS.
type stopRestartEnv struct {
	t    *testing.T
	dir  string
	env  *jstest.Env
	opts jetstream.SourceOptions
}

func newStopRestartEnv(t *testing.T, ackWait time.Duration) *stopRestartEnv {
	dir := t.TempDir()
	return &stopRestartEnv{t: t, dir: dir, env: jstest.Start(t, dir), opts: jetstream.SourceOptions{MaxAckPending: 128, AckWait: ackWait}}
}

// publish stores one event per subject G-<first>..G-<first+n-1>, keys
// <round>-<i>, occurred at round seconds past a fixed time.
func (e *stopRestartEnv) publish(round, first, n int) {
	e.t.Helper()
	pub := jetstream.NewPublisher(e.env.Conn, 5*time.Second)
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for i := first; i < first+n; i++ {
		key := fmt.Sprintf("p:default:evt:%d-%d", round, i)
		h := nats.Header{}
		h.Set(event.HeaderKey, key)
		h.Set(event.HeaderProvider, "p")
		h.Set(event.HeaderAccount, "default")
		h.Set(event.HeaderSubject, fmt.Sprintf("G-%d", i))
		h.Set(event.HeaderOccurredAt, t0.Add(time.Duration(round)*time.Second).Format(time.RFC3339Nano))
		if _, err := pub.Publish(e.t.Context(), jetstream.Message{Subject: "webhooks.p.default", Key: key, Header: h, Body: []byte("{}")}); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *stopRestartEnv) processor(effects ...consumer.Effect) *consumer.Processor {
	fx := jetstream.NewEffects(e.env.Conn)
	effects = append(effects, consumer.GrantsEffect{Template: "grants.{provider}.{subject}", Grants: fx})
	return consumer.NewProcessor(map[string]consumer.Rule{"p": {Watermark: true, Effects: effects}}, e.env.Marks, e.env.Applied, fx, discardAudit{},
		slog.New(slog.DiscardHandler), nil, consumer.Options{Owner: "me", MaxDeliver: 3, LeaseTTL: time.Minute})
}

// ackPending is the durable consumer's count of unacknowledged deliveries.
func (e *stopRestartEnv) ackPending() int {
	e.t.Helper()
	c, err := e.env.Conn.JS.Consumer(e.t.Context(), jetstream.StreamWebhooks, jetstream.DurableApply)
	if err != nil {
		e.t.Fatal(err)
	}
	return c.CachedInfo().NumAckPending
}

// runAndStop runs the consumer with 4 workers whose effects hang, until
// the server counts more than `beyond` deliveries unacknowledged, then
// stops it; the 4 running events then finish.
func (e *stopRestartEnv) runAndStop(beyond int) {
	e.t.Helper()
	release := make(chan struct{})
	held := consumer.EffectFunc(func(context.Context, consumer.Event) error {
		<-release
		return nil
	})
	src, err := jetstream.OpenSource(e.t.Context(), e.env.Conn, e.opts)
	if err != nil {
		e.t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(e.t.Context())
	done := make(chan error, 1)
	go func() { done <- e.processor(held).Run(runCtx, src, 4) }()
	for deadline := time.Now().Add(10 * time.Second); e.ackPending() <= beyond; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			e.t.Fatalf("the server never counted more than %d deliveries unacknowledged", beyond)
		}
	}
	stop()
	close(release)
	if err := <-done; err != nil {
		e.t.Fatal(err)
	}
	src.Stop()
}

// restartServer is what serve does at a stop and a start in embedded mode.
func (e *stopRestartEnv) restartServer() {
	e.env.Conn.Close()
	e.env.Embedded.Shutdown()
	e.env = jstest.Start(e.t, e.dir)
}

// runUntilApplied runs the consumer again until GRANTS holds want events
// and nothing is unacknowledged, or within; it returns how many it holds.
func (e *stopRestartEnv) runUntilApplied(want uint64, within time.Duration) uint64 {
	e.t.Helper()
	ctx := e.t.Context()
	src, err := jetstream.OpenSource(ctx, e.env.Conn, e.opts)
	if err != nil {
		e.t.Fatal(err)
	}
	defer src.Stop()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = e.processor().Run(runCtx, src, 4) }()
	grants, err := e.env.Conn.JS.Stream(ctx, jetstream.StreamGrants)
	if err != nil {
		e.t.Fatal(err)
	}
	var applied uint64
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		info, err := grants.Info(ctx)
		if err != nil {
			e.t.Fatal(err)
		}
		if applied = info.State.Msgs; applied == want && e.ackPending() == 0 {
			break
		}
	}
	return applied
}

// A stop hands back the deliveries the source had received and not yet
// given to a worker (nats.go's prefetch buffer): a new run gets them at
// once. Dropped with the buffer, they waited out the ack wait while newer
// events of their subjects applied first and turned them stale.
func TestStopHandsBackPrefetchedDeliveries(t *testing.T) {
	// The ack wait is far longer than the test waits: a delivery left
	// unsettled shows.
	e := newStopRestartEnv(t, 5*time.Minute)
	e.publish(0, 0, 200)
	e.runAndStop(4) // beyond the 4 the workers run: prefetched
	if got := e.runUntilApplied(200, 30*time.Second); got != 200 {
		t.Fatalf("30 s after the new run GRANTS holds %d of 200 events: deliveries of the stopped run wait out the ack wait", got)
	}
}

// 100 subjects, each with an older event and a newer one, all stored
// before the run. A stop while older ones are running, queued or
// prefetched, then what serve does in embedded mode: close, shut the
// server down, start it on the same data_dir, run again. Every event
// applies: what the stop handed back is redelivered before the newer
// events of its subjects. (A plain negative acknowledgement lives in the
// server's memory only: the restarted server redelivered those after the
// ack wait, behind the newer events, and 28 of 200 were judged stale.)
func TestEmbeddedRestartAfterStopKeepsOrder(t *testing.T) {
	e := newStopRestartEnv(t, 5*time.Second)
	e.publish(0, 0, 100)
	e.publish(1, 0, 100)
	e.runAndStop(4)
	e.restartServer()
	if got := e.runUntilApplied(200, 15*time.Second); got != 200 {
		t.Fatalf("%d of 200 events applied after the restart: older events were redelivered after their subject's newer event (stale) or not yet", got)
	}
}

// What a stop hands back comes first after a restart of the server, before
// the newer events of the same subjects that arrived while hookgate was
// down. (With a plain negative acknowledgement, kept in the server's memory
// only, the newer events came first and 16 of the 20 older ones turned
// stale.)
func TestRestartPullsHandedBackEventsBeforeNewerOnes(t *testing.T) {
	e := newStopRestartEnv(t, time.Minute)
	e.publish(0, 0, 20)
	e.runAndStop(19) // all 20 delivered: 4 run, 16 wait
	e.restartServer()
	e.publish(1, 0, 20)
	if got := e.runUntilApplied(40, 20*time.Second); got != 40 {
		t.Fatalf("%d of 40 events applied: handed-back older events came after the newer ones of their subjects (stale) or not at all", got)
	}
}

// RedeliverOutstanding: deliveries fetched and never settled (their
// process died) are due again at once, from the ack floor in stream order,
// not after the ack wait; with nothing outstanding, or no consumer yet, it
// does nothing; nor with too many settled events above the floor, or ones
// stored too long ago.
func TestRedeliverOutstanding(t *testing.T) {
	env := jstest.Start(t, "")
	ctx := t.Context()
	if n, _, _, err := jetstream.RedeliverOutstanding(ctx, env.Conn, 100, time.Time{}); err != nil || n != 0 {
		t.Fatalf("no consumer yet: %d outstanding, %v; want 0, nil", n, err)
	}
	pub := jetstream.NewPublisher(env.Conn, 5*time.Second)
	for i := range 4 {
		key := fmt.Sprintf("p:default:evt:%d", i)
		if _, err := pub.Publish(ctx, jetstream.Message{Subject: "webhooks.p.default", Key: key, Header: nats.Header{event.HeaderKey: {key}}, Body: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	// The ack wait is far beyond the test: a delivery left to it would
	// not come back.
	cons, err := env.Conn.JS.CreateOrUpdateConsumer(ctx, jetstream.StreamWebhooks, js.ConsumerConfig{
		Durable: jetstream.DurableApply, AckPolicy: js.AckExplicitPolicy, AckWait: time.Hour, FilterSubject: "webhooks.>",
	})
	if err != nil {
		t.Fatal(err)
	}
	// fetch gets up to n deliveries, acknowledges stream sequence 2's and
	// hands back nak's, and returns their stream sequences. It answers
	// only once the whole batch is in: a nak sent while the pull is still
	// open lets the server deliver that message again in the same batch,
	// ahead of the ones not yet sent (a redelivery goes first).
	fetch := func(n int, nak uint64) []uint64 {
		t.Helper()
		batch, err := cons.Fetch(n, js.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var msgs []js.Msg
		for m := range batch.Messages() {
			msgs = append(msgs, m)
		}
		if err := batch.Error(); err != nil {
			t.Fatal(err)
		}
		var seqs []uint64
		for _, m := range msgs {
			meta, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			seqs = append(seqs, meta.Sequence.Stream)
			switch meta.Sequence.Stream {
			case 2: // above the floor, acknowledged
				err = m.DoubleAck(ctx)
			case nak:
				err = m.Nak()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		return seqs
	}
	if got := fetch(3, 0); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("first fetch: %v", got)
	}
	// One settled event (2) above the floor: more than allowed.
	if n, _, _, err := jetstream.RedeliverOutstanding(ctx, env.Conn, 0, time.Time{}); !errors.Is(err, jetstream.ErrTooFarBehind) || n != 2 {
		t.Fatalf("with no settled event to run again: %d outstanding, %v; want 2, ErrTooFarBehind", n, err)
	}
	// The first event above the floor stored before the given time: too
	// old to run again (settled ones may be forgotten as applied).
	if n, _, _, err := jetstream.RedeliverOutstanding(ctx, env.Conn, 3, time.Now().Add(time.Hour)); !errors.Is(err, jetstream.ErrTooFarBehind) || n != 2 {
		t.Fatalf("with events stored before the bound: %d outstanding, %v; want 2, ErrTooFarBehind", n, err)
	}
	// Three events from the floor to the last delivery, but two of them
	// outstanding (they run again whichever way): one settled, allowed.
	n, from, through, err := jetstream.RedeliverOutstanding(ctx, env.Conn, 1, time.Now().Add(-time.Hour))
	if err != nil || n != 2 || from != 1 || through != 3 {
		t.Fatalf("RedeliverOutstanding = %d, %d-%d, %v; want 2 outstanding, from 1 through 3 (the last delivered)", n, from, through, err)
	}
	// 1 and 3 again at once, in stream order with 2 (acknowledged above the
	// floor: delivered again too), before 4. 3 is handed back.
	if got := fetch(4, 3); fmt.Sprint(got) != "[1 2 3 4]" {
		t.Fatalf("after the reset: %v, want [1 2 3 4]", got)
	}
	// 3 redelivered: a retry outstanding too. A reset still brings every
	// outstanding delivery back at once, in order.
	if got := fetch(1, 0); fmt.Sprint(got) != "[3]" {
		t.Fatalf("after handing 3 back: %v, want [3]", got)
	}
	// 3, retried, counts against the bound with 2, settled: a reset would
	// make a retry waiting out its backoff due at once.
	if n, _, _, err := jetstream.RedeliverOutstanding(ctx, env.Conn, 1, time.Time{}); !errors.Is(err, jetstream.ErrTooFarBehind) || n != 3 {
		t.Fatalf("with a retried delivery and a settled one above the floor, at most 1: %d outstanding, %v; want 3, ErrTooFarBehind", n, err)
	}
	if n, from, _, err := jetstream.RedeliverOutstanding(ctx, env.Conn, 100, time.Time{}); err != nil || n != 3 || from != 1 {
		t.Fatalf("with 3 redelivered outstanding: %d, %d, %v; want 3 outstanding, from 1", n, from, err)
	}
	if got := fetch(4, 0); fmt.Sprint(got) != "[1 2 3 4]" {
		t.Fatalf("after the second reset: %v, want [1 2 3 4]", got)
	}
	if got := fetch(1, 0); len(got) != 0 {
		t.Fatalf("then: %v, want nothing", got)
	}
}

// While the consumer does not ask for its next delivery (every worker
// busy), the source's waiting pull requests get status messages
// (heartbeats, timeouts); deliveries arriving after them must not be
// dropped. nats.go's message iterator, used before, buffered them in a
// channel as large as its prefetch, status messages included, and dropped
// a delivery when it overflowed ("slow consumer"), which came back only
// after the ack wait, when newer events of its subject had applied and
// turned it stale.
func TestSourceDropsNothingAfterStatusMessagesWhileIdle(t *testing.T) {
	env := jstest.Start(t, "")
	ctx := t.Context()
	nc := env.Conn.JS.Conn()
	var slow atomic.Int64
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrSlowConsumer) {
			slow.Add(1)
		}
	})
	publish := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			if _, err := env.Conn.JS.Publish(ctx, "webhooks.p.a", []byte(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The ack wait is far longer than the test: a dropped delivery would
	// not come back within it.
	src, err := jetstream.OpenSource(ctx, env.Conn, jetstream.SourceOptions{MaxAckPending: 1000, Prefetch: 16, AckWait: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Stop()
	next := func() bool {
		t.Helper()
		nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		m, err := src.Next(nctx)
		if err != nil {
			return false
		}
		if err := m.Delivery.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		return true
	}
	// Ten of the prefetch's sixteen: the source asks for more and waits.
	publish(0, 10)
	for range 10 {
		if !next() {
			t.Fatal("no delivery of the first ten within 10 s")
		}
	}
	// Status messages (the only messages this connection gets now)
	// arrive while nobody asks for a delivery.
	before := nc.Stats().InMsgs
	deadline := time.Now().Add(20 * time.Second)
	for nc.Stats().InMsgs < before+2 {
		if time.Now().After(deadline) {
			t.Fatalf("no two status messages within 20 s (messages in: %d)", nc.Stats().InMsgs-before)
		}
		time.Sleep(20 * time.Millisecond)
	}
	publish(10, 15)
	got := 0
	for got < 15 && next() {
		got++
	}
	if got != 15 || slow.Load() != 0 {
		t.Fatalf("after the status messages: %d of 15 deliveries within 10 s each, %d slow-consumer drops", got, slow.Load())
	}
}

// A dead letter DLQ refuses for want of room says so once: "stream full"
// with the retention key, the server's refusal without nats.go's second
// "nats: " before it (an operations audit, stop 41: "nats: nats: API
// error" in every line).
func TestDeadLetterIntoAFullDLQSaysItOnce(t *testing.T) {
	env := jstest.Start(t, "")
	ctx := t.Context()
	s, err := env.Conn.JS.Stream(ctx, jetstream.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxBytes = 4096
	if _, err := env.Conn.JS.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	fx := jetstream.NewEffects(env.Conn)
	body := make([]byte, 1500)
	for i := range 10 {
		ev := consumer.Event{Key: fmt.Sprintf("p:default:evt:%d", i), Provider: "p", Account: "default", Seq: uint64(i + 1), Body: body}
		_, err = fx.DeadLetter(ctx, ev, "forward: 400", 1)
		if err != nil {
			break
		}
	}
	if !errors.Is(err, jetstream.ErrStreamFull) || !errors.Is(err, consumer.ErrStoreFull) {
		t.Fatalf("ten 1.5 KB letters into a 4 KB DLQ: %v, want the store full", err)
	}
	if msg := err.Error(); strings.Contains(msg, "nats: nats:") || !strings.Contains(msg, "retention.dlq.max_bytes") {
		t.Errorf("the refusal reads %q: want it once, with retention.dlq.max_bytes", msg)
	}
}
