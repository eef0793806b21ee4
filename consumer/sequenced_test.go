package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
)

// Sequenced GRANTS publishes (sequenced.go) against a real server whose
// GRANTS duplicate window (100 ms) has long passed when the repeat comes:
// only the expected sequence can keep it out.

// lostAnswer is the real GRANTS store whose first publish of key is stored
// and then reported failed, as an answer lost to a timeout is.
type lostAnswer struct {
	*jetstream.Effects
	key  string
	mu   sync.Mutex
	lost bool
}

func (l *lostAnswer) PublishGrant(ctx context.Context, subject, key string, h http.Header, body []byte) (uint64, error) {
	seq, err := l.Effects.PublishGrant(ctx, subject, key, h, body)
	return l.lose(key, seq, err)
}

func (l *lostAnswer) PublishGrantAfter(ctx context.Context, subject, key string, last uint64, h http.Header, body []byte) (uint64, error) {
	seq, err := l.Effects.PublishGrantAfter(ctx, subject, key, last, h, body)
	return l.lose(key, seq, err)
}

func (l *lostAnswer) lose(key string, seq uint64, err error) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && key == l.key && !l.lost {
		l.lost = true
		return 0, errors.New("nats: timeout (the message was stored)")
	}
	return seq, err
}

// seqEnv is a real server with a 100 ms GRANTS window and a clock for
// leases that the test moves.
type seqEnv struct {
	env   *jstest.Env
	mu    sync.Mutex
	clock time.Time
}

func newSeqEnv(t *testing.T) *seqEnv {
	return &seqEnv{env: jstest.StartWith(t, "", jstest.ShortGrantsWindow()), clock: time.Now()}
}

func (s *seqEnv) now() time.Time { s.mu.Lock(); defer s.mu.Unlock(); return s.clock }

func (s *seqEnv) advance(d time.Duration) { s.mu.Lock(); defer s.mu.Unlock(); s.clock = s.clock.Add(d) }

func (s *seqEnv) proc(owner string, grants consumer.Grants, audit consumer.Auditor) *consumer.Processor {
	return s.procWith(owner, grants, audit, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
}

// procWith is proc with its log and metrics, and opt (if not nil) applied
// to its options.
func (s *seqEnv) procWith(owner string, grants consumer.Grants, audit consumer.Auditor, log *slog.Logger, m *consumer.Metrics, opt func(*consumer.Options)) *consumer.Processor {
	rules := map[string]consumer.Rule{"grants": {Watermark: true, OneAccount: true, Effects: []consumer.Effect{
		consumer.GrantsEffect{Template: "grants.{provider}.{subject}.{type}", Grants: grants},
	}}}
	o := consumer.Options{
		Owner: owner, MaxDeliver: 5, Backoff: []time.Duration{time.Second}, LeaseTTL: time.Minute,
		Horizon: time.Hour, Now: s.now,
	}
	if opt != nil {
		opt(&o)
	}
	return consumer.NewProcessor(rules, s.env.Marks, s.env.Applied, jetstream.NewEffects(s.env.Conn), audit, log, m, o)
}

// event is e as the source delivers it (headers as the gateway stores them).
func (s *seqEnv) event(t *testing.T, e ev) consumer.Event {
	t.Helper()
	h := http.Header{}
	h.Set(event.HeaderKey, e.key)
	h.Set(event.HeaderProvider, "grants")
	h.Set(event.HeaderAccount, "default")
	h.Set(event.HeaderSubject, e.subject)
	h.Set(event.HeaderOccurredAt, e.occurred)
	h.Set(event.HeaderType, e.typ)
	at, err := consumer.ParseOccurredAt(e.occurred)
	if err != nil {
		t.Fatal(err)
	}
	return consumer.Event{Key: e.key, Provider: "grants", Account: "default", Subject: e.subject, Type: e.typ,
		OccurredRaw: e.occurred, OccurredAt: at, ReceivedAt: time.Now(), Header: h, Body: []byte(`{}`)}
}

func (s *seqEnv) deliver(t *testing.T, p *consumer.Processor, e ev, n int) consumer.Outcome {
	t.Helper()
	return p.Process(t.Context(), &consumer.Message{Event: s.event(t, e), Deliveries: n, Delivery: nopDelivery{}})
}

// windowPassed waits until GRANTS's duplicate window forgot every id
// stored before the call: a canary id stored now is forgotten after them
// (the server drops ids in the order it stored them), and while it is
// held a repeat of it is answered duplicate with its first sequence.
func (s *seqEnv) windowPassed(t *testing.T) {
	t.Helper()
	fx := jetstream.NewEffects(s.env.Conn)
	canary := fmt.Sprintf("canary-%d", time.Now().UnixNano())
	first, err := fx.PublishGrant(t.Context(), "grants.probe", canary, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the duplicate window to pass", func() bool {
		seq, err := fx.PublishGrant(t.Context(), "grants.probe", canary, nil, nil)
		return err == nil && seq != first
	})
}

// applyThenCrash applies first (unless its key is empty) with p, then
// delivers crashing, whose holder stops after its effects: published to
// GRANTS, the mark's lease still naming it.
func (s *seqEnv) applyThenCrash(t *testing.T, p *consumer.Processor, first, crashing ev) {
	t.Helper()
	if first.key != "" {
		if out := s.deliver(t, p, first, 1); out.Decision != consumer.Applied {
			t.Fatalf("%s: %+v, want applied", first.key, out)
		}
	}
	consumer.SetCrash(p, func(step, key string) bool { return step == "after-effects" && key == crashing.key })
	if out := s.deliver(t, p, crashing, 1); out.Decision != "crashed" {
		t.Fatalf("%s: %+v, want crashed after its effects", crashing.key, out)
	}
}

// applied lists GRANTS's messages of the test's subjects as "subject key".
func (s *seqEnv) applied(t *testing.T) []string {
	var out []string
	for _, g := range grants(t, s.env) {
		if !strings.HasPrefix(g, "grants.probe") {
			out = append(out, g)
		}
	}
	return out
}

// A publish whose answer was lost (stored, reported failed) is retried
// after the window: the retry finds the message instead of storing a
// second one.
func TestSequencedLostAnswerRetriedAfterTheWindow(t *testing.T) {
	s := newSeqEnv(t)
	grants := &lostAnswer{Effects: jetstream.NewEffects(s.env.Conn), key: "k1"}
	p := s.proc("a", grants, &auditLog{})
	k1 := ev{"k1", "G-1", "2026-11-30T10:00:00Z", "a"}
	if out := s.deliver(t, p, k1, 1); out.Decision != consumer.Retry {
		t.Fatalf("first attempt: %+v, want retry (the answer was lost)", out)
	}
	s.windowPassed(t)
	if out := s.deliver(t, p, k1, 2); out.Decision != consumer.Applied {
		t.Fatalf("retry: %+v, want applied", out)
	}
	if got := s.applied(t); strings.Join(got, ",") != "grants.grants.G-1.a k1" {
		t.Fatalf("GRANTS = %v, want k1 once", got)
	}
	if m := mark(t, s.env, "G-1"); m.Lease != nil || len(m.Grants) != 1 {
		t.Fatalf("mark %+v: want no lease and k1's sequence", m)
	}
}

// A holder publishes k2 and stops before committing. After its lease and
// the in-doubt wait, an older event of the subject comes first: it finds
// k2 in GRANTS and is stale (not published after a newer one), k2's mark
// is committed, and k2's redelivery, long after the window, is
// already-applied, not published twice.
func TestSequencedInDoubtEventTakenIntoTheMark(t *testing.T) {
	s := newSeqEnv(t)
	fx := jetstream.NewEffects(s.env.Conn)
	audit := &auditLog{}
	k1 := ev{"k1", "G-1", "2026-11-30T10:00:00Z", "a"}
	k2 := ev{"k2", "G-1", "2026-11-30T11:00:00Z", "a"}
	k4 := ev{"k4", "G-1", "2026-11-30T10:30:00Z", "a"}
	k6 := ev{"k6", "G-1", "2026-11-30T12:00:00Z", "a"}

	a := s.proc("a", fx, audit)
	s.applyThenCrash(t, a, k1, k2)
	s.windowPassed(t)
	s.advance(time.Hour) // past the lease and the in-doubt wait

	b := s.proc("b", fx, audit)
	out := s.deliver(t, b, k4, 1)
	if out.Decision != consumer.Stale || !strings.Contains(out.Reason, "found in GRANTS") {
		t.Fatalf("k4 after the in-doubt k2: %+v, want stale (k2 found in GRANTS)", out)
	}
	m := mark(t, s.env, "G-1")
	if m.Lease != nil || !m.At.Equal(at(11)) || strings.Join(m.Keys, ",") != "k2" {
		t.Fatalf("mark after k4: %+v, want k2's, no lease", m)
	}
	if n := audit.count("applied"); n != 2 {
		t.Fatalf("applied records after k4: %d, want 2 (k1, then k2 taken from GRANTS)", n)
	}
	if out := s.deliver(t, b, k2, 2); out.Decision != consumer.AlreadyApplied {
		t.Fatalf("k2's redelivery: %+v, want already-applied", out)
	}
	if out := s.deliver(t, b, k6, 1); out.Decision != consumer.Applied {
		t.Fatalf("k6: %+v, want applied", out)
	}
	want := "grants.grants.G-1.a k1,grants.grants.G-1.a k2,grants.grants.G-1.a k6"
	if got := s.applied(t); strings.Join(got, ",") != want {
		t.Fatalf("GRANTS = %v, want %s", got, want)
	}
}

// The same in-doubt k2, then a newer event first: k2 is taken into the
// mark, the newer one publishes after it, and k2's redelivery is
// already-applied (the applied-key lookup in GRANTS answered this one
// before sequenced publishes too).
func TestSequencedNewerEventAfterInDoubtOne(t *testing.T) {
	s := newSeqEnv(t)
	fx := jetstream.NewEffects(s.env.Conn)
	k2 := ev{"k2", "G-1", "2026-11-30T11:00:00Z", "a"}
	k6 := ev{"k6", "G-1", "2026-11-30T12:00:00Z", "a"}
	a := s.proc("a", fx, &auditLog{})
	s.applyThenCrash(t, a, ev{}, k2)
	s.windowPassed(t)
	s.advance(time.Hour)
	b := s.proc("b", fx, &auditLog{})
	if out := s.deliver(t, b, k6, 1); out.Decision != consumer.Applied {
		t.Fatalf("k6: %+v, want applied", out)
	}
	if out := s.deliver(t, b, k2, 2); out.Decision != consumer.AlreadyApplied {
		t.Fatalf("k2's redelivery: %+v, want already-applied", out)
	}
	want := "grants.grants.G-1.a k2,grants.grants.G-1.a k6"
	if got := s.applied(t); strings.Join(got, ",") != want {
		t.Fatalf("GRANTS = %v, want %s", got, want)
	}
}

// An operator deletes a subject's mark (its GRANTS sequences with it). A
// redelivery of an event already in GRANTS, after the window, reads the
// subject back a horizon and is not published again; the next event
// publishes after it.
func TestSequencedAfterTheMarkWasDeleted(t *testing.T) {
	s := newSeqEnv(t)
	fx := jetstream.NewEffects(s.env.Conn)
	p := s.proc("a", fx, &auditLog{})
	k1 := ev{"k1", "G-1", "2026-11-30T10:00:00Z", "a"}
	k2 := ev{"k2", "G-1", "2026-11-30T11:00:00Z", "a"}
	if out := s.deliver(t, p, k1, 1); out.Decision != consumer.Applied {
		t.Fatalf("k1: %+v", out)
	}
	kv, err := s.env.Conn.JS.KeyValue(t.Context(), jetstream.BucketMarks)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(t.Context(), "grants.default.G-1"); err != nil {
		t.Fatal(err)
	}
	s.windowPassed(t)
	q := s.proc("b", fx, &auditLog{}) // no cached mark
	if out := s.deliver(t, q, k1, 2); out.Decision != consumer.Applied {
		t.Fatalf("k1's redelivery: %+v, want applied (found in GRANTS, the mark rebuilt)", out)
	}
	if out := s.deliver(t, q, k2, 1); out.Decision != consumer.Applied {
		t.Fatalf("k2: %+v, want applied", out)
	}
	want := "grants.grants.G-1.a k1,grants.grants.G-1.a k2"
	if got := s.applied(t); strings.Join(got, ",") != want {
		t.Fatalf("GRANTS = %v, want %s", got, want)
	}
}

// afterPublish runs hook after each successful PublishGrantAfter.
type afterPublish struct {
	*jetstream.Effects
	hook func(key string)
}

// stallAfter is a GRANTS store whose holder stalls right after publishing
// key: the clock moves by d (past its lease) and then runs, once.
func (s *seqEnv) stallAfter(fx *jetstream.Effects, key string, d time.Duration, then func()) *afterPublish {
	a := &afterPublish{Effects: fx}
	a.hook = func(k string) {
		if k != key {
			return
		}
		a.hook = nil
		s.advance(d)
		then()
	}
	return a
}

func (a *afterPublish) PublishGrantAfter(ctx context.Context, subject, key string, last uint64, h http.Header, body []byte) (uint64, error) {
	seq, err := a.Effects.PublishGrantAfter(ctx, subject, key, last, h, body)
	if err == nil && a.hook != nil {
		a.hook(key)
	}
	return seq, err
}

// A holder whose commit conflicts (it stalled past its lease and another
// instance moved the mark) commits on top of the mark it reads again. It
// must keep the events its publish found in GRANTS, not only its own
// sequence: else an event of the same instant found there (k2, published
// by a holder that crashed) is neither in the mark's keys nor after its
// sequence, and its redelivery publishes it again. (Found in review: a
// second k2 once the applied-key lookup in GRANTS misses it.)
func TestSequencedCommitOnTopKeepsWhatItFound(t *testing.T) {
	s := newSeqEnv(t)
	fx := jetstream.NewEffects(s.env.Conn)
	k1 := ev{"k1", "G-1", "2026-11-30T10:00:00Z", "a"}
	k2 := ev{"k2", "G-1", "2026-11-30T11:00:00Z", "a"}
	k3 := ev{"k3", "G-1", "2026-11-30T11:00:00Z", "a"} // the same instant as k2
	k5 := ev{"k5", "G-1", "2026-11-30T10:30:00Z", "a"}
	s.applyThenCrash(t, s.proc("a", fx, &auditLog{}), k1, k2)
	s.advance(3 * time.Minute) // past a's lease and the in-doubt wait

	// c: another instance whose forward fails for k5; it claims the
	// subject while b stalls, and releases it.
	failing := consumer.EffectFunc(func(_ context.Context, e consumer.Event) error { return fmt.Errorf("forward %s: 503", e.Key) })
	c := consumer.NewProcessor(map[string]consumer.Rule{"grants": {Watermark: true, OneAccount: true, Effects: []consumer.Effect{
		failing, consumer.GrantsEffect{Template: "grants.{provider}.{subject}.{type}", Grants: fx},
	}}}, s.env.Marks, s.env.Applied, fx, &auditLog{}, slog.New(slog.DiscardHandler), nil, consumer.Options{
		Owner: "c", MaxDeliver: 5, LeaseTTL: time.Minute, Horizon: time.Hour, Now: s.now,
	})
	bStore := s.stallAfter(fx, "k3", 3*time.Minute, func() { // b stalled past its lease
		if out := s.deliver(t, c, k5, 1); out.Decision != consumer.Retry {
			t.Errorf("k5 at c: %+v, want retry (its forward failed)", out)
		}
	})
	b := s.proc("b", bStore, &auditLog{})
	if out := s.deliver(t, b, k3, 1); out.Decision != consumer.Applied {
		t.Fatalf("k3: %+v", out)
	}
	m := mark(t, s.env, "G-1")
	if keys := strings.Join(slices.Sorted(slices.Values(m.Keys)), ","); !m.At.Equal(at(11)) || keys != "k2,k3" {
		t.Fatalf("mark after b's commit on top: %s %v, want 11:00 [k2 k3] (k2 found in GRANTS)", m.At.Format(time.RFC3339), m.Keys)
	}
	if out := s.deliver(t, b, k2, 2); out.Decision != consumer.AlreadyApplied {
		t.Fatalf("k2's redelivery: %+v, want already-applied", out)
	}
	want := "grants.grants.G-1.a k1,grants.grants.G-1.a k2,grants.grants.G-1.a k3"
	if got := s.applied(t); strings.Join(got, ",") != want {
		t.Fatalf("GRANTS = %v, want %s", got, want)
	}
}

// meddling is the real store with another provider's messages published
// on the event's GRANTS subject before each of the first n publishes, so
// each is refused (a template collision; a holder that lost its lease).
type meddling struct {
	*jetstream.Effects
	n int
}

func (m *meddling) PublishGrantAfter(ctx context.Context, subject, key string, last uint64, h http.Header, body []byte) (uint64, error) {
	if m.n > 0 {
		m.n--
		o := http.Header{}
		o.Set(event.HeaderProvider, "other")
		if _, err := m.Effects.PublishGrant(ctx, subject, fmt.Sprintf("other-%d", m.n), o, nil); err != nil {
			return 0, err
		}
	}
	return m.Effects.PublishGrantAfter(ctx, subject, key, last, h, body)
}

// A GRANTS subject that keeps moving under a publish is not the event's
// fault: after the rounds run out the event is retried without counting
// an attempt (with max_deliver 1 a counted one would dead-letter it), and
// the other provider's messages there are not taken into the mark.
func TestSequencedRoundsRunOutRetryUncounted(t *testing.T) {
	s := newSeqEnv(t)
	grants := &meddling{Effects: jetstream.NewEffects(s.env.Conn), n: 10}
	rules := map[string]consumer.Rule{"grants": {Watermark: true, OneAccount: true, Effects: []consumer.Effect{
		consumer.GrantsEffect{Template: "grants.{provider}.{subject}.{type}", Grants: grants},
	}}}
	p := consumer.NewProcessor(rules, s.env.Marks, s.env.Applied, jetstream.NewEffects(s.env.Conn), &auditLog{},
		slog.New(slog.DiscardHandler), nil, consumer.Options{Owner: "a", MaxDeliver: 1, LeaseTTL: time.Minute, Horizon: time.Hour, Now: s.now})
	k1 := ev{"k1", "G-1", "2026-11-30T10:00:00Z", "a"}
	if out := s.deliver(t, p, k1, 1); out.Decision != consumer.Applied {
		t.Fatalf("k1 under a moving GRANTS subject: %+v, want applied (retried in place, not dead-lettered)", out)
	}
	if m := mark(t, s.env, "G-1"); !m.At.Equal(at(10)) || strings.Join(m.Keys, ",") != "k1" {
		t.Fatalf("mark %+v, want k1's only", m)
	}
}

// A takeover settles its own event without publishing it again and
// without learning its sequence; the next event's publish reads it in
// GRANTS. It is in the mark already: AUDIT records it applied once.
func TestSequencedSettledTakeoverRecordedOnce(t *testing.T) {
	s := newSeqEnv(t)
	fx := jetstream.NewEffects(s.env.Conn)
	audit := &auditLog{}
	k2 := ev{"k2", "G-1", "2026-11-30T11:00:00Z", "a"}
	s.applyThenCrash(t, s.proc("a", fx, audit), ev{"k1", "G-1", "2026-11-30T10:00:00Z", "a"}, k2)
	s.advance(2 * time.Minute) // past the lease
	b := s.proc("b", fx, audit)
	if out := s.deliver(t, b, k2, 2); out.Decision != consumer.Applied {
		t.Fatalf("k2's redelivery: %+v, want applied (settled by the takeover)", out)
	}
	if out := s.deliver(t, b, ev{"k3", "G-1", "2026-11-30T12:00:00Z", "a"}, 1); out.Decision != consumer.Applied {
		t.Fatalf("k3: %+v", out)
	}
	if n := audit.count("applied"); n != 3 {
		t.Fatalf("applied records: %d, want 3 (k1, k2, k3 once each)", n)
	}
}

// k2's holder crashed after publishing. b applies k3: its publish is
// refused, it finds k2, publishes k3, then stalls past its lease. c
// applies k5: refused too (b never committed a sequence), it finds k2 and
// k3 and records both applied. b then commits on top: it must not record
// k2 again. (Found in review: 6 applied records for 4 events.) k3 is
// recorded twice, by c and by b itself: two holders of one event, as when
// a lease is lost without sequenced publishes; b cannot tell that c
// recorded it.
func TestSequencedFoundWhileLeaseLostRecordedOnce(t *testing.T) {
	s := newSeqEnv(t)
	fx := jetstream.NewEffects(s.env.Conn)
	audit := &auditLog{}
	k1 := ev{"k1", "G-1", "2026-11-30T10:00:00Z", "a"}
	k2 := ev{"k2", "G-1", "2026-11-30T11:00:00Z", "a"}
	k3 := ev{"k3", "G-1", "2026-11-30T12:00:00Z", "a"}
	k5 := ev{"k5", "G-1", "2026-11-30T12:30:00Z", "a"}
	a := s.proc("a", fx, audit)
	s.applyThenCrash(t, a, k1, k2)
	s.advance(3 * time.Minute) // past a's lease and the in-doubt wait

	c := s.proc("c", fx, audit)
	bStore := s.stallAfter(fx, "k3", 3*time.Minute, func() { // b stalled past its lease and the in-doubt wait
		if out := s.deliver(t, c, k5, 1); out.Decision != consumer.Applied {
			t.Errorf("k5 at c: %+v, want applied", out)
		}
	})
	b := s.proc("b", bStore, audit)
	if out := s.deliver(t, b, k3, 1); out.Decision != consumer.Applied {
		t.Fatalf("k3: %+v", out)
	}
	if out := s.deliver(t, c, k2, 2); out.Decision != consumer.AlreadyApplied {
		t.Fatalf("k2's redelivery: %+v, want already-applied", out)
	}
	want := "grants.grants.G-1.a k1,grants.grants.G-1.a k2,grants.grants.G-1.a k3,grants.grants.G-1.a k5"
	if got := s.applied(t); strings.Join(got, ",") != want {
		t.Fatalf("GRANTS = %v, want %s", got, want)
	}
	audit.mu.Lock()
	var recs []string
	for _, r := range audit.recs {
		recs = append(recs, r.Decision+":"+r.Key)
	}
	audit.mu.Unlock()
	if got := strings.Join(recs, " "); got != "applied:k1 applied:k2 applied:k3 applied:k5 applied:k3" {
		t.Fatalf("AUDIT: %s; want k1, k2 and k5 applied once, k3 by c and by b", got)
	}
}
