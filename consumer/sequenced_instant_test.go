package consumer_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
)

// walkCounter is the real GRANTS store, counting the searches of a GRANTS
// subject by time (HasGrant: one request per message published there
// since the event came in).
type walkCounter struct {
	*jetstream.Effects
	mu    sync.Mutex
	walks int
}

func (w *walkCounter) HasGrant(ctx context.Context, subject, key string, since time.Time) (bool, error) {
	w.mu.Lock()
	w.walks++
	w.mu.Unlock()
	return w.Effects.HasGrant(ctx, subject, key, since)
}

func (w *walkCounter) count() int { w.mu.Lock(); defer w.mu.Unlock(); return w.walks }

// Events of one subject sharing an instant (occurred_at in whole seconds)
// are told apart by the mark's keys, not by searching the subject's GRANTS
// messages since each came in: that search read every message of the
// subject for each event (300 of one subject at one instant were applied
// at about 140 a second).
func TestSequencedSameInstantNeedsNoSearch(t *testing.T) {
	s := newSeqEnv(t)
	fx := &walkCounter{Effects: jetstream.NewEffects(s.env.Conn)}
	p := s.proc("a", fx, &auditLog{})
	const n = 30
	var want []string
	for i := range n {
		e := ev{fmt.Sprintf("k%02d", i), "G-1", "2026-11-30T10:00:00Z", "a"}
		if out := s.deliver(t, p, e, 1); out.Decision != consumer.Applied {
			t.Fatalf("%s: %+v, want applied", e.key, out)
		}
		want = append(want, "grants.grants.G-1.a "+e.key)
	}
	// Each again: already applied, nothing published twice.
	for i := range n {
		e := ev{fmt.Sprintf("k%02d", i), "G-1", "2026-11-30T10:00:00Z", "a"}
		if out := s.deliver(t, p, e, 2); out.Decision != consumer.AlreadyApplied {
			t.Fatalf("%s again: %+v, want already-applied", e.key, out)
		}
	}
	if got := s.applied(t); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("GRANTS = %v, want %v", got, want)
	}
	if w := fx.count(); w != 0 {
		t.Fatalf("%d searches of GRANTS by time for %d events of one instant (and their repeats), want none", w, n)
	}
}

// A holder publishes k2 (the instant of the subject's mark) and stops
// before committing; after its lease and the in-doubt wait, k3 of the same
// instant but another type (another GRANTS subject, so its publish does not
// meet k2's message) applies and commits. k2's redelivery finds its message
// after the mark's last commit on its GRANTS subject: applied (by the
// stopped holder), not published again, and recorded applied once, since
// nobody had (it was decided already-applied with no record until the
// property test's lost answers found the gap).
func TestSequencedSameInstantInDoubtFoundAfterTheCommits(t *testing.T) {
	s := newSeqEnv(t)
	fx := &walkCounter{Effects: jetstream.NewEffects(s.env.Conn)}
	audit := &auditLog{}
	k1 := ev{"k1", "G-1", "2026-11-30T10:00:00Z", "a"}
	k2 := ev{"k2", "G-1", "2026-11-30T10:00:00Z", "a"}
	k3 := ev{"k3", "G-1", "2026-11-30T10:00:00Z", "b"}
	a := s.proc("a", fx, audit)
	s.applyThenCrash(t, a, k1, k2)
	s.windowPassed(t)
	s.advance(time.Hour) // past the lease and the in-doubt wait

	b := s.proc("b", fx, audit)
	if out := s.deliver(t, b, k3, 1); out.Decision != consumer.Applied {
		t.Fatalf("k3: %+v, want applied", out)
	}
	if m := mark(t, s.env, "G-1"); strings.Join(m.Keys, ",") != "k1,k3" || m.Lease != nil {
		t.Fatalf("mark after k3: %+v, want k1 and k3 at the instant, no lease", m)
	}
	before := fx.count()
	if out := s.deliver(t, b, k2, 2); out.Decision != consumer.Applied {
		t.Fatalf("k2's redelivery: %+v, want applied (its message is in GRANTS, never recorded)", out)
	}
	if out := s.deliver(t, b, k2, 3); out.Decision != consumer.AlreadyApplied {
		t.Fatalf("k2's next redelivery: %+v, want already-applied", out)
	}
	if recs := audit.of("k2", event.DecisionApplied); len(recs) != 1 || !strings.HasPrefix(recs[0].Reason, "found in GRANTS") {
		t.Fatalf("AUDIT applied records of k2: %+v, want one, found in GRANTS", recs)
	}
	if w := fx.count() - before; w != 0 {
		t.Fatalf("k2's redelivery searched GRANTS by time %d times, want the mark's sequence to tell", w)
	}
	want := "grants.grants.G-1.a k1,grants.grants.G-1.a k2,grants.grants.G-1.b k3"
	if got := s.applied(t); strings.Join(got, ",") != want {
		t.Fatalf("GRANTS = %v, want %s", got, want)
	}
}
