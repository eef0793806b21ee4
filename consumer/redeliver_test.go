package consumer_test

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

// readCountingMarks counts reads of the marks, so a test knows a processor
// has looked at a subject again (it waited for a lease in between).
type readCountingMarks struct {
	consumer.Watermarks
	gets atomic.Int64
}

func (c *readCountingMarks) Get(ctx context.Context, key string) (consumer.Mark, uint64, error) {
	c.gets.Add(1)
	return c.Watermarks.Get(ctx, key)
}

// leaseSeer is a forward that records the subject's mark as it finds it
// while it runs: whose lease holds the subject then.
type leaseSeer struct {
	env   *jstest.Env
	mu    sync.Mutex
	calls int
	seen  []*consumer.Lease
}

func (f *leaseSeer) Apply(ctx context.Context, ev consumer.Event) error {
	m, _, err := f.env.Marks.Get(ctx, consumer.LeaseKey(ev))
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.seen = append(f.seen, m.Lease)
	return err
}

func redeliverProcessor(env *jstest.Env, marks consumer.Watermarks, owner string, inDoubt time.Duration) *consumer.Processor {
	fx := jetstream.NewEffects(env.Conn)
	rules := map[string]consumer.Rule{"grants": {Watermark: true, OneAccount: true, Effects: []consumer.Effect{consumer.GrantsEffect{Template: "grants.{provider}.{subject}.{type}", Grants: fx}}}}
	return consumer.NewProcessor(rules, marks, env.Applied, fx, &auditLog{}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, consumer.Options{
		Owner: owner, MaxDeliver: 3, Backoff: []time.Duration{50 * time.Millisecond}, LeaseTTL: 5 * time.Second, InDoubtWait: inDoubt,
	})
}

// appliedEvent stores and applies k1 of G-1, and returns it as replay
// reads it back.
func appliedEvent(t *testing.T, env *jstest.Env) consumer.Event {
	t.Helper()
	store(t, env, ev{"k1", "G-1", "2026-11-30T10:00:00Z", "t"})
	r := start(t, env, newProcessor(env, "serve", true, &auditLog{}), 2)
	waitSettled(t, env)
	r.stop()
	s, err := env.Conn.JS.Stream(t.Context(), jetstream.StreamWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	return jetstream.EventFromMsg(m.Header, m.Data, m.Sequence)
}

func setLease(t *testing.T, env *jstest.Env, key string, l *consumer.Lease) consumer.Mark {
	t.Helper()
	m, rev, err := env.Marks.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	m.Lease = l
	if _, err := env.Marks.Put(t.Context(), key, m, rev); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRedeliverWaitsForTheSubjectsHolder: a replay's redelivery of an
// applied event runs under its subject's lease, after a live holder's
// release, never beside it (review AN: replay --redeliver POSTed beside
// serve's forward of a newer event of the subject), and leaves the mark
// as it was.
func TestRedeliverWaitsForTheSubjectsHolder(t *testing.T) {
	env := jstest.Start(t, "")
	e := appliedEvent(t, env)
	key := consumer.LeaseKey(e)
	before := setLease(t, env, key, &consumer.Lease{Owner: "serve-b", Key: "k2", Until: time.Now().Add(time.Minute)})

	marks := &readCountingMarks{Watermarks: env.Marks}
	proc := redeliverProcessor(env, marks, "replay", time.Minute)
	fwd := &leaseSeer{env: env}
	done := make(chan error, 1)
	go func() { done <- proc.Redeliver(t.Context(), e, fwd) }()
	// Two reads: it found the holder's lease and looked again after a wait.
	waitFor(t, "the redelivery to look at the held subject twice", func() bool { return marks.gets.Load() >= 2 })
	select {
	case err := <-done:
		t.Fatalf("Redeliver returned %v while another holder's live lease held the subject", err)
	default:
	}
	// The holder releases (its commit).
	setLease(t, env, key, nil)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Redeliver: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Redeliver did not run within 30 s of the holder's release")
	}
	fwd.mu.Lock()
	defer fwd.mu.Unlock()
	if fwd.calls != 1 {
		t.Fatalf("forward ran %d times, want 1", fwd.calls)
	}
	if l := fwd.seen[0]; l == nil || l.Owner != "replay" || !l.Redeliver || l.Key != "k1" {
		t.Errorf("while the forward ran the subject's lease was %+v; want the replay's redeliver lease of k1", l)
	}
	after := mark(t, env, "G-1")
	if after.Lease != nil || !after.At.Equal(before.At) || len(after.Keys) != len(before.Keys) || len(after.Grants) != len(before.Grants) {
		t.Errorf("mark after the redelivery %+v; want it as before %+v, without a lease", after, before)
	}
}

// TestRedeliverRefusesASubjectInDoubt: a holder gone between its claim and
// its commit leaves its event in doubt until its redelivery settles it; a
// redelivery meanwhile runs nothing and says why.
func TestRedeliverRefusesASubjectInDoubt(t *testing.T) {
	env := jstest.Start(t, "")
	e := appliedEvent(t, env)
	dead := &consumer.Lease{Owner: "serve-gone", Key: "k2", Until: time.Now().Add(-time.Second)}
	setLease(t, env, consumer.LeaseKey(e), dead)
	fwd := &leaseSeer{env: env}
	err := redeliverProcessor(env, env.Marks, "replay", time.Minute).Redeliver(t.Context(), e, fwd)
	if !errors.Is(err, consumer.ErrSubjectInDoubt) {
		t.Fatalf("Redeliver on a subject in doubt = %v, want ErrSubjectInDoubt", err)
	}
	if fwd.calls != 0 {
		t.Errorf("forward ran %d times on a subject in doubt", fwd.calls)
	}
	if l := mark(t, env, "G-1").Lease; l == nil || l.Owner != dead.Owner || l.Key != dead.Key {
		t.Errorf("the in-doubt lease became %+v; want it left for the event's redelivery", l)
	}
}

// TestRedeliverLeaseLeftByAStoppedReplayIsNotInDoubt: a replay that stops
// (kill -9) while redelivering leaves its lease; it names an event already
// applied, which no redelivery comes to settle, so the subject's next event
// applies once the lease ran out, without the in-doubt wait (a minute here:
// longer than the settle's 30 s deadline).
func TestRedeliverLeaseLeftByAStoppedReplayIsNotInDoubt(t *testing.T) {
	env := jstest.Start(t, "")
	e := appliedEvent(t, env)
	setLease(t, env, consumer.LeaseKey(e), &consumer.Lease{Owner: "replay-gone", Key: e.Key, Until: time.Now().Add(-time.Second), Redeliver: true})
	store(t, env, ev{"k2", "G-1", "2026-11-30T11:00:00Z", "t"})
	start(t, env, redeliverProcessor(env, env.Marks, "serve-2", time.Minute), 2)
	waitSettled(t, env)
	m := mark(t, env, "G-1")
	if want := time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC); !m.At.Equal(want) || m.Lease != nil {
		t.Errorf("mark after k2 = %+v; want k2 applied at %s and no lease", m, want)
	}
	if got := grants(t, env); len(got) != 2 || got[1] != "grants.grants.G-1.t k2" {
		t.Errorf("GRANTS = %v; want k1 then k2", got)
	}
}
