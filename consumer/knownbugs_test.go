package consumer_test

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookgate/hookgate/consumer"
)

// Regression tests for the bugs TestProcessorProperty found (its
// knownNoneRerun, knownInDoubt, knownDroppedKey).

type grantLog struct {
	mu   sync.Mutex
	keys []string // every successful call, in order
}

func (g *grantLog) PublishGrant(_ context.Context, _, key string, _ http.Header, _ []byte) (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.keys = append(g.keys, key)
	return uint64(len(g.keys)), nil
}

func (g *grantLog) calls() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.keys)
}

// deduped is GRANTS as the stream keeps it (Nats-Msg-Id = key).
func (g *grantLog) deduped() []string {
	var out []string
	for _, k := range g.calls() {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

type noLetters struct{}

func (noLetters) DeadLetter(context.Context, consumer.Event, string, int) (uint64, error) {
	return 1, nil
}

type nopDelivery struct{}

func (nopDelivery) Ack(context.Context) error        { return nil }
func (nopDelivery) NakWithDelay(time.Duration) error { return nil }
func (nopDelivery) InProgress() error                { return nil }

type bugEnv struct {
	marks   *memMarks
	applied *memApplied
	grants  *grantLog
	now     time.Time
}

func newBugEnv() *bugEnv {
	return &bugEnv{marks: newMemMarks(), applied: newMemApplied(), grants: &grantLog{},
		now: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (e *bugEnv) proc(owner string, extra ...consumer.Effect) *consumer.Processor {
	effects := append(extra, consumer.GrantsEffect{Template: "grants.{provider}.{subject}", Grants: e.grants})
	rules := map[string]consumer.Rule{
		provWatermark: {Watermark: true, Effects: effects},
		provNone:      {Watermark: false, Effects: effects},
	}
	return consumer.NewProcessor(rules, e.marks, e.applied, noLetters{}, nopAuditor{}, slog.New(slog.DiscardHandler), nil,
		consumer.Options{Owner: owner, MaxDeliver: 3, LeaseTTL: time.Minute, Now: func() time.Time { return e.now }})
}

func at(h int) time.Time { return time.Date(2026, 11, 30, h, 0, 0, 0, time.UTC) }

func deliver(p *consumer.Processor, s spec, deliveries int) consumer.Outcome {
	return p.Process(context.Background(), &consumer.Message{Event: s.event(1), Deliveries: deliveries, Delivery: nopDelivery{}})
}

func crashAt(p *consumer.Processor, step string) {
	consumer.SetCrash(p, func(s, _ string) bool { return s == step })
}

// Under ordering none, one key delivered to two instances at once (a
// redelivery after the ack wait, a replay) must apply once: the second
// waits for the first one's lease and must then find the key applied.
func TestOrderingNoneConcurrentDuplicateAppliesOnce(t *testing.T) {
	// Without a subject the lease is on a shard of keys (the second case
	// ran the effects twice before).
	for _, subject := range []string{"G-1", ""} {
		t.Run("subject="+subject, func(t *testing.T) { noneConcurrentDuplicate(t, subject) })
	}
}

func noneConcurrentDuplicate(t *testing.T, subject string) {
	synctest.Test(t, func(t *testing.T) {
		e := newBugEnv()
		inEffect, release := make(chan struct{}), make(chan struct{})
		var (
			mu    sync.Mutex
			calls int
		)
		slow := consumer.EffectFunc(func(context.Context, consumer.Event) error {
			mu.Lock()
			calls++
			first := calls == 1
			mu.Unlock()
			if first {
				close(inEffect)
				<-release
			}
			return nil
		})
		k := spec{key: "k", provider: provNone, subject: subject, at: at(10)}
		a, b := e.proc("a", slow), e.proc("b", slow)
		outs := make(chan string, 2)
		go func() { outs <- "a: " + deliver(a, k, 1).Decision }()
		<-inEffect // a holds the lease and runs the effects
		go func() { outs <- "b: " + deliver(b, k, 1).Decision }()
		synctest.Wait() // b found k not applied yet and waits for a's lease
		close(release)
		got := []string{<-outs, <-outs}
		if calls != 1 {
			t.Fatalf("effects ran %d times for one key; decisions %v", calls, got)
		}
		if !slices.Contains(got, "a: "+consumer.Applied) || !slices.Contains(got, "b: "+consumer.AlreadyApplied) {
			t.Fatalf("decisions %v, want a applied and b already-applied", got)
		}
	})
}

// A crash after the effects and before the watermark commit leaves the
// event in GRANTS while the mark does not know it. Another instance must
// not decide the subject's next event against that mark as if nothing
// happened: an older event would be published after a newer one, or the
// in-doubt event, back from redelivery, judged stale although in GRANTS.
func TestCrashAfterEffectsKeepsWatermarkOrder(t *testing.T) {
	for _, tc := range []struct {
		name          string
		crashed, next spec
	}{
		{"older event next", spec{key: "k-new", provider: provWatermark, subject: "G-1", at: at(11)},
			spec{key: "k-old", provider: provWatermark, subject: "G-1", at: at(10)}},
		{"newer event next", spec{key: "k-old", provider: provWatermark, subject: "G-1", at: at(10)},
			spec{key: "k-new", provider: provWatermark, subject: "G-1", at: at(11)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newBugEnv()
			a := e.proc("a")
			crashAt(a, stepAfterEffects)
			if out := deliver(a, tc.crashed, 1); out.Decision != crashedOutcome {
				t.Fatalf("first delivery: %+v, want the injected crash", out)
			}
			e.now = e.now.Add(time.Minute + time.Second) // a's lease just expired; a is gone
			b := e.proc("b")
			var decisions []string
			// The stream goes on: the next event, then both redelivered
			// until neither is retried.
			queue := []struct {
				s spec
				n int
			}{{tc.next, 1}, {tc.crashed, 2}}
			for len(queue) > 0 && len(decisions) < 10 {
				q := queue[0]
				queue = queue[1:]
				out := deliver(b, q.s, q.n)
				decisions = append(decisions, q.s.key+" "+out.Decision)
				if out.Decision == consumer.Retry {
					queue = append(queue, struct {
						s spec
						n int
					}{q.s, q.n + 1})
				}
			}
			got := e.grants.deduped()
			if !slices.Equal(got, []string{tc.crashed.key}) && !slices.Equal(got, []string{"k-old", "k-new"}) {
				t.Fatalf("GRANTS = %v (decisions %v): not in watermark order", got, decisions)
			}
			for _, d := range decisions {
				if d == tc.crashed.key+" "+consumer.Stale {
					t.Fatalf("%s is in GRANTS and was judged stale (decisions %v)", tc.crashed.key, decisions)
				}
			}
		})
	}
}

// A crash after the watermark commit and before APPLIED, then a newer
// event: the key leaves the mark, and its redelivery must still be
// already-applied, not stale.
func TestCrashAfterCommitThenNewerStaysApplied(t *testing.T) {
	e := newBugEnv()
	k1 := spec{key: "k1", provider: provWatermark, subject: "G-1", at: at(10)}
	k2 := spec{key: "k2", provider: provWatermark, subject: "G-1", at: at(11)}
	a := e.proc("a")
	crashAt(a, stepAfterWatermark)
	if out := deliver(a, k1, 1); out.Decision != crashedOutcome {
		t.Fatalf("k1: %+v, want the injected crash", out)
	}
	b := e.proc("b")
	if out := deliver(b, k2, 1); out.Decision != consumer.Applied {
		t.Fatalf("k2: %+v, want applied", out)
	}
	if out := deliver(b, k1, 2); out.Decision != consumer.AlreadyApplied {
		t.Fatalf("k1 redelivered: %+v; want already-applied (it is in GRANTS: %v)", out, e.grants.deduped())
	}
	if seen, _ := e.applied.Seen(context.Background(), "k1"); !seen {
		t.Fatal("APPLIED does not have k1, so replays will call it stale")
	}
}

// countingDelivery counts acks, negative acks (with their delays) and
// InProgress calls.
type countingDelivery struct {
	mu                     sync.Mutex
	acks, naks, inProgress int
	delays                 []time.Duration
}

func (d *countingDelivery) Ack(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.acks++
	return nil
}

func (d *countingDelivery) NakWithDelay(delay time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.naks++
	d.delays = append(d.delays, delay)
	return nil
}

func (d *countingDelivery) InProgress() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inProgress++
	return nil
}

// count is how many InProgress calls were made.
func (d *countingDelivery) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inProgress
}

func (d *countingDelivery) acked() (acks, naks int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.acks, d.naks
}

// Effects that run long keep their delivery alive (InProgress every 5 s),
// and the keep-alive stops with them.
func TestLongEffectsKeepTheDeliveryAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newBugEnv()
		slow := consumer.EffectFunc(func(context.Context, consumer.Event) error {
			time.Sleep(12 * time.Second)
			return nil
		})
		d := &countingDelivery{}
		k := spec{key: "k", provider: provWatermark, subject: "G-1", at: at(10)}
		out := e.proc("a", slow).Process(context.Background(), &consumer.Message{Event: k.event(1), Deliveries: 1, Delivery: d})
		if out.Decision != consumer.Applied {
			t.Fatalf("decision %s", out.Decision)
		}
		if n := d.count(); n != 2 {
			t.Fatalf("InProgress called %d times during 12 s of effects, want 2 (at 5 s and 10 s)", n)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := d.count(); n != 2 {
			t.Fatalf("InProgress called %d times after the effects finished", n)
		}
	})
}

// indexedGrants is a grantLog that answers HasGrant, as jetstream.Effects
// does; it keeps no duplicate window, so every publish is a message and a
// second one shows.
type indexedGrants struct{ *grantLog }

func (g indexedGrants) HasGrant(_ context.Context, _, key string, _ time.Time) (bool, error) {
	return slices.Contains(g.calls(), key), nil
}

// A holder that published to GRANTS and crashed before remembering the
// key (APPLIED) or committing leaves its lease naming the key. The
// takeover finds the GRANTS message and commits without running the
// effects again (a forward among them would be sent twice otherwise).
func TestTakeoverFindsItsGrant(t *testing.T) {
	for _, provider := range []string{provNone, provWatermark} {
		t.Run(provider, func(t *testing.T) {
			e := newBugEnv()
			grants := indexedGrants{e.grants}
			effects := []consumer.Effect{consumer.GrantsEffect{Template: "grants.{provider}", Grants: grants}} // no {subject}: APPLIED memory
			rules := map[string]consumer.Rule{provider: {Watermark: provider == provWatermark, Effects: effects}}
			newProc := func(owner string) *consumer.Processor {
				return consumer.NewProcessor(rules, e.marks, e.applied, noLetters{}, nopAuditor{}, slog.New(slog.DiscardHandler), nil,
					consumer.Options{Owner: owner, MaxDeliver: 3, LeaseTTL: time.Minute, Now: func() time.Time { return e.now }})
			}
			k := spec{key: "k1", provider: provider, subject: "G-1", at: at(10)}
			a := newProc("a")
			crashAt(a, "after-effects")
			if out := deliver(a, k, 1); out.Decision != "crashed" {
				t.Fatalf("first delivery: %+v, want crashed after its effects", out)
			}
			e.now = e.now.Add(48 * time.Hour) // a long outage: the lease is long gone
			if out := deliver(newProc("b"), k, 2); out.Decision != consumer.Applied {
				t.Fatalf("redelivery: %+v, want applied (settled)", out)
			}
			if got := e.grants.calls(); len(got) != 1 {
				t.Fatalf("GRANTS publishes %v, want the first one only", got)
			}
			if out := deliver(newProc("c"), k, 3); out.Decision != consumer.AlreadyApplied {
				t.Fatalf("a later redelivery: %+v, want already-applied (the key remembered)", out)
			}
		})
	}
}
