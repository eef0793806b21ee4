package consumer_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream"
)

// Review S, cases checked and found fine (these pass).

// One instant written three ways (RFC 3339, ISO 8601 with millis and an
// offset, Unix seconds): an in-doubt one of them (its holder stopped after
// publishing) is applied by its redelivery (recorded once), and every
// repeat, long after the window, is already applied; nothing is published
// twice.
func TestReviewSEqualInstantsWrittenDifferently(t *testing.T) {
	s := newSeqEnv(t)
	fx := jetstream.NewEffects(s.env.Conn)
	k1 := ev{"k1", "G-1", "2026-11-30T10:00:00Z", "a"}
	k2 := ev{"k2", "G-1", "2026-11-30T10:00:00.000+00:00", "a"}
	k3 := ev{"k3", "G-1", "1796032800", "a"}
	k4 := ev{"k4", "G-1", "2026-11-30T11:00:00+01:00", "b"}
	a := s.proc("a", fx, &auditLog{})
	if out := s.deliver(t, a, k1, 1); out.Decision != consumer.Applied {
		t.Fatalf("k1: %+v", out)
	}
	s.applyThenCrash(t, a, k2, k3) // k3 in doubt
	s.windowPassed(t)
	s.advance(time.Hour)
	b := s.proc("b", fx, &auditLog{})
	if out := s.deliver(t, b, k4, 1); out.Decision != consumer.Applied {
		t.Fatalf("k4: %+v", out)
	}
	// k3, published by a and in doubt, was never recorded: its redelivery
	// takes it into the mark, applied (adoptOwn); then every one is already
	// applied.
	if out := s.deliver(t, b, k3, 2); out.Decision != consumer.Applied {
		t.Fatalf("k3 again: %+v, want applied (in GRANTS, never recorded)", out)
	}
	for _, e := range []ev{k1, k2, k4, k3} {
		if out := s.deliver(t, b, e, 3); out.Decision != consumer.AlreadyApplied {
			t.Fatalf("%s again: %+v, want already-applied", e.key, out)
		}
	}
	want := "grants.grants.G-1.a k1,grants.grants.G-1.a k2,grants.grants.G-1.a k3,grants.grants.G-1.b k4"
	if got := s.applied(t); strings.Join(got, ",") != want {
		t.Fatalf("GRANTS = %v, want %s", got, want)
	}
}

// More types at one instant than maxMarkGrants keeps: the evicted type's
// events fall back to the walk; an in-doubt event of that type, and every
// repeat, are already applied; nothing is published twice.
func TestReviewSEvictedGrantsEntryAtTheInstant(t *testing.T) {
	s := newSeqEnv(t)
	fx := jetstream.NewEffects(s.env.Conn)
	a := s.proc("a", fx, &auditLog{})
	var all []ev
	for i := range 65 {
		e := ev{fmt.Sprintf("k%02d", i), "G-1", "2026-11-30T10:00:00Z", fmt.Sprintf("t%02d", i)}
		if out := s.deliver(t, a, e, 1); out.Decision != consumer.Applied {
			t.Fatalf("%s: %+v", e.key, out)
		}
		all = append(all, e)
	}
	m := mark(t, s.env, "G-1")
	if _, ok := m.Grants["grants.grants.G-1.t00"]; ok || len(m.Grants) != 64 {
		t.Fatalf("mark grants %d entries, t00 kept: want 64, t00 evicted", len(m.Grants))
	}
	doubt := ev{"kd", "G-1", "2026-11-30T10:00:00Z", "t00"}
	s.applyThenCrash(t, a, ev{}, doubt)
	s.windowPassed(t)
	s.advance(time.Hour)
	b := s.proc("b", fx, &auditLog{})
	late := ev{"kl", "G-1", "2026-11-30T10:00:00Z", "t99"}
	if out := s.deliver(t, b, late, 1); out.Decision != consumer.Applied {
		t.Fatalf("kl: %+v", out)
	}
	if out := s.deliver(t, b, doubt, 2); out.Decision != consumer.Applied && out.Decision != consumer.AlreadyApplied {
		t.Fatalf("kd's redelivery: %+v, want applied or already-applied", out)
	}
	for _, e := range append(all, doubt, late) {
		if out := s.deliver(t, b, e, 3); out.Decision != consumer.AlreadyApplied {
			t.Fatalf("%s again: %+v, want already-applied", e.key, out)
		}
	}
	seen := map[string]int{}
	for _, g := range s.applied(t) {
		seen[g]++
		if seen[g] > 1 {
			t.Fatalf("%s published twice", g)
		}
	}
	if len(seen) != 67 {
		t.Fatalf("GRANTS has %d messages, want 67", len(seen))
	}
}
