package consumer_test

// Review AP: Processor.Redeliver (replay --redeliver under the subject's
// lease).

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
)

// reviewAPStored is the event at seq in WEBHOOKS as replay reads it back.
func reviewAPStored(t *testing.T, env *jstest.Env, seq uint64) consumer.Event {
	t.Helper()
	s, err := env.Conn.JS.Stream(t.Context(), jetstream.StreamWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(t.Context(), seq)
	if err != nil {
		t.Fatal(err)
	}
	return jetstream.EventFromMsg(m.Header, m.Data, m.Sequence)
}

// blockingForward runs until its context ends (an operator's Ctrl-C while
// the receiver is slow), and says when it started.
type blockingForward struct {
	started chan struct{}
	once    sync.Once
}

func (f *blockingForward) Apply(ctx context.Context, _ consumer.Event) error {
	f.once.Do(func() { close(f.started) })
	<-ctx.Done()
	return ctx.Err()
}

// TestReviewAPRedeliverInterruptedKeepsTheSubjectLeased: replay
// --redeliver stopped by Ctrl-C (main's signal.NotifyContext cancels the
// ctx Redeliver got) while its forward runs. Redeliver gives the lease back
// with a put under that same, cancelled ctx: the put fails, is logged at
// warn (to replay's discarded logger) and the replay's lease stays on the
// subject until it runs out (LeaseTTL = forward.timeout + 30 s; minutes
// for a slow receiver's timeout). Meanwhile serve's events of the subject
// park behind a lease nobody holds any more. The release should not
// depend on the ctx that was just cancelled.
// Fixed: the lease is given back under a context of its own.
func TestReviewAPRedeliverInterruptedKeepsTheSubjectLeased(t *testing.T) {
	env := jstest.Start(t, "")
	e := appliedEvent(t, env)
	proc := redeliverProcessor(env, env.Marks, "replay", time.Minute)
	fwd := &blockingForward{started: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- proc.Redeliver(ctx, e, fwd) }()
	select {
	case <-fwd.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the redelivery's forward did not start within 30 s")
	}
	cancel() // Ctrl-C
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Redeliver = %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Redeliver did not return within 30 s of its ctx ending")
	}
	if l := mark(t, env, "G-1").Lease; l != nil {
		t.Errorf("after the interrupted redelivery returned, the subject is still leased: %+v (held until %s, %s from now, for nobody)",
			*l, l.Until.Format(time.RFC3339), time.Until(l.Until).Round(time.Second))
	}
}

// reviewAPCounter counts its runs per key.
type reviewAPCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (f *reviewAPCounter) Apply(_ context.Context, ev consumer.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = map[string]int{}
	}
	f.n[ev.Key]++
	return nil
}

func (f *reviewAPCounter) of(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[key]
}

// TestReviewAPRedeliverDropsTheLeaseThatSettlesAnInDoubtEvent: serve dies
// (kill -9, OOM) after k2's effects ran and its key was recorded, before
// its commit: the subject's lease names k2, and k2's redelivery settles it
// without running its effects again (the takeover, lease.go). An operator
// runs replay --redeliver over the incident's window before serve is back
// (the CLI opens data_dir itself): k2 counts as already applied, and once
// the in-doubt wait ran out Redeliver claims the subject over that lease
// and releases it as nil ("it goes with ours"). The takeover is lost: k2's
// redelivery after serve's restart finds a mark without it and no lease
// naming it, and runs every effect again: one more forward than the
// operator's redelivery, a second applied record. Without the replay, the
// same restart settles k2 with no effect run (control below). The release
// should put back the lease it claimed over when that lease names a
// non-redeliver event (or Redeliver should settle an own-key lease first).
// Fixed: the release puts back the expired lease it claimed over
// (unless a stopped replay's).
func TestReviewAPRedeliverDropsTheLeaseThatSettlesAnInDoubtEvent(t *testing.T) {
	for _, withReplay := range []bool{false, true} {
		name := "serve-restart-alone"
		if withReplay {
			name = "replay-redeliver-before-restart"
		}
		t.Run(name, func(t *testing.T) {
			env := jstest.Start(t, "")
			store(t, env, ev{"k1", "G-1", "2026-11-30T10:00:00Z", "a"})
			store(t, env, ev{"k2", "G-1", "2026-11-30T11:00:00Z", "b"})
			var hit atomic.Bool
			first := newProcessor(env, "serve-first", true, &auditLog{})
			consumer.SetCrash(first, func(step, key string) bool {
				if hit.Load() {
					return true // dead
				}
				if step == "after-remember" && key == "k2" {
					hit.Store(true)
					return true
				}
				return false
			})
			r := startAckWait(t, env, first, 1, time.Second)
			waitFor(t, "serve's crash after remembering k2", hit.Load)
			r.stop()
			if l := mark(t, env, "G-1").Lease; l == nil || l.Key != "k2" {
				t.Fatalf("setup: after the crash the lease is %+v, want k2's", l)
			}

			if withReplay {
				k2 := reviewAPStored(t, env, 2)
				replayed := &reviewAPCounter{}
				// InDoubtWait short: the operator runs the replay after it.
				proc := redeliverProcessor(env, env.Marks, "replay", 10*time.Millisecond)
				deadline := time.Now().Add(30 * time.Second)
				for {
					err := proc.Redeliver(t.Context(), k2, replayed)
					if err == nil {
						break
					}
					if !errors.Is(err, consumer.ErrSubjectInDoubt) || time.Now().After(deadline) {
						t.Fatalf("Redeliver: %v", err)
					}
					time.Sleep(20 * time.Millisecond)
				}
				if replayed.of("k2") != 1 {
					t.Fatalf("the replay's forward ran %d times for k2, want 1", replayed.of("k2"))
				}
			}

			// serve is back: k2's delivery comes again.
			audit := &auditLog{}
			fwd := &reviewAPCounter{}
			startAckWait(t, env, newProcessor(env, "serve-second", true, audit, fwd), 1, time.Second)
			waitSettled(t, env)
			m := mark(t, env, "G-1")
			if want := time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC); !m.At.Equal(want) || m.Lease != nil {
				t.Fatalf("mark after the restart %+v, want k2's time and no lease", m)
			}
			t.Logf("GRANTS %v; applied records of k2 at restart: %d", grants(t, env), len(audit.of("k2", "applied")))
			if n := fwd.of("k2"); n != 0 {
				t.Errorf("serve's redelivery of k2, whose effects had run and whose key was recorded, ran its forward %d more time(s) (the takeover settles it with none)", n)
			}
		})
	}
}

// TestReviewAPRedeliverRefusesInDoubtUnderOrderingNone: under ordering
// none nothing is ever in doubt (applyLeased applies the rule only to
// watermark rules: a stopped holder's lease is claimed over once it ran
// out). Redeliver does not look at the rule and refuses every lease of
// another event within until+InDoubtWait (2 x LeaseTTL in serve): replay
// --redeliver reports the event failed, "subject in doubt ... its
// redelivery settles it", for minutes after any crash on that subject (or,
// without a subject, its key shard), while the consumer applies the
// subject's events at once.
// Fixed: the in-doubt rule holds under watermark rules only.
func TestReviewAPRedeliverRefusesInDoubtUnderOrderingNone(t *testing.T) {
	env := jstest.Start(t, "")
	fx := jetstream.NewEffects(env.Conn)
	rules := map[string]consumer.Rule{"grants": {Watermark: false, OneAccount: true, Effects: []consumer.Effect{consumer.GrantsEffect{Template: "grants.{provider}.{subject}.{type}", Grants: fx}}}}
	proc := consumer.NewProcessor(rules, env.Marks, env.Applied, fx, &auditLog{}, slogDiscard(), nil, consumer.Options{
		Owner: "replay", MaxDeliver: 3, Backoff: []time.Duration{50 * time.Millisecond}, LeaseTTL: 5 * time.Second, InDoubtWait: time.Minute,
	})
	store(t, env, ev{"k1", "G-1", "", "t"})
	store(t, env, ev{"k3", "G-1", "", "t"})
	k1, k3 := reviewAPStored(t, env, 1), reviewAPStored(t, env, 2)
	key := consumer.LeaseKey(k1)
	if _, err := env.Marks.Put(t.Context(), key, consumer.Mark{Lease: &consumer.Lease{Owner: "serve-gone", Key: "k2", Until: time.Now().Add(-time.Second)}}, 0); err != nil {
		t.Fatal(err)
	}
	// The consumer's rule: k3 applies at once over the gone holder's lease.
	if out := proc.ProcessOnce(t.Context(), k3, 1); out.Decision != consumer.Applied {
		t.Fatalf("setup: k3 under ordering none = %+v, want applied", out)
	}
	if _, err := env.Marks.Put(t.Context(), key, consumer.Mark{Lease: &consumer.Lease{Owner: "serve-gone", Key: "k2", Until: time.Now().Add(-time.Second)}}, mustRev(t, env, key)); err != nil {
		t.Fatal(err)
	}
	fwd := &reviewAPCounter{}
	if err := proc.Redeliver(t.Context(), k1, fwd); err != nil {
		t.Errorf("Redeliver under ordering none over a gone holder's lease = %v; want it run (nothing is in doubt under ordering none)", err)
	}
}

func mustRev(t *testing.T, env *jstest.Env, key string) uint64 {
	t.Helper()
	_, rev, err := env.Marks.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

func slogDiscard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
