package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookgate/hookgate/consumer"
)

// listSource is a Source that delivers its messages in order, then waits
// for the end.
type listSource struct {
	mu   sync.Mutex
	msgs []*consumer.Message
}

func newList(msgs ...*consumer.Message) *listSource { return &listSource{msgs: msgs} }

func (s *listSource) Next(ctx context.Context) (*consumer.Message, error) {
	s.mu.Lock()
	if len(s.msgs) > 0 {
		m := s.msgs[0]
		s.msgs = s.msgs[1:]
		s.mu.Unlock()
		return m, nil
	}
	s.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

// Stopping Run does not wait out another holder's lease: an event waiting
// for its subject (nothing of it done yet) is handed back at once instead
// of holding the shutdown for up to LeaseTTL. (Seen in CI: a restart after
// kill -9 redelivered an event whose lease the dead process still held,
// and SIGTERM then took over 30 s.) Virtual time, so the elapsed time is
// exact.
func TestStopDoesNotWaitForAnotherHoldersLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		marks, grants := newMemMarks(), &grantLog{}
		ev := spec{key: "k", provider: provWatermark, subject: "G-1", at: at(10)}.event(1)
		held := consumer.Mark{Lease: &consumer.Lease{Owner: "other", Key: "k-other", Until: time.Now().Add(time.Hour)}}
		if _, err := marks.Put(t.Context(), consumer.MarkKey(ev), held, 0); err != nil {
			t.Fatal(err)
		}
		rules := map[string]consumer.Rule{provWatermark: {Watermark: true, Effects: []consumer.Effect{
			consumer.GrantsEffect{Template: "grants.{provider}.{subject}", Grants: grants},
		}}}
		proc := consumer.NewProcessor(rules, marks, newMemApplied(), noLetters{}, nopAuditor{}, slog.New(slog.DiscardHandler), nil,
			consumer.Options{Owner: "me", MaxDeliver: 3, LeaseTTL: time.Hour, Now: time.Now})
		d := &countingDelivery{}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- proc.Run(ctx, newList(&consumer.Message{Event: ev, Deliveries: 1, Delivery: d}), 1)
		}()
		for { // until the lane waits for the lease (it keeps the delivery alive meanwhile)
			if d.count() > 0 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		stopAt := time.Now()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		if took := time.Since(stopAt); took > time.Second {
			t.Fatalf("Run took %s to stop: it held the event that waits for another holder's lease", took)
		}
		if acks, naks := d.acked(); acks != 0 || naks != 1 {
			t.Fatalf("acked %d, naked %d; want the event handed back once", acks, naks)
		}
		if got := grants.calls(); len(got) != 0 {
			t.Fatalf("effects ran: %v", got)
		}
	})
}

// A message Run took from the source while every lane was busy, when the
// stop came, is handed back, not dropped: dropped, it would wait out the
// ack wait while newer events of its subject apply and turn it stale.
func TestStopHandsBackUndispatchedMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		slow := blockOn(release, "k1")
		rules := map[string]consumer.Rule{provWatermark: {Watermark: true, Effects: []consumer.Effect{slow,
			consumer.GrantsEffect{Template: "grants.{provider}.{subject}", Grants: &grantLog{}}}}}
		proc := consumer.NewProcessor(rules, newMemMarks(), newMemApplied(), noLetters{}, nopAuditor{}, slog.New(slog.DiscardHandler), nil,
			consumer.Options{Owner: "me", MaxDeliver: 3, LeaseTTL: time.Hour, Now: time.Now})
		ds := make([]*countingDelivery, 3)
		src := newList()
		for i, k := range []string{"k1", "k2", "k3"} {
			ds[i] = &countingDelivery{}
			ev := spec{key: k, provider: provWatermark, subject: "G-1", at: at(10 + i)}.event(uint64(i + 1))
			src.msgs = append(src.msgs, &consumer.Message{Event: ev, Deliveries: 1, Delivery: ds[i]})
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- proc.Run(ctx, src, 1) }()
		synctest.Wait() // k1 in its effect, k2 in the lane's queue, k3 waiting to be dispatched
		cancel()
		synctest.Wait()
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if acks, naks := ds[2].acked(); acks != 0 || naks != 1 {
			t.Fatalf("k3: acked %d, naked %d; want it handed back once", acks, naks)
		}
		if acks, _ := ds[0].acked(); acks != 1 {
			t.Fatalf("k1 (its effects under way at the stop): acked %d, want 1", acks)
		}
	})
}

// downMarks is a WATERMARKS that does not answer its first `down` calls
// (all, when down is negative), then works as memMarks.
type downMarks struct {
	*memMarks
	mu    sync.Mutex
	down  int
	calls int
}

func (d *downMarks) fail() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	return d.down < 0 || d.calls <= d.down
}

func (d *downMarks) tries() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls
}

func (d *downMarks) Get(ctx context.Context, key string) (consumer.Mark, uint64, error) {
	if d.fail() {
		return consumer.Mark{}, 0, errors.New("nats: timeout")
	}
	return d.memMarks.Get(ctx, key)
}

func (d *downMarks) Put(ctx context.Context, key string, m consumer.Mark, rev uint64) (uint64, error) {
	if d.fail() {
		return 0, errors.New("nats: timeout")
	}
	return d.memMarks.Put(ctx, key, m, rev)
}

// A store that does not answer for a moment (a leader election) is waited
// out in place, the delivery kept alive: handed back instead, the event
// could be overtaken by newer events of its subject and turn stale.
func TestStoreBlipIsRetriedInPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		marks := &downMarks{memMarks: newMemMarks(), down: 3}
		grants := &grantLog{}
		rules := map[string]consumer.Rule{provWatermark: {Watermark: true, Effects: []consumer.Effect{
			consumer.GrantsEffect{Template: "grants.{provider}.{subject}", Grants: grants}}}}
		proc := consumer.NewProcessor(rules, marks, newMemApplied(), noLetters{}, nopAuditor{}, slog.New(slog.DiscardHandler), nil,
			consumer.Options{Owner: "me", MaxDeliver: 3, LeaseTTL: time.Hour, Now: time.Now})
		d := &countingDelivery{}
		ev := spec{key: "k", provider: provWatermark, subject: "G-1", at: at(10)}.event(1)
		out := proc.Process(t.Context(), &consumer.Message{Event: ev, Deliveries: 1, Delivery: d})
		if acks, naks := d.acked(); out.Decision != consumer.Applied || acks != 1 || naks != 0 || d.count() == 0 {
			t.Fatalf("%+v, acked %d, naked %d, kept alive %d times; want applied in place, kept alive", out, acks, naks, d.count())
		}
		if got := grants.calls(); len(got) != 1 {
			t.Fatalf("GRANTS publishes %v, want one", got)
		}
	})
}

// While the store does not answer, Process retries in place (up to 3.2 s
// between tries); a stop during such a sleep hands the event back at once.
func TestStopInterruptsInPlaceRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rules := map[string]consumer.Rule{provWatermark: {Watermark: true, Effects: []consumer.Effect{
			consumer.GrantsEffect{Template: "grants.{provider}.{subject}", Grants: &grantLog{}}}}}
		marks := &downMarks{memMarks: newMemMarks(), down: -1}
		proc := consumer.NewProcessor(rules, marks, newMemApplied(), noLetters{}, nopAuditor{}, slog.New(slog.DiscardHandler), nil,
			consumer.Options{Owner: "me", MaxDeliver: 3, LeaseTTL: time.Hour, Now: time.Now})
		d := &countingDelivery{}
		ev := spec{key: "k", provider: provWatermark, subject: "G-1", at: at(10)}.event(1)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- proc.Run(ctx, newList(&consumer.Message{Event: ev, Deliveries: 1, Delivery: d}), 1) }()
		// Virtual time: after tries at 0, 0.1, 0.3, 0.7, 1.5 and 3.1 s the
		// lane sleeps 3.2 s; stop in the middle of that sleep.
		time.Sleep(3200 * time.Millisecond)
		synctest.Wait()
		if n := marks.tries(); n != 6 || d.count() == 0 {
			t.Fatalf("%d tries, kept alive %d times by the stop; want 6 tries in place, kept alive", n, d.count())
		}
		stopAt := time.Now()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if took := time.Since(stopAt); took > time.Second {
			t.Fatalf("Run took %s to stop", took)
		}
		if acks, naks := d.acked(); acks != 0 || naks != 1 {
			t.Fatalf("acked %d, naked %d; want the event handed back once", acks, naks)
		}
	})
}

// An event that takes long (a slow forward, say) holds up only the events
// of its own subject: a free worker takes every other subject's event,
// while the slow subject's later events wait, in order and kept alive,
// until it is done. (With one queue per worker chosen by a hash of the
// subject, the dispatcher stopped at the second event bound for the busy
// worker and every other subject waited with it.)
func TestSlowEventHoldsUpOnlyItsSubject(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		slow := blockOn(release, "slow")
		grants := &grantLog{}
		rules := map[string]consumer.Rule{provWatermark: {Watermark: true, Effects: []consumer.Effect{slow,
			consumer.GrantsEffect{Template: "grants.{provider}.{subject}", Grants: grants}}}}
		proc := consumer.NewProcessor(rules, newMemMarks(), newMemApplied(), noLetters{}, nopAuditor{}, slog.New(slog.DiscardHandler), nil,
			consumer.Options{Owner: "me", MaxDeliver: 3, LeaseTTL: time.Hour, Now: time.Now})
		src := newList()
		add := func(s spec) *countingDelivery {
			d := &countingDelivery{}
			src.msgs = append(src.msgs, &consumer.Message{Event: s.event(uint64(len(src.msgs) + 1)), Deliveries: 1, Delivery: d})
			return d
		}
		add(spec{key: "slow", provider: provWatermark, subject: "G-slow", at: at(1)})
		var behind []*countingDelivery
		const others = 40
		for i := range others {
			add(spec{key: fmt.Sprint("k", i), provider: provWatermark, subject: fmt.Sprint("G-", i), at: at(1)})
			if i%10 == 0 {
				behind = append(behind, add(spec{key: fmt.Sprint("slow-", len(behind)), provider: provWatermark, subject: "G-slow", at: at(2 + len(behind))}))
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- proc.Run(ctx, src, 4) }()
		var releaseOnce sync.Once
		finish := func() error {
			releaseOnce.Do(func() { close(release) })
			cancel()
			return <-done
		}
		fatalf := func(format string, args ...any) {
			t.Helper()
			_ = finish() // every goroutine of the bubble must end
			t.Fatalf(format, args...)
		}

		synctest.Wait() // every worker is idle or held by the slow effect
		if got := grants.calls(); len(got) != others {
			fatalf("while one event is slow, %d events of other subjects applied, want all %d: %v", len(got), others, got)
		}
		time.Sleep(12 * time.Second) // virtual: past two keep-alive ticks
		for i, d := range behind {
			if acks, naks := d.acked(); acks+naks != 0 {
				fatalf("slow-%d settled (acked %d, naked %d) before the slow event of its subject finished", i, acks, naks)
			}
			if d.count() < 2 {
				fatalf("slow-%d waited 12 s behind the slow event and was kept alive %d times, want at least 2", i, d.count())
			}
		}
		releaseOnce.Do(func() { close(release) })
		synctest.Wait()
		got := grants.calls()
		want := []string{"slow", "slow-0", "slow-1", "slow-2", "slow-3"}
		var slowOrder []string
		for _, k := range got {
			if strings.HasPrefix(k, "slow") {
				slowOrder = append(slowOrder, k)
			}
		}
		if !slices.Equal(slowOrder, want) || len(got) != others+len(want) {
			fatalf("after the release GRANTS holds %d events, the slow subject's in the order %v; want %d, in the order %v", len(got), slowOrder, others+len(want), want)
		}
		if err := finish(); err != nil {
			t.Fatal(err)
		}
	})
}

// failingSource delivers its messages, then fails as jetstream.Source does
// when its iterator is closed under it (the durable consumer deleted: the
// iterator stops and Next returns ErrMsgIteratorClosed), ctx still live.
type failingSource struct {
	mu   sync.Mutex
	msgs []*consumer.Message
}

func (s *failingSource) Next(ctx context.Context) (*consumer.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.msgs) > 0 {
		m := s.msgs[0]
		s.msgs = s.msgs[1:]
		return m, nil
	}
	return nil, errors.New("nats: messages iterator closed")
}

// Run returns the source's error, ctx still live, so serve's errgroup
// stops the process instead of running on without applying anything.
func TestRunReturnsWhenSourceFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rules := map[string]consumer.Rule{provWatermark: {Watermark: true, Effects: []consumer.Effect{
			consumer.GrantsEffect{Template: "grants.{provider}.{subject}", Grants: &grantLog{}}}}}
		proc := consumer.NewProcessor(rules, newMemMarks(), newMemApplied(), noLetters{}, nopAuditor{}, slog.New(slog.DiscardHandler), nil,
			consumer.Options{Owner: "me", MaxDeliver: 3, LeaseTTL: time.Hour, Now: time.Now})
		d := &countingDelivery{}
		ev := spec{key: "k", provider: provWatermark, subject: "G-1", at: at(10)}.event(1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			done <- proc.Run(ctx, &failingSource{msgs: []*consumer.Message{{Event: ev, Deliveries: 1, Delivery: d}}}, 2)
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("Run returned nil, want the source's error")
			}
		case <-time.After(time.Hour): // virtual
			cancel()
			<-done
			t.Fatalf("Run did not return in an hour after its source failed (ctx still live); it returned only once ctx was cancelled")
		}
	})
}

// dueDelivery logs, per nak, when the message is due for redelivery.
type dueDelivery struct {
	countingDelivery
	key string
	log *dueLog
}

type dueLog struct {
	mu    sync.Mutex
	due   map[string]time.Time
	order []string // keys in the order they were naked
}

func (d *dueDelivery) NakWithDelay(delay time.Duration) error {
	d.log.mu.Lock()
	d.log.due[d.key] = time.Now().Add(delay)
	d.log.order = append(d.log.order, d.key)
	d.log.mu.Unlock()
	return d.countingDelivery.NakWithDelay(delay)
}

// slowDownMarks is a WATERMARKS that, like a store in a leader election,
// answers every call with a timeout after 2 s.
type slowDownMarks struct{ *memMarks }

func (d slowDownMarks) Get(ctx context.Context, key string) (consumer.Mark, uint64, error) {
	time.Sleep(2 * time.Second)
	return consumer.Mark{}, 0, errors.New("nats: timeout")
}

func (d slowDownMarks) Put(ctx context.Context, key string, m consumer.Mark, rev uint64) (uint64, error) {
	time.Sleep(2 * time.Second)
	return 0, errors.New("nats: timeout")
}

// At a stop, the events queued behind their subject's running event are
// handed back for redelivery after it, which Process hands back too when
// the stop finds it retrying a store in place (or waiting for another
// holder's lease): a newer event redelivered first would apply on another
// instance and turn the older one stale.
func TestStopHandsBackSubjectInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ev1 := spec{key: "k1", provider: provWatermark, subject: "G-1", at: at(10)}.event(1)
		ev2 := spec{key: "k2", provider: provWatermark, subject: "G-1", at: at(11)}.event(2)
		rules := map[string]consumer.Rule{provWatermark: {Watermark: true, Effects: []consumer.Effect{
			consumer.GrantsEffect{Template: "grants.{provider}.{subject}", Grants: &grantLog{}}}}}
		proc := consumer.NewProcessor(rules, slowDownMarks{newMemMarks()}, newMemApplied(), noLetters{}, nopAuditor{}, slog.New(slog.DiscardHandler), nil,
			consumer.Options{Owner: "me", MaxDeliver: 3, LeaseTTL: time.Hour, Now: time.Now})
		stopWhileFirstRuns(t, proc, ev1, ev2, time.Second, "running") // k1 in its first store call, k2 queued behind it
	})
}

// subjectRecorder is an effect that records, per subject, the order events
// ran in and any two that ran at once.
type subjectRecorder struct {
	mu      sync.Mutex
	running map[string]bool
	order   map[string][]string
	bad     []string
}

// effect runs for a random time up to upTo (virtual, under synctest).
func (r *subjectRecorder) effect(upTo time.Duration) consumer.Effect {
	return consumer.EffectFunc(func(_ context.Context, ev consumer.Event) error {
		r.mu.Lock()
		if r.running[ev.Subject] {
			r.bad = append(r.bad, "concurrent "+ev.Subject)
		}
		r.running[ev.Subject] = true
		r.order[ev.Subject] = append(r.order[ev.Subject], ev.Key)
		r.mu.Unlock()
		time.Sleep(rand.N(upTo))
		r.mu.Lock()
		r.running[ev.Subject] = false
		r.mu.Unlock()
		return nil
	})
}

// Random schedules (effects of random length, a stop at a random moment):
// one subject's effects never run at once and run in delivery order, and
// every message taken from the source is settled exactly once (acked, or
// naked: handed back), the stop included.
func TestRunKeepsSubjectsSerialAndSettlesEveryMessage(t *testing.T) {
	for round := range 30 {
		synctest.Test(t, func(t *testing.T) {
			rec := &subjectRecorder{running: map[string]bool{}, order: map[string][]string{}}
			rules := map[string]consumer.Rule{provWatermark: {Watermark: true, Effects: []consumer.Effect{rec.effect(300 * time.Microsecond)}}}
			proc := consumer.NewProcessor(rules, newMemMarks(), newMemApplied(), noLetters{}, nopAuditor{}, slog.New(slog.DiscardHandler), nil,
				consumer.Options{Owner: "me", MaxDeliver: 3, LeaseTTL: time.Hour, Now: time.Now})
			src := newList()
			var ds []*countingDelivery
			want := map[string][]string{}
			for i := range 400 {
				subj, key := fmt.Sprint("G-", rand.IntN(5)), fmt.Sprint("k", i)
				d := &countingDelivery{}
				ds = append(ds, d)
				src.msgs = append(src.msgs, &consumer.Message{Event: spec{key: key, provider: provWatermark, subject: subj, at: at(1).Add(time.Duration(i) * time.Second)}.event(uint64(i + 1)), Deliveries: 1, Delivery: d})
				want[subj] = append(want[subj], key)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- proc.Run(ctx, src, 4) }()
			time.Sleep(time.Duration(rand.IntN(20_000)) * time.Microsecond) // virtual
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			synctest.Wait() // nothing runs after Run returned
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.bad) > 0 {
				t.Fatalf("round %d: %v", round, rec.bad)
			}
			for s, got := range rec.order {
				if !slices.Equal(got, want[s][:len(got)]) {
					t.Fatalf("round %d: %s applied out of order: %v", round, s, got)
				}
			}
			src.mu.Lock()
			taken := len(ds) - len(src.msgs)
			src.mu.Unlock()
			for i, d := range ds[:taken] {
				if a, n := d.acked(); a+n != 1 {
					t.Fatalf("round %d: message %d acked %d, naked %d; want settled once", round, i, a, n)
				}
			}
		})
	}
}

// slowMarks answers Get after 1 s (a busy store), correctly.
type slowMarks struct{ *memMarks }

func (s slowMarks) Get(ctx context.Context, key string) (consumer.Mark, uint64, error) {
	time.Sleep(time.Second)
	return s.memMarks.Get(ctx, key)
}

// Like TestStopHandsBackSubjectInOrder, but the running event finds its
// subject in doubt (a dead holder's lease on another key) at the stop: it
// is handed back with the stop's delay too, not its usual second, which put
// the newer event queued behind it first.
func TestStopHandsBackInDoubtSubjectInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ev1 := spec{key: "k1", provider: provWatermark, subject: "G-1", at: at(10)}.event(1)
		ev2 := spec{key: "k2", provider: provWatermark, subject: "G-1", at: at(11)}.event(2)
		marks := newMemMarks()
		if _, err := marks.Put(context.Background(), consumer.MarkKey(ev1), consumer.Mark{At: at(5),
			Lease: &consumer.Lease{Owner: "dead", Key: "kx", Until: time.Now().Add(-time.Second)}}, 0); err != nil {
			t.Fatal(err)
		}
		rules := map[string]consumer.Rule{provWatermark: {Watermark: true, Effects: []consumer.Effect{
			consumer.GrantsEffect{Template: "grants.{provider}.{subject}", Grants: &grantLog{}}}}}
		proc := consumer.NewProcessor(rules, slowMarks{marks}, newMemApplied(), noLetters{}, nopAuditor{}, slog.New(slog.DiscardHandler), nil,
			consumer.Options{Owner: "me", MaxDeliver: 3, LeaseTTL: time.Hour, Now: time.Now})
		stopWhileFirstRuns(t, proc, ev1, ev2, 500*time.Millisecond, "in doubt") // k1 reading its mark, k2 queued behind it
	})
}

// silentDelivery is a Delivery whose server never confirms a hand-back.
type silentDelivery struct{ countingDelivery }

func (d *silentDelivery) NakWithDelayConfirmed(ctx context.Context, t time.Duration) error {
	<-ctx.Done()
	return ctx.Err()
}

// A stop whose server does not confirm hand-backs is not held for the
// confirmation wait per event: one budget covers them all.
func TestStopHandBacksShareOneWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		slow := blockOn(release, "k0")
		rules := map[string]consumer.Rule{provWatermark: {Watermark: true, Effects: []consumer.Effect{slow}}}
		proc := consumer.NewProcessor(rules, newMemMarks(), newMemApplied(), noLetters{}, nopAuditor{}, slog.New(slog.DiscardHandler), nil,
			consumer.Options{Owner: "me", MaxDeliver: 3, LeaseTTL: time.Hour, Now: time.Now})
		src := newList()
		for i := range 50 { // all on one subject: 49 wait behind k0
			ev := spec{key: fmt.Sprint("k", i), provider: provWatermark, subject: "G-1", at: at(1).Add(time.Duration(i) * time.Second)}.event(uint64(i + 1))
			src.msgs = append(src.msgs, &consumer.Message{Event: ev, Deliveries: 1, Delivery: &silentDelivery{}})
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- proc.Run(ctx, src, 2) }()
		synctest.Wait()
		stopAt := time.Now()
		cancel()
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if took := time.Since(stopAt); took > 10*time.Second {
			t.Fatalf("the stop took %s (virtual) waiting for 49 confirmations that never came", took)
		}
	})
}

// stopWhileFirstRuns runs proc over ev1 (k1) and ev2 (k2, same subject),
// stops it after `after` (virtual) while k1 is `state` and k2 waits behind
// it, and checks that k1 is handed back no later than k2 and before it.
func stopWhileFirstRuns(t *testing.T, proc *consumer.Processor, ev1, ev2 consumer.Event, after time.Duration, state string) {
	t.Helper()
	log := &dueLog{due: map[string]time.Time{}}
	d1, d2 := &dueDelivery{key: "k1", log: log}, &dueDelivery{key: "k2", log: log}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- proc.Run(ctx, newList(
			&consumer.Message{Event: ev1, Deliveries: 1, Delivery: d1},
			&consumer.Message{Event: ev2, Deliveries: 1, Delivery: d2}), 4)
	}()
	time.Sleep(after)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	due1, due2 := log.due["k1"], log.due["k2"]
	// Due at the same moment, the server redelivers in stream order (and
	// within one run in the order of the negative acknowledgements).
	if due1.IsZero() || due2.IsZero() || due2.Before(due1) || !slices.Equal(log.order, []string{"k1", "k2"}) {
		t.Fatalf("k1 (older, %s at the stop) naked at delays %v, due %s; k2 (newer, queued) naked at delays %v, due %s; naked in the order %v: k2 is redelivered first",
			state, d1.delays, due1.Format("15:04:05.000"), d2.delays, due2.Format("15:04:05.000"), log.order)
	}
}

// answeringDelivery is a Delivery whose server confirms every hand-back at
// once; it records how each was sent.
type answeringDelivery struct {
	countingDelivery
	mu        sync.Mutex
	confirmed int
}

func (d *answeringDelivery) NakWithDelayConfirmed(ctx context.Context, t time.Duration) error {
	d.mu.Lock()
	d.confirmed++
	d.mu.Unlock()
	return d.countingDelivery.NakWithDelay(t)
}

// The confirmation budget is spent only waiting for confirmations: events
// handed back behind a running event that takes longer than the budget
// after the stop (a slow forward) are still confirmed. (The budget used to
// start at the stop's first hand-back; these went out unconfirmed, and the
// server may drop those at its shutdown.)
func TestStopConfirmsHandBacksBehindASlowEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		slow := blockOn(release, "k0")
		// x waits for another instance's lease on G-2: the stop hands it
		// back at once, the first hand-back of the stop.
		marks := newMemMarks()
		x := spec{key: "x", provider: provWatermark, subject: "G-2", at: at(1)}.event(100)
		held := consumer.Mark{Lease: &consumer.Lease{Owner: "other", Key: "x-other", Until: time.Now().Add(time.Hour)}}
		if _, err := marks.Put(t.Context(), consumer.MarkKey(x), held, 0); err != nil {
			t.Fatal(err)
		}
		rules := map[string]consumer.Rule{provWatermark: {Watermark: true, Effects: []consumer.Effect{slow}}}
		proc := consumer.NewProcessor(rules, marks, newMemApplied(), noLetters{}, nopAuditor{}, slog.New(slog.DiscardHandler), nil,
			consumer.Options{Owner: "me", MaxDeliver: 3, LeaseTTL: time.Hour, Now: time.Now})
		src := newList()
		var ds []*answeringDelivery
		for i := range 11 { // k0 runs, k1-k10 wait behind it
			ev := spec{key: fmt.Sprint("k", i), provider: provWatermark, subject: "G-1", at: at(1).Add(time.Duration(i) * time.Second)}.event(uint64(i + 1))
			d := &answeringDelivery{}
			ds = append(ds, d)
			src.msgs = append(src.msgs, &consumer.Message{Event: ev, Deliveries: 1, Delivery: d})
			if i == 0 {
				src.msgs = append(src.msgs, &consumer.Message{Event: x, Deliveries: 1, Delivery: &answeringDelivery{}})
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- proc.Run(ctx, src, 2) }()
		synctest.Wait()
		cancel()
		time.Sleep(8 * time.Second) // virtual: k0 runs on past the budget
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		for i, d := range ds[1:] {
			if _, naks := d.acked(); naks != 1 || d.confirmed != 1 {
				t.Errorf("k%d: %d naks, %d of them confirmed; want one, confirmed", i+1, naks, d.confirmed)
			}
		}
	})
}

// blockOn is an effect that, for the event with key, waits until release
// is closed; every other event passes at once.
func blockOn(release <-chan struct{}, key string) consumer.Effect {
	return consumer.EffectFunc(func(_ context.Context, ev consumer.Event) error {
		if ev.Key == key {
			<-release
		}
		return nil
	})
}

// unreadSource delivers msgs, then holds unread (a prefetch buffer) for
// Unread.
type unreadSource struct {
	*listSource
	unread []*consumer.Message
}

func (s *unreadSource) Unread() []*consumer.Message { return s.unread }

// At a stop, the source's unread deliveries of subjects no worker holds go
// back at once (another instance need not wait for this one's slowest
// event); those of a held subject go back after the events queued behind
// its running one.
func TestStopHandsBackUnreadDeliveries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		rules := map[string]consumer.Rule{provWatermark: {Watermark: true, Effects: []consumer.Effect{blockOn(release, "k0")}}}
		proc := consumer.NewProcessor(rules, newMemMarks(), newMemApplied(), noLetters{}, nopAuditor{}, slog.New(slog.DiscardHandler), nil,
			consumer.Options{Owner: "me", MaxDeliver: 3, LeaseTTL: time.Hour, Now: time.Now})
		log := &dueLog{due: map[string]time.Time{}}
		msg := func(key, subject string, seq uint64) *consumer.Message {
			ev := spec{key: key, provider: provWatermark, subject: subject, at: at(1).Add(time.Duration(seq) * time.Second)}.event(seq)
			return &consumer.Message{Event: ev, Deliveries: 1, Delivery: &dueDelivery{key: key, log: log}}
		}
		src := &unreadSource{listSource: newList(msg("k0", "G-1", 1), msg("k1", "G-1", 2)),
			unread: []*consumer.Message{msg("u1", "G-1", 3), msg("u2", "G-2", 4)}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- proc.Run(ctx, src, 2) }()
		synctest.Wait() // k0 runs, k1 waits behind it
		cancel()
		synctest.Wait() // the stop waits for k0
		log.mu.Lock()
		early := slices.Clone(log.order)
		log.mu.Unlock()
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(early, []string{"u2"}) {
			t.Errorf("handed back while k0 still ran: %v; want only u2 (its subject not held)", early)
		}
		if !slices.Equal(log.order, []string{"u2", "k1", "u1"}) {
			t.Errorf("hand-back order %v; want u2, then k1 (queued) before u1 (unread, same subject)", log.order)
		}
	})
}
