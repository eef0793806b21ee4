package consumer_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
	"pgregory.net/rapid"
)

// TestProcessorProperty is a state-machine test of the processor's
// sequencing and effect rules. Two Processors ("instances") share
// in-memory WATERMARKS and APPLIED stores; rapid draws the events (a small
// key pool over few subjects and instants, so equal instants and duplicate
// keys happen), the delivery order, redeliveries, effect failures, crashes
// at every step, and steps where both instances race. After every step,
// and after a final crash-free drain, it holds what happened to a
// reference model of the rules (see checkDecision, checkStep, checkEnd).
//
// It runs in a testing/synctest bubble: the processors' clock (Options.Now
// is time.Now inside the bubble) and the ticker they poll a foreign lease
// with are both virtual, so a crashed instance's lease expires as soon as
// everyone else is waiting for it, without sleeping.
//
// It runs twice: with the watermark rule remembering applied keys in
// APPLIED, and (GrantsMemory) by its GRANTS messages, as a rule that
// publishes per subject does (see consumer/memory.go); the ordering-none
// rule uses APPLIED in both.
func TestProcessorProperty(t *testing.T) {
	for _, grantsMemory := range []bool{false, true} {
		t.Run(fmt.Sprintf("GrantsMemory=%v", grantsMemory), func(t *testing.T) { runProperty(t, grantsMemory, false) })
	}
	// And with the watermark rule publishing the sequenced way (its
	// GRANTS subjects its own, a publish conditional on the last message).
	t.Run("Sequenced", func(t *testing.T) { runProperty(t, true, true) })
}

func runProperty(t *testing.T, grantsMemory, sequenced bool) {
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, func(rt *rapid.T) {
			w := newWorld(rt, grantsMemory, sequenced)
			rt.Repeat(map[string]func(*rapid.T){
				"deliver":   w.actDeliver,
				"race":      w.actRace,
				"duplicate": w.actDuplicate,
				"pause":     w.actPause,
				"late":      w.actLate,
				"":          w.checkStep,
			})
			w.drain(rt)
			w.checkEnd(rt)
		})
	})
}

// propStrict turns off the tolerances for known processor bugs (see
// tolerated), so `go test ./consumer -run TestProcessorProperty -args
// -prop.strict` shows them.
var propStrict = flag.Bool("prop.strict", true, "TestProcessorProperty: fail on the formerly known processor bugs too (false tolerates them)")

const (
	propMaxDeliver = 3
	propLeaseTTL   = 2 * time.Second
	// propInDoubtWait: JetStream redelivers a crashed delivery within
	// AckWait, which the model does not bound: wait for it as long as the
	// model pauses between ordinary steps. A late redelivery (actLate)
	// comes after it.
	propInDoubtWait = time.Hour
	provWatermark   = "wm"   // ordering: watermark
	provNone        = "none" // ordering: none
	crashedOutcome  = "crashed"
)

// Crash steps, in the order the processor passes them.
var (
	stepBeforeEffects  = consumer.CrashSteps[0]
	stepAfterEffects   = consumer.CrashSteps[1]
	stepAfterWatermark = consumer.CrashSteps[2]
	stepBeforeAck      = consumer.CrashSteps[3]
	stepAfterRemember  = consumer.CrashSteps[4]
)

// spec is what one idempotency key stands for: the same key always maps to
// the same event content.
type spec struct {
	key      string
	provider string
	subject  string
	at       time.Time // zero with badTime
	badTime  bool      // occurred_at unparseable: dead-lettered at once
	failures uint8     // effect attempt n (0-based, < 8) fails, retryably, if bit n is set
	poison   bool      // every attempt fails permanently
}

func (s spec) event(seq uint64) consumer.Event {
	raw := s.at.Format(time.RFC3339Nano)
	if s.badTime {
		raw = "yesterday"
	}
	h := http.Header{}
	h.Set(event.HeaderKey, s.key)
	h.Set(event.HeaderProvider, s.provider)
	h.Set(event.HeaderAccount, "default")
	h.Set(event.HeaderSubject, s.subject)
	h.Set(event.HeaderOccurredAt, raw)
	return consumer.Event{
		Key: s.key, Provider: s.provider, Account: "default", Subject: s.subject, Type: "t",
		OccurredRaw: raw, OccurredAt: s.at, Seq: seq, Header: h,
		Body: fmt.Appendf(nil, `{"id":%q,"grant_id":%q,"occurred_at":%q}`, s.key, s.subject, raw),
	}
}

func (s spec) markKey() string { return consumer.MarkKey(s.event(0)) }

// exclusive names what effects must never run concurrently for: the
// subject, or without one (nothing to order) the key.
func (s spec) exclusive() string {
	if s.subject == "" {
		return "key " + s.key
	}
	return s.markKey()
}

// queued is a message the stream will (re)deliver.
type queued struct {
	key        string
	seq        uint64
	deliveries int
}

// delivery is one Process call as the world saw it. The processor's calls
// into the stores and effects carry its id in their context.
type delivery struct {
	id         int
	spec       spec
	msg        queued
	owner      string
	crashStep  string // planned
	crashedAt  string
	acks, naks int
	read       *consumer.Mark // the last mark this delivery read
	wrote      *consumer.Mark // the last mark this delivery wrote
	effectErr  error          // the last effect error in this delivery
	outcome    consumer.Outcome
	clock      int // when the outcome was decided
	// overlapped: another delivery of the same key ran at the same time.
	overlapped bool
	// pauses, in racing deliveries, delay the delivery's store calls, one
	// each, in virtual time: rapid draws the interleaving.
	pauses []time.Duration
	// lose plans the loss of this delivery's GRANTS publish answer
	// (loseRefused, loseTimeout; "": none); lost says it happened.
	lose string
	lost bool
}

type deliveryID struct{}

func deliveryOf(ctx context.Context) int {
	id, _ := ctx.Value(deliveryID{}).(int)
	return id
}

// instance is one hookgate process; a crash replaces it.
type instance struct {
	slot  int
	gen   int
	owner string
	proc  *consumer.Processor
	cur   *delivery // set by the driver around Process
}

// world is the system under test plus everything observed about it. The
// driver (rapid's goroutine) owns queue, inst and trace; the rest is
// shared with the processors' goroutines under mu.
type world struct {
	specs   map[string]spec
	order   []string // keys in spec order
	marks   *memMarks
	applied *memApplied
	inst    [2]*instance
	queue   []queued
	// held are redeliveries that come late (actLate): after the in-doubt
	// wait, so the subject moved on without them.
	held    []queued
	nextSeq uint64
	trace   []string

	// grantsMemory: the watermark rule's GRANTS answers HasGrant, so the
	// processor remembers its applied keys there instead of in APPLIED.
	grantsMemory bool
	// sequenced: the watermark rule publishes the sequenced way
	// (grantsSequenced; needs grantsMemory).
	sequenced bool
	grantMsgs map[string][]consumer.GrantMsg // sequenced GRANTS, by subject

	mu       sync.Mutex
	clock    int // orders observations
	nextID   int
	dels     map[int]*delivery
	running  map[string][]*delivery // in Process, by key
	inflight map[string]int         // effects running, by mark key
	attempts map[string]int         // effect attempts, by key
	failed   map[uint64]int         // failed effect attempts, by stored message
	calls    map[string]int         // successful PublishGrant calls, by key
	// lostAnswers: publishes of the key stored in GRANTS and reported
	// failed (loseTimeout), by key.
	lostAnswers map[string]int
	// lateCrashes: crashed deliveries whose redelivery came late, by key.
	lateCrashes map[string]int
	published   map[string]int // deduplicated GRANTS: key -> clock of its first publication
	committed   map[string]consumer.Mark
	crashes     map[string]map[string]int // by key, by step
	decisions   map[string][]*delivery    // settled (not crashed), by key
	letters     map[string]int            // DLQ, by key
	delivered   map[string]bool
	violations  []string
}

func newWorld(rt *rapid.T, grantsMemory, sequenced bool) *world {
	w := &world{
		// Both before the instances are made: they read them.
		grantsMemory: grantsMemory, sequenced: sequenced,
		specs: map[string]spec{}, marks: newMemMarks(), applied: newMemApplied(),
		dels: map[int]*delivery{}, running: map[string][]*delivery{}, inflight: map[string]int{},
		attempts: map[string]int{}, failed: map[uint64]int{}, calls: map[string]int{}, published: map[string]int{},
		grantMsgs: map[string][]consumer.GrantMsg{}, lostAnswers: map[string]int{}, lateCrashes: map[string]int{},
		committed: map[string]consumer.Mark{}, crashes: map[string]map[string]int{},
		decisions: map[string][]*delivery{}, letters: map[string]int{}, delivered: map[string]bool{},
	}
	w.marks.onPut = w.observePut

	base := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	nInstants := rapid.IntRange(1, 3).Draw(rt, "instants")
	nSubjects := rapid.IntRange(1, 3).Draw(rt, "subjects")
	nKeys := rapid.IntRange(1, 8).Draw(rt, "keys")
	for i := range nKeys {
		s := spec{key: fmt.Sprintf("k%d", i), provider: provWatermark}
		s.subject = fmt.Sprintf("G-%d", rapid.IntRange(0, nSubjects-1).Draw(rt, s.key+".subject"))
		// Nanoseconds, so equality is decided at full precision.
		s.at = base.Add(time.Duration(rapid.IntRange(0, nInstants-1).Draw(rt, s.key+".at"))*time.Hour + 7)
		switch rapid.IntRange(0, 9).Draw(rt, s.key+".kind") {
		case 8:
			s.provider = provNone
			if rapid.Bool().Draw(rt, s.key+".no subject") {
				s.subject = "" // leased on a shard of keys
			}
		case 9:
			s.badTime, s.at = true, time.Time{}
		}
		// Most keys succeed at once; some fail their first attempts (up
		// to and past max_deliver), some fail now and then; a few fail
		// permanently.
		switch f := rapid.IntRange(0, 9).Draw(rt, s.key+".failures"); {
		case f >= 8:
			s.failures = uint8(rapid.IntRange(0, 255).Draw(rt, s.key+".failure mask"))
		case f >= 5:
			s.failures = 1<<(f-4) - 1 // the first 1 to 3 attempts
		}
		s.poison = rapid.IntRange(0, 19).Draw(rt, s.key+".poison") == 19
		w.specs[s.key] = s
		w.order = append(w.order, s.key)
	}
	// The stream as stored: keys drawn with repetition, so one event is
	// sometimes stored (or replayed) twice.
	for _, i := range rapid.SliceOfN(rapid.IntRange(0, nKeys-1), 1, 12).Draw(rt, "stream") {
		w.enqueue(queued{key: w.order[i], deliveries: 1})
	}
	for i := range w.inst {
		w.inst[i] = w.newInstance(i, 0, fmt.Sprintf("p%d", i))
	}
	return w
}

func (w *world) enqueue(q queued) {
	if q.seq == 0 {
		w.nextSeq++
		q.seq = w.nextSeq
	}
	w.queue = append(w.queue, q)
}

func (w *world) newInstance(slot, gen int, owner string) *instance {
	in := &instance{slot: slot, gen: gen, owner: owner}
	var grants consumer.Grants = grantsRecorder{w}
	if w.grantsMemory {
		grants = grantsIndexed{grantsRecorder{w}}
	}
	effects := []consumer.Effect{
		consumer.EffectFunc(w.forward),
		consumer.GrantsEffect{Template: "grants.{provider}.{subject}.{type}", Grants: grants},
	}
	wmEffects := effects
	if w.sequenced {
		wmEffects = []consumer.Effect{
			consumer.EffectFunc(w.forward),
			consumer.GrantsEffect{Template: "grants.{provider}.{subject}.{type}", Grants: grantsSequenced{grantsRecorder{w}}},
		}
	}
	rules := map[string]consumer.Rule{
		provWatermark: {Watermark: true, OneAccount: w.sequenced, Effects: wmEffects},
		provNone:      {Watermark: false, Effects: effects},
	}
	if got := rules[provWatermark].AppliedInGrants(); got != w.grantsMemory {
		panic(fmt.Sprintf("watermark rule AppliedInGrants = %v, want %v", got, w.grantsMemory))
	}
	if rules[provNone].AppliedInGrants() {
		panic("an ordering-none rule must remember in APPLIED")
	}
	in.proc = consumer.NewProcessor(rules, observedMarks{w}, observedApplied{w}, letterRecorder{w}, nopAuditor{},
		slog.New(slog.DiscardHandler), nil, consumer.Options{
			Owner: owner, MaxDeliver: propMaxDeliver, Backoff: []time.Duration{time.Second},
			LeaseTTL: propLeaseTTL, Now: time.Now, // the bubble's virtual clock
			InDoubtWait: propInDoubtWait,
		})
	consumer.SetCrash(in.proc, func(step, key string) bool {
		d := in.cur
		if d == nil || step != d.crashStep {
			return false
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		d.crashedAt = step
		if w.crashes[key] == nil {
			w.crashes[key] = map[string]int{}
		}
		w.crashes[key][step]++
		return true
	})
	return in
}

// ---- actions ----

func (w *world) actDeliver(rt *rapid.T) {
	if len(w.queue) == 0 {
		rt.Skip("nothing to deliver")
	}
	in := w.inst[rapid.IntRange(0, 1).Draw(rt, "instance")]
	q := w.take(rapid.IntRange(0, len(w.queue)-1).Draw(rt, "message"))
	d := w.begin(in, q, drawCrash(rt, "crash"))
	d.lose = w.drawLoss(rt, "lose answer")
	w.process(in, d)
	w.settle(in, d, rapid.Bool().Draw(rt, "restart as new owner"), drawLate(rt, d, "late"))
}

// actRace hands two messages, usually of one subject, to both instances
// at once.
func (w *world) actRace(rt *rapid.T) {
	if len(w.queue) < 2 {
		rt.Skip("need two messages")
	}
	q1 := w.take(rapid.IntRange(0, len(w.queue)-1).Draw(rt, "first"))
	var same []int
	for i, q := range w.queue {
		if w.specs[q.key].markKey() == w.specs[q1.key].markKey() {
			same = append(same, i)
		}
	}
	var q2 queued
	if len(same) > 0 && rapid.IntRange(0, 3).Draw(rt, "other subject") != 0 {
		q2 = w.take(same[rapid.IntRange(0, len(same)-1).Draw(rt, "second of the subject")])
	} else {
		q2 = w.take(rapid.IntRange(0, len(w.queue)-1).Draw(rt, "second"))
	}
	d1 := w.begin(w.inst[0], q1, drawCrash(rt, "crash 0"))
	d2 := w.begin(w.inst[1], q2, drawCrash(rt, "crash 1"))
	d1.lose, d2.lose = w.drawLoss(rt, "lose answer 0"), w.drawLoss(rt, "lose answer 1")
	// Lockstep (equal pauses) is the tightest race; rapid shrinks to it.
	pauses := rapid.SliceOfN(rapid.SampledFrom([]time.Duration{time.Microsecond, 0, 2 * time.Microsecond, 3 * time.Microsecond}), 8, 8)
	d1.pauses, d2.pauses = pauses.Draw(rt, "pauses 0"), pauses.Draw(rt, "pauses 1")
	done := make(chan struct{})
	go func() { defer close(done); w.process(w.inst[1], d2) }()
	w.process(w.inst[0], d1)
	<-done
	w.settle(w.inst[0], d1, rapid.Bool().Draw(rt, "restart 0 as new owner"), drawLate(rt, d1, "late 0"))
	w.settle(w.inst[1], d2, rapid.Bool().Draw(rt, "restart 1 as new owner"), drawLate(rt, d2, "late 1"))
}

// actDuplicate stores an already delivered event again (a replay, or a
// copy beyond the dedup window) or redelivers it as after a lost ack, now
// or late (actLate).
func (w *world) actDuplicate(rt *rapid.T) {
	var seen []string
	for _, k := range w.order {
		if w.delivered[k] {
			seen = append(seen, k)
		}
	}
	if len(seen) == 0 {
		rt.Skip("nothing delivered yet")
	}
	k := seen[rapid.IntRange(0, len(seen)-1).Draw(rt, "duplicate of")]
	q := queued{key: k, deliveries: rapid.IntRange(1, 2).Draw(rt, "deliveries")}
	if rapid.IntRange(0, 2).Draw(rt, "late duplicate") == 0 {
		w.nextSeq++
		q.seq = w.nextSeq
		w.held = append(w.held, q)
		w.tracef("duplicate %s, late", k)
		return
	}
	w.enqueue(q)
	w.tracef("duplicate %s", k)
}

// actLate lets the in-doubt wait pass (a crashed holder's lease and the
// wait for its redelivery both end, so its subject moves on without it),
// then a held redelivery comes: a crashed delivery's, or a duplicate's. It
// then finds its subject's newer events applied, or its own message
// published after the mark's last commit, which only the reads of GRANTS
// (seenBy's, and a refused sequenced publish's) can tell.
func (w *world) actLate(rt *rapid.T) {
	if len(w.held) == 0 {
		rt.Skip("nothing held")
	}
	w.passInDoubtWait()
	w.enqueue(w.takeHeld(rapid.IntRange(0, len(w.held)-1).Draw(rt, "held")))
}

func (w *world) passInDoubtWait() {
	d := propInDoubtWait + propLeaseTTL
	time.Sleep(d)
	w.tracef("pause %s (past the in-doubt wait)", d)
	// Every crashed holder's redelivery not run yet now comes late.
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, q := range slices.Concat(w.queue, w.held) {
		if w.crashedAfterEffects(q.key) > 0 {
			w.lateCrashes[q.key]++
		}
	}
}

func (w *world) takeHeld(i int) queued {
	q := w.held[i]
	w.held = slices.Delete(w.held, i, i+1)
	w.tracef("late redelivery of %s (delivery %d)", q.key, q.deliveries)
	return q
}

// drawLoss plans, now and then, the loss of a delivery's GRANTS publish
// answer (loseAnswer), under a rule that remembers applied keys by its
// GRANTS messages: the processor then reads GRANTS to tell.
func (w *world) drawLoss(rt *rapid.T, label string) string {
	if !w.grantsMemory {
		return ""
	}
	switch rapid.IntRange(0, 9).Draw(rt, label) {
	case 8:
		return loseRefused
	case 9:
		return loseTimeout
	}
	return ""
}

// drawLate decides whether a crashed delivery's redelivery comes late.
// Drawn whatever the outcome: racing deliveries' outcomes may differ from
// run to run (goroutines woken at one virtual instant run in either
// order), and a draw that depended on them would shift every later one.
func drawLate(rt *rapid.T, d *delivery, label string) bool {
	late := rapid.IntRange(0, 2).Draw(rt, label) == 0
	return late && d.outcome.Decision == crashedOutcome
}

// actPause lets virtual time pass, so leases left by crashes may expire
// before anyone waits for them.
func (w *world) actPause(rt *rapid.T) {
	d := time.Duration(rapid.IntRange(1, 5).Draw(rt, "pause")) * propLeaseTTL / 2
	time.Sleep(d)
	w.tracef("pause %s", d)
}

// drawCrash mostly picks no crash, else a step.
func drawCrash(rt *rapid.T, label string) string {
	n := len(consumer.CrashSteps)
	if c := rapid.IntRange(0, 3*n).Draw(rt, label); c > 2*n {
		return consumer.CrashSteps[c-2*n-1]
	}
	return ""
}

// drain delivers everything left, without crashes, until the stream is
// empty: every event is eventually delivered and settles.
func (w *world) drain(rt *rapid.T) {
	w.tracef("drain")
	if len(w.held) > 0 {
		w.passInDoubtWait()
		for len(w.held) > 0 {
			w.enqueue(w.takeHeld(0))
		}
	}
	for i := 0; len(w.queue) > 0; i++ {
		if i > 200 {
			rt.Fatalf("stream did not drain: %d messages left after %d deliveries\n%s", len(w.queue), i, w.traceTail())
		}
		in := w.inst[i%2]
		d := w.begin(in, w.take(0), "")
		w.process(in, d)
		w.settle(in, d, false, false)
		w.checkStep(rt)
	}
}

func (w *world) take(i int) queued {
	q := w.queue[i]
	w.queue = slices.Delete(w.queue, i, i+1)
	return q
}

func (w *world) begin(in *instance, q queued, crash string) *delivery {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.nextID++
	d := &delivery{id: w.nextID, spec: w.specs[q.key], msg: q, owner: in.owner, crashStep: crash}
	w.dels[d.id] = d
	w.delivered[q.key] = true
	return d
}

func (w *world) process(in *instance, d *delivery) {
	w.mu.Lock()
	in.cur = d
	for _, o := range w.running[d.spec.key] {
		o.overlapped, d.overlapped = true, true
	}
	w.running[d.spec.key] = append(w.running[d.spec.key], d)
	w.mu.Unlock()

	// Bounded in virtual time: a processor that waits for ever on a lease
	// comes back as a retry with the deadline as its reason.
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), deliveryID{}, d.id), 10*time.Minute)
	defer cancel()
	out := in.proc.Process(ctx, &consumer.Message{
		Event: d.spec.event(d.msg.seq), Deliveries: d.msg.deliveries, Delivery: fakeDelivery{w, d},
	})

	w.mu.Lock()
	defer w.mu.Unlock()
	in.cur = nil
	w.running[d.spec.key] = slices.DeleteFunc(w.running[d.spec.key], func(o *delivery) bool { return o == d })
	w.clock++
	d.outcome, d.clock = out, w.clock
	if out.Decision != crashedOutcome {
		w.decisions[d.spec.key] = append(w.decisions[d.spec.key], d)
	}
}

// settle checks one delivery's outcome and feeds the stream: a nak or a
// crash means a redelivery with Deliveries+1 (a crash's, when late, held
// for actLate); a crashed instance is replaced by a fresh process (with a
// new owner name, or its old one).
func (w *world) settle(in *instance, d *delivery, newOwner, late bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tracef("%s %s %s/%s@%s (delivery %d, crash at %q) -> %s %s", in.owner, d.spec.provider, d.spec.key,
		d.spec.subject, fmtAt(d.spec), d.msg.deliveries, d.crashStep, d.outcome.Decision, d.outcome.Reason)
	w.checkDecision(d)
	switch next := (queued{key: d.msg.key, seq: d.msg.seq, deliveries: d.msg.deliveries + 1}); {
	case d.outcome.Decision == crashedOutcome && late:
		w.held = append(w.held, next)
	case d.outcome.Decision == crashedOutcome, d.outcome.Decision == consumer.Retry:
		w.enqueue(next)
	}
	if d.outcome.Decision == crashedOutcome {
		owner := in.owner
		if newOwner {
			owner = fmt.Sprintf("p%d.%d", in.slot, in.gen+1)
		}
		w.inst[in.slot] = w.newInstance(in.slot, in.gen+1, owner)
	}
}

// ---- effects and ports ----

// forward stands for the HTTP forward effect: it fails as the key's spec
// says, and holds the subject's in-flight count while it runs.
func (w *world) forward(ctx context.Context, ev consumer.Event) error {
	mk := w.specs[ev.Key].exclusive()
	w.enter(mk, ev.Key)
	defer w.leave(mk)
	time.Sleep(time.Millisecond) // virtual: the window an overlap would need
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.specs[ev.Key]
	n := w.attempts[ev.Key]
	w.attempts[ev.Key]++
	d := w.dels[deliveryOf(ctx)]
	if _, in := w.published[ev.Key]; in && d != nil && w.grantsMemory && s.provider == provWatermark && d.read != nil && !s.at.After(d.read.At) {
		// Under a rule that remembers applied keys by its GRANTS messages,
		// an event not newer than its mark is applied exactly when GRANTS
		// has it (seenBy): the effects of one it has must not run again.
		w.violatef("delivery %d of %s (%s) ran its effects again, though in GRANTS and not newer than the mark it read, %s", d.id, ev.Key, fmtAt(s), fmtMark(*d.read))
	}
	var err error
	switch {
	case s.poison:
		err = consumer.Permanent(errors.New("downstream 400"))
	case n < 8 && s.failures&(1<<n) != 0:
		err = fmt.Errorf("downstream 503 (attempt %d)", n+1)
	}
	if err != nil {
		w.failed[ev.Seq]++
	}
	if d != nil {
		d.effectErr = err
	}
	return err
}

func (w *world) enter(mk, key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inflight[mk]++
	if w.inflight[mk] > 1 {
		w.violatef("effects of %s ran concurrently (entering for %s)", mk, key)
	}
}

func (w *world) leave(mk string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inflight[mk]--
}
