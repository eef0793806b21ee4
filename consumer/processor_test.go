package consumer_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
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

// auditLog collects audit records in memory.
type auditLog struct {
	mu   sync.Mutex
	recs []event.AuditRecord
}

func (a *auditLog) Record(r event.AuditRecord) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recs = append(a.recs, r)
}

func (a *auditLog) count(decision string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, r := range a.recs {
		if r.Decision == decision {
			n++
		}
	}
	return n
}

// of returns the records of key with decision.
func (a *auditLog) of(key, decision string) []event.AuditRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []event.AuditRecord
	for _, r := range a.recs {
		if r.Key == key && r.Decision == decision {
			out = append(out, r)
		}
	}
	return out
}

// ev is an event as the gateway would store it.
type ev struct {
	key, subject, occurred, typ string
}

func store(t testing.TB, env *jstest.Env, e ev) {
	t.Helper()
	h := nats.Header{}
	h.Set(event.HeaderKey, e.key)
	h.Set(event.HeaderProvider, "grants")
	h.Set(event.HeaderAccount, "default")
	h.Set(event.HeaderReceivedAt, time.Now().UTC().Format(time.RFC3339Nano))
	if e.subject != "" {
		h.Set(event.HeaderSubject, e.subject)
	}
	if e.occurred != "" {
		h.Set(event.HeaderOccurredAt, e.occurred)
	}
	h.Set(event.HeaderType, e.typ)
	body := fmt.Sprintf(`{"id":%q,"grant_id":%q,"occurred_at":%q,"type":%q}`, e.key, e.subject, e.occurred, e.typ)
	p := jetstream.NewPublisher(env.Conn, 5*time.Second)
	if _, err := p.Publish(t.Context(), jetstream.Message{Subject: "webhooks.grants.default", Key: e.key, Header: h, Body: []byte(body)}); err != nil {
		t.Fatal(err)
	}
}

// runner is one consumer "process" over env.
type runner struct {
	proc   *consumer.Processor
	cancel context.CancelFunc
	done   chan struct{}
}

func newProcessor(env *jstest.Env, owner string, watermark bool, audit consumer.Auditor, extra ...consumer.Effect) *consumer.Processor {
	fx := jetstream.NewEffects(env.Conn)
	effects := append(extra, consumer.GrantsEffect{Template: "grants.{provider}.{subject}.{type}", Grants: fx})
	rules := map[string]consumer.Rule{"grants": {Watermark: watermark, OneAccount: true, Effects: effects}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return consumer.NewProcessor(rules, env.Marks, env.Applied, fx, audit, log, nil, consumer.Options{
		Owner: owner, MaxDeliver: 3, Backoff: []time.Duration{50 * time.Millisecond}, LeaseTTL: time.Second,
	})
}

// start runs proc over env's durable consumer with an ack wait of 10 s: a
// delivery comes back on its own only after a stall that long, so exact
// counts of decisions hold on a loaded machine.
func start(t testing.TB, env *jstest.Env, proc *consumer.Processor, workers int) *runner {
	t.Helper()
	return startAckWait(t, env, proc, workers, 10*time.Second)
}

// startAckWait is start with the given ack wait, for a test whose
// "process" dies without acknowledging (its deliveries come back after
// the ack wait).
func startAckWait(t testing.TB, env *jstest.Env, proc *consumer.Processor, workers int, ackWait time.Duration) *runner {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	src, err := jetstream.OpenSource(ctx, env.Conn, jetstream.SourceOptions{MaxAckPending: 256, AckWait: ackWait})
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{proc: proc, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		_ = proc.Run(ctx, src, workers)
		src.Stop()
	}()
	t.Cleanup(r.stop)
	return r
}

func (r *runner) stop() {
	r.cancel()
	<-r.done
}

// waitSettled waits until the durable consumer has nothing pending.
func waitSettled(t testing.TB, env *jstest.Env) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := env.Conn.JS.Consumer(t.Context(), jetstream.StreamWebhooks, jetstream.DurableApply)
		if err == nil {
			info, err := c.Info(t.Context())
			if err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.Delivered.Stream > 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("consumer did not settle within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// grants lists GRANTS as "subject key" lines in stream order.
func grants(t testing.TB, env *jstest.Env) []string {
	t.Helper()
	s, err := env.Conn.JS.Stream(t.Context(), jetstream.StreamGrants)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.Subject+" "+m.Header.Get(event.HeaderKey))
	}
	return out
}

func mark(t testing.TB, env *jstest.Env, subject string) consumer.Mark {
	t.Helper()
	m, _, err := env.Marks.Get(t.Context(), "grants.default."+event.Token(subject))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestWatermarkRules(t *testing.T) {
	env := jstest.Start(t, "")
	audit := &auditLog{}
	for _, e := range []ev{
		{"k-approved", "G-1", "2026-11-30T11:00:00Z", "application.approved"},
		{"k-submitted", "G-1", "2026-11-30T10:00:00Z", "application.submitted"},  // older: stale
		{"k-amended", "G-1", "2026-11-30T12:00:00+01:00", "application.amended"}, // 11:00Z, equal instant, new key
		{"k-award-a", "G-1", "1764504000", "award.disbursed"},                    // 2025-11-30T12:00:00Z... older
		{"k-other", "G-2", "2026-11-30T09:00:00", "application.submitted"},       // other grant, zone-less
	} {
		store(t, env, e)
	}
	start(t, env, newProcessor(env, "a", true, audit), 4)
	waitSettled(t, env)

	got := grants(t, env)
	want := []string{
		"grants.grants.G-1.application.approved k-approved",
		"grants.grants.G-1.application.amended k-amended",
		"grants.grants.G-2.application.submitted k-other",
	}
	slices.Sort(got)
	slices.Sort(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("GRANTS:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	m := mark(t, env, "G-1")
	if !m.At.Equal(time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC)) || !slices.Equal(m.Keys, []string{"k-approved", "k-amended"}) || m.Lease != nil {
		t.Fatalf("G-1 mark = %+v", m)
	}
	if n := audit.count(event.DecisionStale); n != 2 {
		t.Fatalf("stale records = %d, want 2", n)
	}
	if n := audit.count(event.DecisionApplied); n != 3 {
		t.Fatalf("applied records = %d, want 3", n)
	}
}

func TestMissingTimeIsDeadLetteredAtOnce(t *testing.T) {
	env := jstest.Start(t, "")
	audit := &auditLog{}
	store(t, env, ev{"k-notime", "G-1", "", "x"})
	store(t, env, ev{"k-badtime", "G-1", "yesterday", "x"})
	store(t, env, ev{"k-nosubject", "", "2026-11-30T10:00:00Z", "x"})
	start(t, env, newProcessor(env, "a", true, audit), 2)
	waitSettled(t, env)
	if n := audit.count(event.DecisionDeadLettered); n != 3 {
		t.Fatalf("dead-lettered = %d, want 3", n)
	}
	s, err := env.Conn.JS.Stream(t.Context(), jetstream.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get(event.HeaderDlqReason) == "" || m.Header.Get(event.HeaderDlqDeliveries) != "1" {
			t.Fatalf("letter %d headers %v: want a reason and 1 delivery (never retried)", seq, m.Header)
		}
	}
	if g := grants(t, env); len(g) != 0 {
		t.Fatalf("dead-lettered events published: %v", g)
	}
}

// A failing effect retries with backoff, then dead-letters with the last
// error; a newer event of the subject applies meanwhile, and the failing
// one, when it comes back superseded, is stale.
func TestFailingEventDoesNotBlockItsSubject(t *testing.T) {
	env := jstest.Start(t, "")
	audit := &auditLog{}
	var calls atomic.Int32
	flaky := consumer.EffectFunc(func(ctx context.Context, e consumer.Event) error {
		if e.Key == "k-old" && calls.Add(1) == 1 {
			return fmt.Errorf("downstream 503")
		}
		return nil
	})
	store(t, env, ev{"k-old", "G-1", "2026-11-30T10:00:00Z", "a"})
	store(t, env, ev{"k-new", "G-1", "2026-11-30T11:00:00Z", "b"})
	start(t, env, newProcessor(env, "a", true, audit, flaky), 2)
	waitSettled(t, env)
	if g := grants(t, env); !slices.Equal(g, []string{"grants.grants.G-1.b k-new"}) {
		t.Fatalf("GRANTS = %v, want only k-new", g)
	}
	a := audit
	a.mu.Lock()
	defer a.mu.Unlock()
	var staleReason string
	for _, r := range a.recs {
		if r.Key == "k-old" && r.Decision == event.DecisionStale {
			staleReason = r.Reason
		}
	}
	if !strings.HasPrefix(staleReason, "superseded while retrying") {
		t.Fatalf("k-old stale reason = %q; want superseded while retrying", staleReason)
	}
}

func TestPermanentFailureDeadLettersWithReason(t *testing.T) {
	env := jstest.Start(t, "")
	audit := &auditLog{}
	var attempts atomic.Int32
	broken := consumer.EffectFunc(func(ctx context.Context, e consumer.Event) error {
		attempts.Add(1)
		return fmt.Errorf("downstream 500 for %s", e.Key)
	})
	store(t, env, ev{"k-1", "G-1", "2026-11-30T10:00:00Z", "a"})
	start(t, env, newProcessor(env, "a", true, audit, broken), 1)
	waitSettled(t, env)
	if n := attempts.Load(); n != 3 {
		t.Fatalf("attempts = %d, want max_deliver = 3", n)
	}
	h := firstLetter(t, env)
	if h.Get(event.HeaderDlqReason) != "downstream 500 for k-1" || h.Get(event.HeaderDlqDeliveries) != "3" {
		t.Fatalf("letter headers = %v", h)
	}
	if g := grants(t, env); len(g) != 0 {
		t.Fatalf("dead-lettered event was published: %v", g)
	}
	if mk := mark(t, env, "G-1"); !mk.At.IsZero() || mk.Lease != nil {
		t.Fatalf("watermark moved or stayed leased for a dead letter: %+v", mk)
	}
}

// An effect that panics (a bug) fails its attempt like an error: retried,
// then dead-lettered with the panic as the reason, while the consumer goes
// on with other events. Unrecovered, the panic stopped the process at every
// delivery of the event, and it was never dead-lettered.
func TestPanickingEffectIsAFailedAttempt(t *testing.T) {
	env := jstest.Start(t, "")
	audit := &auditLog{}
	var attempts atomic.Int32
	buggy := consumer.EffectFunc(func(ctx context.Context, e consumer.Event) error {
		if e.Key == "k-bug" {
			attempts.Add(1)
			panic("a bug met " + e.Key)
		}
		return nil
	})
	store(t, env, ev{"k-bug", "G-1", "2026-11-30T10:00:00Z", "a"})
	store(t, env, ev{"k-ok", "G-2", "2026-11-30T10:00:00Z", "a"})
	start(t, env, newProcessor(env, "a", true, audit, buggy), 2)
	waitSettled(t, env)
	if n := attempts.Load(); n != 3 {
		t.Fatalf("attempts = %d, want max_deliver = 3", n)
	}
	h := firstLetter(t, env)
	if r := h.Get(event.HeaderDlqReason); r != "panic: a bug met k-bug" || h.Get(event.HeaderKey) != "k-bug" {
		t.Fatalf("letter for %s, reason %q; want k-bug's, the panic", h.Get(event.HeaderKey), r)
	}
	if g := grants(t, env); !slices.Equal(g, []string{"grants.grants.G-2.a k-ok"}) {
		t.Fatalf("GRANTS = %v, want only k-ok", g)
	}
}

// firstLetter is the headers of DLQ's first message.
func firstLetter(t *testing.T, env *jstest.Env) nats.Header {
	t.Helper()
	s, err := env.Conn.JS.Stream(t.Context(), jetstream.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	return m.Header
}

var _ = js.ErrKeyNotFound

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
