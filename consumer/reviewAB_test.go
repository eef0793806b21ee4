package consumer_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
)

// Review AB: the consumer core against CONTRACT.md ("Sequencing", "Effects
// and retries", AUDIT records) and the README's consumer sections.

// reviewABRecords returns the records of key with decision.
func reviewABRecords(a *auditLog, key, decision string) []event.AuditRecord {
	return a.of(key, decision)
}

// CONTRACT.md, Sequencing: "`occurred_at` accepts RFC 3339, ISO 8601
// without a zone (read as UTC whatever the host's zone), and Unix seconds".
//
// ISO 8601 lets a local date-time omit its seconds (reduced precision,
// "2026-11-30T10:00"), and that is what common senders write for an
// instant on a whole minute: Java's LocalDateTime.toString() drops ":00"
// seconds, an HTML datetime-local field has no seconds at all. Such a
// sender's events apply 59 times in 60 and the 60th, on the minute, is
// dead-lettered as unparseable ("a time without seconds"), never retried.
func TestReviewABZonelessISO8601WithoutSecondsApplies(t *testing.T) {
	env := jstest.Start(t, "")
	audit := &auditLog{}
	// The same sender: one event a second past the minute, one on it
	// (LocalDateTime.toString() of 10:01:00 is "2026-11-30T10:01").
	store(t, env, ev{"k-past-minute", "G-1", "2026-11-30T10:00:01", "a"})
	store(t, env, ev{"k-on-minute", "G-1", "2026-11-30T10:01", "a"})
	start(t, env, newProcessor(env, "a", true, audit), 2)
	waitSettled(t, env)

	if n := len(reviewABRecords(audit, "k-past-minute", event.DecisionApplied)); n != 1 {
		t.Fatalf("setup: k-past-minute applied %d times, want 1", n)
	}
	if recs := reviewABRecords(audit, "k-on-minute", event.DecisionDeadLettered); len(recs) > 0 {
		t.Fatalf(`occurred_at "2026-11-30T10:01" (ISO 8601 without a zone, reduced precision) dead-lettered: %q; want applied at 2026-11-30T10:01:00Z`, recs[0].Reason)
	}
	if n := len(reviewABRecords(audit, "k-on-minute", event.DecisionApplied)); n != 1 {
		t.Fatalf("k-on-minute applied %d times, want 1", n)
	}
	if m := mark(t, env, "G-1"); !m.At.Equal(time.Date(2026, 11, 30, 10, 1, 0, 0, time.UTC)) {
		t.Fatalf("G-1 mark at %v, want 2026-11-30T10:01:00Z", m.At)
	}
}

// CONTRACT.md, NATS, AUDIT records: "`status` (HTTP status where there is
// one)". A dead letter the forward's answer decided ("Any other 4xx:
// dead-lettered at once") has one: the receiver's 404. The record says 0,
// so an operator filtering AUDIT by status (all dead letters a receiver
// refused with 410 Gone, say) finds none; the status is only in the
// reason's free text.
func TestReviewABDeadLetterRecordCarriesTheForwardStatus(t *testing.T) {
	env := jstest.Start(t, "")
	audit := &auditLog{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	fwd, err := consumer.NewForward(consumer.ForwardOptions{URL: srv.URL + "/hook", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	store(t, env, ev{"k-404", "G-1", "2026-11-30T10:00:00Z", "a"})
	start(t, env, newProcessor(env, "a", true, audit, fwd), 1)
	waitSettled(t, env)
	recs := reviewABRecords(audit, "k-404", event.DecisionDeadLettered)
	if len(recs) != 1 {
		t.Fatalf("setup: %d dead-lettered records for k-404, want 1", len(recs))
	}
	if recs[0].Status != http.StatusNotFound {
		t.Fatalf("dead-lettered record: status %d, reason %q; want status 404 (the forward's answer that decided it)", recs[0].Status, recs[0].Reason)
	}
}

// CONTRACT.md, Sequencing: "A failing event does not block its subject:
// newer events may apply while it waits for its retry, and if it has been
// superseded when it comes back it is stale (reason `superseded while
// retrying`)."
//
// k4 fails its first attempt and waits for its retry. Meanwhile a newer
// k2 is published to GRANTS by a holder that stops before committing.
// When k4 comes back (attempt 2) it is superseded (by k2, found in
// GRANTS), and stale, but its reason does not say it was superseded while
// retrying: an operator searching AUDIT for the contract's reason misses
// it. (TestFailingEventDoesNotBlockItsSubject checks the reason only when
// the newer event committed.)
func TestReviewABSupersededWhileRetryingFoundInGrants(t *testing.T) {
	s := newSeqEnv(t)
	fx := jetstream.NewEffects(s.env.Conn)
	audit := &auditLog{}
	var failed atomic.Bool
	flaky := consumer.EffectFunc(func(ctx context.Context, e consumer.Event) error {
		if e.Key == "k4" && failed.CompareAndSwap(false, true) {
			return errors.New("downstream 503")
		}
		return nil
	})
	proc := func(owner string) *consumer.Processor {
		rules := map[string]consumer.Rule{"grants": {Watermark: true, OneAccount: true, Effects: []consumer.Effect{
			flaky, consumer.GrantsEffect{Template: "grants.{provider}.{subject}.{type}", Grants: fx},
		}}}
		return consumer.NewProcessor(rules, s.env.Marks, s.env.Applied, fx, audit, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, consumer.Options{
			Owner: owner, MaxDeliver: 5, Backoff: []time.Duration{time.Second}, LeaseTTL: time.Minute, Horizon: time.Hour, Now: s.now,
		})
	}
	k1 := ev{"k1", "G-1", "2026-11-30T10:00:00Z", "a"}
	k2 := ev{"k2", "G-1", "2026-11-30T11:00:00Z", "a"}
	k4 := ev{"k4", "G-1", "2026-11-30T10:30:00Z", "a"}

	a := proc("a")
	if out := s.deliver(t, a, k1, 1); out.Decision != consumer.Applied {
		t.Fatalf("k1: %+v, want applied", out)
	}
	if out := s.deliver(t, a, k4, 1); out.Decision != consumer.Retry {
		t.Fatalf("k4's first attempt: %+v, want retry", out)
	}
	s.applyThenCrash(t, a, ev{}, k2) // k2 in GRANTS, its holder stopped before committing
	s.windowPassed(t)
	s.advance(time.Hour) // past the lease and the in-doubt wait

	b := proc("b")
	out := s.deliver(t, b, k4, 2)
	if out.Decision != consumer.Stale {
		t.Fatalf("k4's retry after k2: %+v, want stale", out)
	}
	recs := reviewABRecords(audit, "k4", event.DecisionStale)
	if len(recs) != 1 {
		t.Fatalf("%d stale records for k4, want 1", len(recs))
	}
	if !strings.Contains(recs[0].Reason, "superseded while retrying") {
		t.Fatalf("k4 (attempt 2, superseded by k2) stale reason %q; want it to say \"superseded while retrying\"", recs[0].Reason)
	}
}
