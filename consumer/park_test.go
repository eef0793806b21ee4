package consumer_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// A standby takes over a subject whose holder died mid-apply: the mark's
// lease names d, in doubt. Run gets the dead holder's e (redelivered), then
// f (new, fetched meanwhile), then d's redelivery. e waits for d at the
// head of its subject, in memory, not handed back: d runs first, then e,
// then f. (Handed back, e came back after f had applied and was stale: 17
// of 1026 events in a CI run of TestConsumerHolderKill9KeepsEachSubjectsOrder.)
func TestRunKeepsAnEventWaitingForAnInDoubtOneAtItsSubjectsHead(t *testing.T) {
	s := newSeqEnv(t)
	fx := jetstream.NewEffects(s.env.Conn)
	d := ev{"d", "G-1", "2026-11-30T10:00:00Z", "a"}
	e := ev{"e", "G-1", "2026-11-30T11:00:00Z", "a"}
	f := ev{"f", "G-1", "2026-11-30T12:00:00Z", "a"}
	s.applyThenCrash(t, s.proc("a", fx, &auditLog{}), ev{}, d)
	s.advance(90 * time.Second) // past d's lease, within the in-doubt wait

	audit := &auditLog{}
	b := s.proc("b", fx, audit)
	deliveries := map[string]*countingDelivery{}
	msg := func(x ev, seq uint64, n int) *consumer.Message {
		e := s.event(t, x)
		e.Seq = seq
		deliveries[x.key] = &countingDelivery{}
		return &consumer.Message{Event: e, Deliveries: n, Delivery: deliveries[x.key]}
	}
	src := newList(msg(e, 2, 2), msg(f, 3, 1), msg(d, 1, 2))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, src, 4) }()
	waitFor(t, "d, e and f applied", func() bool { return audit.count("applied") == 3 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := "grants.grants.G-1.a d,grants.grants.G-1.a e,grants.grants.G-1.a f"
	if got := s.applied(t); strings.Join(got, ",") != want {
		t.Fatalf("GRANTS = %v, want %s", got, want)
	}
	for key, dl := range deliveries {
		dl.mu.Lock()
		acks, naks := dl.acks, dl.naks
		dl.mu.Unlock()
		if acks != 1 || naks != 0 {
			t.Errorf("%s: acked %d, naked %d; want acked once, never handed back", key, acks, naks)
		}
	}
}

// settleLog is what became of several deliveries, in order.
type settleLog struct {
	mu  sync.Mutex
	got []string
}

func (l *settleLog) add(s string) { l.mu.Lock(); defer l.mu.Unlock(); l.got = append(l.got, s) }

func (l *settleLog) all() []string { l.mu.Lock(); defer l.mu.Unlock(); return slices.Clone(l.got) }

// orderedDelivery records acks and hand-backs of every delivery in one log.
type orderedDelivery struct {
	key string
	log *settleLog
}

func (d orderedDelivery) Ack(context.Context) error { d.log.add(d.key + " ack"); return nil }
func (d orderedDelivery) NakWithDelay(time.Duration) error {
	d.log.add(d.key + " nak")
	return nil
}
func (d orderedDelivery) InProgress() error { return nil }

// An event waiting at its subject's head for an in-doubt event that never
// comes runs again once its wait is over (here: the in-doubt wait ends),
// and the event queued behind it follows; at a stop, waiting events go
// back in their order.
func TestRunParkedEventWithoutItsInDoubtOne(t *testing.T) {
	for _, stop := range []bool{false, true} {
		t.Run(map[bool]string{false: "wait over", true: "stop"}[stop], func(t *testing.T) {
			s := newSeqEnv(t)
			fx := jetstream.NewEffects(s.env.Conn)
			s.applyThenCrash(t, s.proc("a", fx, &auditLog{}), ev{}, ev{"d", "G-1", "2026-11-30T10:00:00Z", "a"})
			s.advance(90 * time.Second) // past d's lease, within the in-doubt wait
			audit := &auditLog{}
			b := s.proc("b", fx, audit)
			log := &settleLog{}
			msg := func(x ev, seq uint64, n int) *consumer.Message {
				e := s.event(t, x)
				e.Seq = seq
				return &consumer.Message{Event: e, Deliveries: n, Delivery: orderedDelivery{x.key, log}}
			}
			src := newList(msg(ev{"e", "G-1", "2026-11-30T11:00:00Z", "a"}, 2, 2), msg(ev{"f", "G-1", "2026-11-30T12:00:00Z", "a"}, 3, 1))
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- b.Run(ctx, src, 4) }()
			waitFor(t, "e parked", func() bool { return consumer.Parks(b) > 0 })
			if got := log.all(); len(got) != 0 {
				t.Fatalf("while e waits for d: %v, want nothing settled", got)
			}
			if !stop {
				s.advance(time.Hour) // the in-doubt wait is over
				waitFor(t, "e and f applied", func() bool { return audit.count("applied") == 2 })
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			want := "e ack,f ack"
			if stop {
				want = "e nak,f nak"
			}
			if got := strings.Join(log.all(), ","); got != want {
				t.Fatalf("settled: %s, want %s", got, want)
			}
		})
	}
}

// An event kept waiting for an in-doubt event is run again every second
// until its wait is over (80 s by default): it says so once, a warning and
// a retry in the metrics, not at every run (a crash left a warning a second
// per subject in doubt).
func TestRunParkedEventWarnsOnce(t *testing.T) {
	s := newSeqEnv(t)
	fx := jetstream.NewEffects(s.env.Conn)
	s.applyThenCrash(t, s.proc("a", fx, &auditLog{}), ev{}, ev{"d", "G-1", "2026-11-30T10:00:00Z", "a"})
	s.advance(90 * time.Second) // past d's lease, within the in-doubt wait
	var logged syncBuf
	reg := prometheus.NewRegistry()
	b := s.procWith("b", fx, &auditLog{}, slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug})), consumer.NewMetrics(reg), nil)
	e := s.event(t, ev{"e", "G-1", "2026-11-30T11:00:00Z", "a"})
	e.Seq = 2
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- b.Run(ctx, newList(&consumer.Message{Event: e, Deliveries: 2, Delivery: &countingDelivery{}}), 4)
	}()
	waitFor(t, "e run three times, still waiting", func() bool { return consumer.Parks(b) >= 3 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var warned, debug int
	for _, line := range strings.Split(logged.String(), "\n") {
		if !strings.Contains(line, `msg="event not decided yet"`) || !strings.Contains(line, "key=e ") {
			continue
		}
		switch {
		case strings.Contains(line, "level=WARN"):
			warned++
		case strings.Contains(line, "level=DEBUG"):
			debug++
		}
	}
	if warned != 1 || debug < 2 {
		t.Errorf("e's waits logged %d times at warn, %d at debug; want once at warn, the rest (>= 2) at debug:\n%s", warned, debug, logged.String())
	}
	if got := retries(t, reg); got != 1 {
		t.Errorf("hookgate_consumer_events_total{decision=retry} = %v, want 1", got)
	}
}

// retries is the consumer's retry count in reg.
func retries(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "hookgate_consumer_events_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "decision" && l.GetValue() == consumer.Retry {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// syncBuf is a log destination safe for concurrent writes.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }

func (s *syncBuf) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// A process that knows a lease's owner gone (the embedded server's
// data_dir lock: Options.Gone) does not wait out its lease: the in-doubt
// event's redelivery takes its subject over at once, another event of the
// subject waits for it as in doubt. A lease of an owner not known gone (a
// CLI's) is waited for. (After a kill -9 and a restart, every worker waited
// out a dead process's leases, 32 s by default, and the subjects they held
// up with them: TestKill9RestartKeepsEachSubjectsOrder in e2e/.)
func TestLeasesOfProcessesGoneAreNotWaitedFor(t *testing.T) {
	for _, gone := range []bool{true, false} {
		t.Run(map[bool]string{true: "owner gone", false: "owner not known gone"}[gone], func(t *testing.T) {
			s := newSeqEnv(t)
			fx := jetstream.NewEffects(s.env.Conn)
			d := ev{"d", "G-1", "2026-11-30T10:00:00Z", "a"}
			s.applyThenCrash(t, s.proc("a", fx, &auditLog{}), ev{}, d)
			s.advance(time.Second) // well inside d's lease (a minute)
			b := s.procWith("b", fx, &auditLog{}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, func(o *consumer.Options) {
				o.Gone = func(owner string) bool { return gone && owner == "a" }
			})
			// The fake clock stands still: waiting for the lease would last
			// until ctx ends.
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			e := s.event(t, ev{"e", "G-1", "2026-11-30T11:00:00Z", "a"})
			out := b.Process(ctx, &consumer.Message{Event: e, Deliveries: 1, Delivery: nopDelivery{}})
			if waits := strings.Contains(out.Reason, "in-doubt event d"); out.Decision != consumer.Retry || waits != gone {
				t.Fatalf("e: %+v; want a retry, waiting for in-doubt d: %t", out, gone)
			}
			out = b.Process(ctx, &consumer.Message{Event: s.event(t, d), Deliveries: 2, Delivery: nopDelivery{}})
			if applied := out.Decision == consumer.Applied; applied != gone {
				t.Fatalf("d redelivered: %+v; want applied at once: %t", out, gone)
			}
		})
	}
}

// A worker that meets another live holder's lease on a subject waits in
// place only a while (leaseWaitInPlace), then keeps the event at its
// subject's head and takes other subjects: here one worker, a subject held
// by a lease that outlives the test (the clock stands still), and an event
// of another subject behind it, which applies. (Waiting in place, as many
// subjects held elsewhere as workers held up every subject, up to the
// lease time.)
func TestRunWorkerNotHeldByAnotherHoldersLease(t *testing.T) {
	s := newSeqEnv(t)
	fx := jetstream.NewEffects(s.env.Conn)
	s.applyThenCrash(t, s.proc("a", fx, &auditLog{}), ev{}, ev{"d", "G-1", "2026-11-30T10:00:00Z", "a"})
	audit := &auditLog{}
	b := s.proc("b", fx, audit)
	log := &settleLog{}
	msg := func(x ev, seq uint64) *consumer.Message {
		e := s.event(t, x)
		e.Seq = seq
		return &consumer.Message{Event: e, Deliveries: 1, Delivery: orderedDelivery{x.key, log}}
	}
	src := newList(msg(ev{"e", "G-1", "2026-11-30T11:00:00Z", "a"}, 2), msg(ev{"f", "G-2", "2026-11-30T11:00:00Z", "a"}, 3))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, src, 1) }()
	waitFor(t, "f applied while e waits for a's lease", func() bool { return audit.count("applied") == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// e was kept, never run beside a's lease: handed back at the stop.
	if got := strings.Join(log.all(), ","); got != "f ack,e nak" {
		t.Fatalf("settled: %s, want f ack,e nak", got)
	}
	if g := s.applied(t); strings.Join(g, ",") != "grants.grants.G-1.a d,grants.grants.G-2.a f" {
		t.Fatalf("GRANTS = %v, want a's d and f", g)
	}
}

// Replay and dlq replay run one event at a time, outside Run (ProcessOnce,
// nothing to keep the event for them): they still wait for another
// holder's live lease in place, until it ends or their ctx does.
func TestProcessOnceWaitsForALiveLeaseInPlace(t *testing.T) {
	s := newSeqEnv(t)
	fx := jetstream.NewEffects(s.env.Conn)
	s.applyThenCrash(t, s.proc("a", fx, &auditLog{}), ev{}, ev{"d", "G-1", "2026-11-30T10:00:00Z", "a"})
	b := s.proc("b", fx, &auditLog{})
	// The fake clock stands still: a's lease outlives ctx.
	ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
	defer cancel()
	out := b.ProcessOnce(ctx, s.event(t, ev{"e", "G-1", "2026-11-30T11:00:00Z", "a"}), 1)
	if out.Decision != consumer.Retry || !strings.Contains(out.Reason, context.DeadlineExceeded.Error()) {
		t.Fatalf("%+v; want a retry when ctx ended, after waiting in place", out)
	}
}
