package consumer_test

import (
	"context"
	"strings"
	"testing"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream"
)

// Review S: seenBy trusts that every GRANTS message of a subject before
// mark.Grants[subject] is in the mark. A commit on top of a mark re-read
// after a conflict (Processor.applyLeased) sets mark.Grants[subject] to
// the holder's own sequence when the re-read mark has a lower one or
// none, keeping only what the holder's publish found after its own
// (older) mark's sequence. When the re-read mark is not a descendant of
// the mark the holder claimed on (an operator deleted it meanwhile), the
// keys the deleted mark had at the instant are in neither, yet their
// messages now lie before mark.Grants[subject]: a redelivery of one of
// them is not found and is published again. The walk by time that seenBy
// replaced found it (pass nil instead of &mark in lease.go: this test
// passes).
func TestReviewSDeletedMarkUnderAHolderHidesAnEarlierKey(t *testing.T) {
	s := newSeqEnv(t)
	fx := jetstream.NewEffects(s.env.Conn)
	kv, err := s.env.Conn.JS.KeyValue(t.Context(), jetstream.BucketMarks)
	if err != nil {
		t.Fatal(err)
	}
	k1 := ev{"k1", "G-1", "2026-11-30T10:00:00Z", "a"}
	k2 := ev{"k2", "G-1", "2026-11-30T10:00:00Z", "a"} // the same instant and GRANTS subject

	// The operator deletes the subject's mark while a holds it for k2,
	// between k2's publish and its commit.
	store := &afterPublish{Effects: fx}
	store.hook = func(key string) {
		if key != k2.key {
			return
		}
		store.hook = nil
		if err := kv.Delete(context.Background(), "grants.default.G-1"); err != nil {
			t.Errorf("delete the mark: %v", err)
		}
	}
	a := s.proc("a", store, &auditLog{})
	if out := s.deliver(t, a, k1, 1); out.Decision != consumer.Applied {
		t.Fatalf("k1: %+v, want applied", out)
	}
	if out := s.deliver(t, a, k2, 1); out.Decision != consumer.Applied {
		t.Fatalf("k2: %+v, want applied (committed on top of the deleted mark)", out)
	}
	m := mark(t, s.env, "G-1")
	t.Logf("mark after k2's commit on top: at %s keys %v grants %v", m.At, m.Keys, m.Grants)

	s.windowPassed(t) // the duplicate window does not hide a second k1
	b := s.proc("b", fx, &auditLog{})
	if j, err := b.Judge(t.Context(), s.event(t, k1), 0); err == nil {
		t.Logf("replay --dry-run's Judge (still the walk) says %s for k1", j.Decision)
	}
	if out := s.deliver(t, b, k1, 2); out.Decision != consumer.AlreadyApplied {
		t.Errorf("k1's redelivery: %+v, want already-applied (k1 is in GRANTS)", out)
	}
	want := "grants.grants.G-1.a k1,grants.grants.G-1.a k2"
	if got := s.applied(t); strings.Join(got, ",") != want {
		t.Fatalf("GRANTS = %v, want %s (each once)", got, want)
	}
}
