package consumer_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
)

// panicOnSeen is an applied-key memory whose lookup of key panics (a bug in
// deciding, the kind Process recovers from).
type panicOnSeen struct {
	*memApplied
	key string
}

func (a panicOnSeen) Seen(ctx context.Context, key string) (bool, error) {
	if key == a.key {
		panic("a bug in the applied-key lookup of " + key)
	}
	return a.memApplied.Seen(ctx, key)
}

// A panic in deciding (here the applied-key lookup) is a failed attempt,
// recovered once: the panic handler looks nothing up (found by review: it
// asked the applied-key memory whether the event had applied, the lookup
// panicked again, unrecovered, and took the process down).
func TestPanicInAppliedLookupIsRecovered(t *testing.T) {
	e := newBugEnv()
	rules := map[string]consumer.Rule{provNone: {Effects: []consumer.Effect{
		consumer.GrantsEffect{Template: "grants.{provider}.{subject}", Grants: e.grants},
	}}}
	p := consumer.NewProcessor(rules, e.marks, panicOnSeen{e.applied, "k-bug"}, noLetters{}, nopAuditor{},
		slog.New(slog.DiscardHandler), nil, consumer.Options{Owner: "a", MaxDeliver: 3, LeaseTTL: time.Minute})
	del := &countingDelivery{}
	var out consumer.Outcome
	escaped := func() (r any) {
		defer func() { r = recover() }()
		out = p.Process(context.Background(), &consumer.Message{
			Event:      spec{key: "k-bug", provider: provNone, subject: "G-1", at: at(10)}.event(1),
			Deliveries: 1, Delivery: del})
		return nil
	}()
	if escaped != nil {
		t.Fatalf("panic escaped Process: %v; want a failed attempt (Retry, nak with backoff)", escaped)
	}
	if out.Decision != consumer.Retry || del.naks != 1 {
		t.Fatalf("outcome %+v, %d naks; want Retry, 1 nak", out, del.naks)
	}
}

// panicOnRemember is an applied-key memory whose first Remember of key
// panics before storing it.
type panicOnRemember struct {
	*memApplied
	key  string
	done *bool
}

func (a panicOnRemember) Remember(ctx context.Context, key string) error {
	if key == a.key && !*a.done {
		*a.done = true
		panic("a bug in remembering " + key)
	}
	return a.memApplied.Remember(ctx, key)
}

// A panic after a forward-only rule's effects ran (here in remembering the
// key) is retried, not dead-lettered even with no attempts left: nothing
// in GRANTS tells that it applied, the delivery does (found by review, when
// the handler searched APPLIED and GRANTS; the same search missed an event
// on a GRANTS subject with 4096 newer messages since its receipt).
func TestPanicAfterForwardOnlyEffectsIsNotDeadLettered(t *testing.T) {
	e := newBugEnv()
	runs := 0
	forward := consumer.EffectFunc(func(context.Context, consumer.Event) error { runs++; return nil })
	rules := map[string]consumer.Rule{provNone: {Effects: []consumer.Effect{forward}}}
	var done bool
	p := consumer.NewProcessor(rules, e.marks, panicOnRemember{e.applied, "k-bug", &done}, noLetters{}, nopAuditor{},
		slog.New(slog.DiscardHandler), nil, consumer.Options{Owner: "a", MaxDeliver: 1, LeaseTTL: time.Minute})
	del := &countingDelivery{}
	out := p.Process(context.Background(), &consumer.Message{
		Event:      spec{key: "k-bug", provider: provNone, subject: "G-1", at: at(10)}.event(1),
		Deliveries: 1, Delivery: del})
	if runs != 1 {
		t.Fatalf("effect ran %d times, want 1", runs)
	}
	if out.Decision == consumer.DeadLettered {
		t.Fatalf("dead-lettered (%s) after its forward ran; want a retry that settles it", out.Reason)
	}
}

type panicOnceOnRemember struct {
	consumer.AppliedKeys
	key      string
	panicked atomic.Bool
}

func (a *panicOnceOnRemember) Remember(ctx context.Context, key string) error {
	if key == a.key && a.panicked.CompareAndSwap(false, true) {
		panic("a bug in remembering " + key)
	}
	return a.AppliedKeys.Remember(ctx, key)
}

// Ordering none, APPLIED memory: a panic after the GRANTS publish, before
// remembering, with no attempts left: not dead-lettered, published once,
// then remembered (its redelivery settles it).
func TestNonePanicAfterPublishBeforeRemember(t *testing.T) {
	env := jstest.Start(t, "")
	applied := &panicOnceOnRemember{AppliedKeys: env.Applied, key: "k-bug"}
	audit := runPanicOnce(t, env, false, env.Marks, applied)
	if !applied.panicked.Load() {
		t.Fatal("no panic")
	}
	if g, dead := grants(t, env), audit.count(event.DecisionDeadLettered); !slices.Equal(g, []string{"grants.grants.G-1.a k-bug"}) || dead != 0 {
		t.Fatalf("GRANTS %v, %d dead-lettered", g, dead)
	}
	if ok, err := env.Applied.Seen(t.Context(), "k-bug"); !ok || err != nil {
		t.Fatalf("k-bug not remembered: %v %v", ok, err)
	}
}

// A panic after the effects ran (here in the commit of the mark, the GRANTS
// message published) leaves the event applied, only not committed: it is
// retried, not dead-lettered even with no attempts left, and its
// redelivery settles it. (Found by review: counted as a failed attempt, it
// was dead-lettered while in GRANTS, against "a dead-lettered event is not
// published".)
func TestPanicAfterTheEffectsIsNotDeadLettered(t *testing.T) {
	env := jstest.Start(t, "")
	marks := &panicOnCommit{Watermarks: env.Marks, key: "k-bug"}
	audit := runPanicOnce(t, env, true, marks, env.Applied)
	if !marks.panicked.Load() {
		t.Fatal("the commit never panicked")
	}
	if g, dead := grants(t, env), audit.count(event.DecisionDeadLettered); !slices.Equal(g, []string{"grants.grants.G-1.a k-bug"}) || dead != 0 {
		t.Fatalf("GRANTS %v, %d dead-lettered; want k-bug published once, not dead-lettered", g, dead)
	}
	if mk := mark(t, env, "G-1"); !slices.Contains(mk.Keys, "k-bug") || mk.Lease != nil {
		t.Fatalf("mark %+v: want k-bug committed, no lease", mk)
	}
}

// panicOnCommit is a watermark store whose first commit of key's mark
// (lease cleared, key taken in) panics.
type panicOnCommit struct {
	consumer.Watermarks
	key      string
	panicked atomic.Bool
}

func (s *panicOnCommit) Put(ctx context.Context, k string, m consumer.Mark, rev uint64) (uint64, error) {
	if m.Lease == nil && slices.Contains(m.Keys, s.key) && s.panicked.CompareAndSwap(false, true) {
		panic("a bug in the commit of " + s.key)
	}
	return s.Watermarks.Put(ctx, k, m, rev)
}

// runPanicOnce runs k-bug (subject G-1), published to GRANTS, through a
// processor over marks and applied with no attempts left (max_deliver 1)
// until the consumer settled it, and returns the audit.
func runPanicOnce(t *testing.T, env *jstest.Env, watermark bool, marks consumer.Watermarks, applied consumer.AppliedKeys) *auditLog {
	t.Helper()
	audit := &auditLog{}
	fx := jetstream.NewEffects(env.Conn)
	rules := map[string]consumer.Rule{"grants": {Watermark: watermark, OneAccount: true, Effects: []consumer.Effect{
		consumer.GrantsEffect{Template: "grants.{provider}.{subject}.{type}", Grants: fx},
	}}}
	proc := consumer.NewProcessor(rules, marks, applied, fx, audit, slog.New(slog.NewTextHandler(io.Discard, nil)), nil,
		consumer.Options{Owner: "a", MaxDeliver: 1, Backoff: []time.Duration{50 * time.Millisecond}, LeaseTTL: time.Second})
	store(t, env, ev{"k-bug", "G-1", "2026-11-30T10:00:00Z", "a"})
	start(t, env, proc, 2)
	waitSettled(t, env)
	return audit
}
