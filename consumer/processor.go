package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookgate/hookgate/event"
)

// Decisions a Processor reports for one delivery.
const (
	Applied        = "applied"
	Stale          = "stale"
	AlreadyApplied = "already-applied"
	DeadLettered   = "dead-lettered"
	Retry          = "retry"
	// AlreadyDeadLettered: a delivery of an event dead-lettered before
	// (Options.Lettered), acknowledged without running it again.
	AlreadyDeadLettered = "already-dead-lettered"
)

// Outcome is what became of one delivery.
type Outcome struct {
	Decision string
	Reason   string
	// transient: a Retry for infrastructure trouble (a store or stream
	// not answering), not the event's fault; not yet negatively
	// acknowledged, so Process may try again in place.
	transient bool
	// lasting: transient trouble that does not pass in seconds (a full
	// stream, ErrStoreFull): not tried again in place, where it would hold
	// a worker from every other event (review L).
	lasting bool
	// untried: a Retry that waits without trying the effects (a forward
	// receiver's Retry-After pause): not counted as a retry in the
	// metrics, as it is not an attempt (a metrics audit, stop 38: a
	// retry-rate panel counted each waiting event).
	untried bool
}

// Options tune a Processor.
type Options struct {
	// Owner names this process in leases; unique per process.
	Owner string
	// MaxDeliver counts attempts, the first included.
	MaxDeliver int
	// Backoff is the delay before each retry; the last repeats.
	Backoff []time.Duration
	// LeaseTTL bounds how long a crashed holder can block a subject. It
	// must exceed the longest effect run (forward timeout plus publish).
	LeaseTTL time.Duration
	// InDoubtWait is how long, after its lease expired, a subject waits
	// for the redelivery of an event whose holder stopped between claiming
	// the subject and committing (a crash, a failed commit): its effects
	// may have run, so only its own redelivery can settle it. Set it above
	// the consumer's AckWait; after it the subject moves on without it.
	// 0 = LeaseTTL.
	InDoubtWait time.Duration
	// Now is the clock; nil = time.Now.
	Now func() time.Time
	// PlainStopHandBack hands events back at a stop with a plain negative
	// acknowledgement instead of stopHandBackDelay's: for a server that
	// keeps running (an external cluster), where the instance taking over
	// must get them before anything newer, and a plain one is queued for
	// redelivery at once.
	PlainStopHandBack bool
	// GrantsIndex, when set, is searched by the operator's commands for
	// an event applied under an earlier rule of its provider whose
	// GRANTS subjects the current rule no longer renders (ordering
	// changed to none together with the publish template, or publishing
	// turned off): the subject's mark names them (see seenElsewhere).
	// nil: only the current rule's GRANTS memory is searched.
	GrantsIndex GrantsIndex
	// Horizon is the dedup horizon: how far back a sequenced GRANTS
	// publish reads a GRANTS subject the mark has no sequence for (see
	// sequenced.go). 0 = all of it.
	Horizon time.Duration
	// Gone reports whether the process that claimed a lease is known to be
	// gone, though its lease has not expired (nil: none is known). On the
	// embedded server only one serve runs at a time (data_dir's lock), so
	// another serve's lease is a dead one's; a CLI's (replay, dlq replay,
	// connected to the running serve) is not. Such a lease is not waited
	// for: its event is in doubt at once, and its redelivery, not the
	// lease's expiry, settles the subject. After a kill -9 every worker
	// waited out a dead process's leases (LeaseTTL), the subjects they held
	// up included.
	Gone func(owner string) bool
	// LeaseWait, when not nil, is told when an event starts waiting for
	// another process's live lease on its subject, once per attempt (an
	// operator command says so: a replay run again after a kill -9 of the
	// one before waited out the dead one's lease, up to LeaseTTL, saying
	// nothing). It must not block.
	LeaseWait func(ev Event, l Lease)
	// Lettered (optional) says why a stored event (its sequence in
	// WEBHOOKS and its key) was settled by a dead letter before this run,
	// "" when it was not: such a delivery is acknowledged as
	// AlreadyDeadLettered, not run again. serve fills it after resetting the consumer to its
	// ack floor, which brings back events settled above the floor: one
	// dead-lettered there was POSTed to the receiver that refused it and
	// dead-lettered again at every restart, and a letter an operator had
	// removed came back (an operations audit, stop 41). Only an operator
	// re-feeds a dead-lettered event (dlq replay). Safe for concurrent
	// use.
	Lettered func(seq uint64, key string) string
	// Actor names who decides in the AUDIT records of this processor's
	// decisions: "" is event.ActorConsumer (serve's consumer); an operator
	// command (replay, dlq replay) says event.ActorOperator.
	Actor string
}

// Processor applies events once, in watermark order per subject. Process
// is safe for concurrent use on different subjects; the caller (Runner)
// never hands it two events of one subject at once, and the lease in the
// watermark entry keeps other processes off the subject.
type Processor struct {
	rules   map[string]Rule
	marks   Watermarks
	applied AppliedKeys
	// memory holds the rules that remember applied keys in GRANTS
	// rather than APPLIED, by provider (see memory.go).
	memory map[string]*grantsMemory
	// sequenced holds the rules that publish to GRANTS conditionally on
	// the mark's sequence, by provider (see sequenced.go).
	sequenced map[string]*sequencedGrants
	dlq       DeadLetters
	audit     Auditor
	log       *slog.Logger
	opts      Options
	metrics   *Metrics
	// cache spares the read of a subject's mark when this process wrote
	// it last (see markCache).
	cache *markCache
	// guessNew: claim an uncached subject without reading its mark first
	// (see newGuess).
	guessNew newGuess
	// handBacks keeps the deliveries handed back untried out of the
	// attempt count (see attempt).
	handBacks *handBacks
	// parks counts the events this processor asked Run to park (tests).
	parks atomic.Int64
	// stopNakSpent is how long (nanoseconds) Run's stop has waited for the
	// server to confirm its hand-backs (see handBack).
	stopNakSpent atomic.Int64
	// crash, set only by tests, stops processing at a named step as a
	// process death would: no ack, no nak, no cleanup.
	crash func(step, key string) bool
	// retryLines bounds the "event will be retried" lines per provider,
	// letterLines the "event dead-lettered" ones (the rest at debug).
	retryLines, letterLines *LineLimit
}

// Steps where a crash can be injected (tests).
const (
	stepBeforeEffects  = "before-effects"
	stepAfterEffects   = "after-effects"
	stepAfterWatermark = "after-watermark"
	stepBeforeAck      = "before-ack"
	stepAfterRemember  = "after-remember" // key in APPLIED, watermark not committed
)

var crashed = Outcome{Decision: "crashed"}

func (p *Processor) crashAt(step, key string) bool { return p.crash != nil && p.crash(step, key) }

// NewProcessor wires a processor. rules is keyed by provider name.
func NewProcessor(rules map[string]Rule, marks Watermarks, applied AppliedKeys, dlq DeadLetters, audit Auditor, log *slog.Logger, m *Metrics, o Options) *Processor {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Actor == "" {
		o.Actor = event.ActorConsumer
	}
	if o.MaxDeliver < 1 {
		o.MaxDeliver = 1
	}
	if len(o.Backoff) == 0 {
		o.Backoff = []time.Duration{time.Second}
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = time.Minute
	}
	if o.InDoubtWait <= 0 {
		o.InDoubtWait = o.LeaseTTL
	}
	memory := map[string]*grantsMemory{}
	sequenced := map[string]*sequencedGrants{}
	for name, r := range rules {
		if gm := grantsMemoryOf(r); gm != nil {
			memory[name] = gm
		}
		if sg := sequencedOf(r); sg != nil {
			sequenced[name] = sg
		}
	}
	for name := range rules {
		// The series an alert watches ("dead-lettered rising") exist from
		// the start, at 0: first exported at 1, the first dead letter (often
		// the only one) was no rise to rate() (review Z).
		m.zero(name, DeadLettered)
		m.zero(name, Retry) // a receiver failing: retries rise first (review AO)
	}
	return &Processor{rules: rules, marks: marks, applied: applied, memory: memory, sequenced: sequenced, dlq: dlq, audit: audit, log: log, opts: o, metrics: m, cache: newMarkCache(1 << 16), handBacks: newHandBacks(1 << 16), retryLines: NewLineLimit(retryLinesPerSecond), letterLines: NewLineLimit(retryLinesPerSecond)}
}

// Process decides and carries out one delivery, then acks or naks it. The
// order, chosen so a crash anywhere converges on redelivery:
//
//  1. read the subject's mark (or, for an event newer than the mark this
//     process last saw, take that one from the cache and let step 3's
//     compare-and-set check it; for a subject without a cached mark, guess
//     it has none while most such subjects had none lately, see newGuess).
//     Not newer than the mark: APPLIED says
//     already-applied (after settling a commit its holder did not finish,
//     see settleOwn); else older -> stale, ack. Without ordering, APPLIED
//     is read first. ("APPLIED": the rule's applied-key memory, see
//     memory.go.)
//  2. wait for another holder's live lease; hand back an event whose
//     subject is in doubt.
//  3. claim the mark's lease by compare-and-set.
//  4. effects: forward (Idempotency-Key = key), then publish to GRANTS
//     (Nats-Msg-Id = key, deduplicated over the horizon).
//  5. remember the key in APPLIED; a watermark rule that publishes per
//     subject skips this, its GRANTS message of step 4 is the record
//     (memory.go).
//  6. commit the mark (new time, keys at that time, lease cleared) by
//     CAS, then ack.
//
// A crash before 5 leaves the lease to expire and the message to be
// redelivered: effects run again with the same key and are deduplicated
// downstream; meanwhile the subject is in doubt (InDoubtWait). A crash
// between 5 and 6 is settled by the redelivery, or by a takeover of the
// lease for the same key, without running the effects again. A crash
// after 6 is caught by step 1 (the event is no longer newer than the mark).
func (p *Processor) Process(ctx context.Context, m *Message) (out Outcome) {
	start := p.opts.Now()
	defer func() {
		if r := recover(); r != nil {
			out = p.panicked(ctx, m, r)
			p.metrics.observe(m.Event.Provider, out.Decision, p.opts.Now().Sub(start))
		}
	}()
	out = p.process(ctx, m)
	// Infrastructure trouble (a leader election, a reconnect) usually
	// passes within seconds. Try again in place, keeping the delivery
	// alive, rather than hand the event back: a negative ack would let
	// the subject's newer events overtake it and turn it stale.
	for delay := 100 * time.Millisecond; out.transient && !out.lasting && delay <= 3200*time.Millisecond && ctx.Err() == nil && !m.stopping(); delay *= 2 {
		_ = m.Delivery.InProgress()
		select {
		case <-ctx.Done():
		case <-m.stop:
			// Run's stop: hand the event back (below) rather than sleep on.
			continue
		case <-time.After(delay):
		}
		out = p.process(ctx, m)
	}
	switch {
	case out.lasting:
		p.waitAtHeadFor(m, "", lastingWait)
	case out.transient:
		p.waitAtHead(m, "")
	}
	if !(out.Decision == Retry && (out.untried || m.kept() && m.waits > 1)) {
		// Not a run that found a kept event still waiting (Message.waits).
		p.metrics.observe(m.Event.Provider, out.Decision, p.opts.Now().Sub(start))
	}
	return out
}

func (p *Processor) process(ctx context.Context, m *Message) Outcome {
	if m.letter != "" {
		return p.deadLetter(ctx, m, m.letter, m.letterStatus)
	}
	if p.opts.Lettered != nil {
		if why := p.opts.Lettered(m.Event.Seq, m.Event.Key); why != "" {
			// Recorded in AUDIT when it was dead-lettered.
			return p.ack(ctx, m, Outcome{Decision: AlreadyDeadLettered, Reason: why})
		}
	}
	ev := m.Event
	rule, ok := p.rules[ev.Provider]
	if !ok {
		return p.deadLetter(ctx, m, "no rule for provider "+ev.Provider+" (removed from the config?)", 0)
	}
	if rule.Watermark {
		if why := unorderable(ev); why != "" {
			return p.deadLetter(ctx, m, why, 0)
		}
		// The watermark tells most events apart without APPLIED: one newer
		// than the mark was not applied (a holder that remembered it and
		// stopped before committing left its lease naming the key, which
		// applyLeased settles). applyLeased reads APPLIED only for the rest.
		return p.applyLeased(ctx, m, rule)
	}
	if out, done := p.checkApplied(ctx, m, rule, nil); done {
		return out
	}
	// Nothing to order, but two deliveries of one key (a redelivery to a
	// stalled holder, a replay beside the live consumer, another
	// instance) must not both pass the check above: the lease keeps them
	// apart, on the subject or, without one, on a shard of keys.
	return p.applyLeased(ctx, m, rule)
}

// checkApplied decides a delivery whose key is in APPLIED: already applied,
// or (its holder stopped between remembering and committing) settled now.
// done is false when the key is not there. mark, when not nil, is the
// subject's mark as just read (seenBy).
func (p *Processor) checkApplied(ctx context.Context, m *Message, rule Rule, mark *Mark) (Outcome, bool) {
	seen, uncommitted, err := p.seenBy(ctx, m.Event, rule, mark)
	if err != nil {
		return p.retry(m, fmt.Errorf("read applied keys: %w", err), false), true
	}
	if !seen {
		return Outcome{}, false
	}
	if out, done := p.settleOwn(ctx, m, rule); done {
		return out, true
	}
	if m.effectsRan {
		// This delivery ran the effects and committed, but the commit's
		// answer was lost (a WATERMARKS leader change after the write
		// reached a quorum), so it was tried again in place and finds its
		// own commit: it is this delivery's apply, never recorded yet
		// (review K: decided already-applied, AUDIT had no applied record).
		p.record(m.Event, event.DecisionApplied, "")
		return p.ack(ctx, m, Outcome{Decision: Applied}), true
	}
	if uncommitted {
		if out, done := p.adoptOwn(ctx, m); done {
			return out, true
		}
	}
	return p.ack(ctx, m, Outcome{Decision: AlreadyApplied}), true
}

// adoptOwn settles an event of its mark's instant whose sequenced publish
// is in GRANTS after the mark's last commit there (seenBy), with no lease
// naming it (settleOwn): a delivery published it and then failed before
// committing (the publish's answer lost past its deadline; or it stopped,
// and another event's lease replaced its own), so nobody recorded it
// applied, and its redelivery is another delivery (not
// Message.effectsRan). It takes the event into the mark (a lease left by
// a holder gone stays; a live one's holder is waited for) and records it
// applied, once: a commit that took it in first (a publish that found it,
// which records it) leaves it in the mark's keys. done is false when the
// mark moved on meanwhile: a newer event's publish on the same GRANTS
// subject found it and recorded it, or, published elsewhere, left it
// unrecorded (a gap left open).
func (p *Processor) adoptOwn(ctx context.Context, m *Message) (Outcome, bool) {
	ev := m.Event
	return p.commitApplied(ctx, m, adoptedReason, func(mark Mark) (Mark, *Outcome) {
		if !ev.OccurredAt.Equal(mark.At) || slices.Contains(mark.Keys, ev.Key) {
			return Mark{}, nil
		}
		if l := mark.Lease; l != nil && p.leaseLive(l, p.opts.Now()) {
			// Another instance applies an event of the subject: its
			// commit or release is a compare-and-set this write would
			// make fail. Come back after it (its publish may find this
			// event and record it).
			out := p.retry(m, fmt.Errorf("subject held by the lease of %s", l.Owner), false)
			out.transient = false
			p.waitAtHead(m, "")
			return Mark{}, &out
		}
		return takeIn(mark, ev), &Outcome{}
	})
}

// panicked handles a panic while deciding or applying m (a bug, in hookgate
// or in an Effect) as a failed attempt, logged with its stack: retried
// with backoff, then dead-lettered with the panic as the reason, like an
// effect's error. A lease it claimed is left to expire, as after a crash
// (its effects may have run). If its effects had run (the panic came
// after them: remembering the key, the commit; Message.effectsRan), it is
// applied, only not committed: it is retried, never dead-lettered, and its
// redelivery settles it. It looks nothing up: the code that panicked may
// be the lookup, and a panic here would stop the process. Unrecovered, an
// event that panics every time stopped the process, gateway included, at
// each of its deliveries, and was never dead-lettered.
func (p *Processor) panicked(ctx context.Context, m *Message, r any) Outcome {
	m.waitFor, m.waitUntil = "", time.Time{}
	p.log.Error("panic while processing an event", slog.String("provider", m.Event.Provider), slog.String("key", m.Event.Key),
		slog.Int("deliveries", m.Deliveries), slog.String("panic", fmt.Sprint(r)), slog.String("stack", string(debug.Stack())))
	err := fmt.Errorf("panic: %v", r)
	if m.effectsRan {
		return p.retry(m, err, true) // counted for the backoff; never dead-lettered
	}
	return p.failed(context.WithoutCancel(ctx), m, err)
}

// pausedEffect keeps m waiting, untried and uncounted, while an effect of
// its rule is paused (a forward receiver's Retry-After, up to the longest
// consumer.backoff step from the answer that asked for it, as a retry
// honours it). Only under Run, where it can wait at the head of its
// subject; an operator's re-feed sends as before. applyLeased asks it
// once the event is known to need its effects run (not stale, not
// already applied, its subject not waiting for an in-doubt event, not
// the in-doubt event itself, which may settle without running them):
// asked first, such events waited out the pause for nothing, and one
// whose subject waited for an in-doubt event forgot which (the in-doubt
// event's redelivery then queued behind it).
//
// With peek, it only reports a pause (logged when new), and parks nothing.
func (p *Processor) pausedEffect(m *Message, rule Rule, peek bool) (Outcome, bool) {
	if !m.parkable || m.stopping() {
		return Outcome{}, false
	}
	now := p.opts.Now()
	limit := slices.Max(p.opts.Backoff)
	for _, e := range rule.Effects {
		pe, ok := e.(Pauser)
		if !ok {
			continue
		}
		until, fresh := pe.PausedUntil(now, limit)
		if until.IsZero() {
			continue
		}
		d := min(until.Sub(now), limit)
		if fresh {
			// The cap said too: a Retry-After of 30 s logged as "until
			// now+2s" read as a misparse (a 3 a.m. audit, stop 38).
			p.log.Warn("forward receiver asked to be left alone (Retry-After): the provider's events wait, untried, until then (a pause lasts at most the longest consumer.backoff step)",
				slog.String("provider", m.Event.Provider), slog.Time("until", now.Add(d).UTC()), slog.Duration("at_most", limit))
		}
		if peek {
			return Outcome{}, true
		}
		p.waitAtHeadFor(m, "", d)
		return Outcome{Decision: Retry, Reason: "forward receiver paused (Retry-After) until " + now.Add(d).UTC().Format(time.RFC3339), untried: true}, true
	}
	return Outcome{}, false
}

// EffectPauses returns, for each provider one of whose effects' targets
// asked to be left alone (a forward receiver's 429 or 503 with
// Retry-After), when that pause ends; nil when none is paused. Its events
// wait untried meanwhile, and are not delivered again, so status reads
// this (an operations audit, stop 41: PROBLEMS none for the 10 minutes
// of a pause). Safe for concurrent use.
func (p *Processor) EffectPauses() map[string]time.Time {
	now := p.opts.Now()
	var limit time.Duration
	if len(p.opts.Backoff) > 0 {
		limit = slices.Max(p.opts.Backoff)
	}
	var out map[string]time.Time
	for provider, rule := range p.rules {
		for _, e := range rule.Effects {
			pe, ok := e.(Pauser)
			if !ok {
				continue
			}
			if until := pe.PauseEnd(now, limit); !until.IsZero() && until.After(out[provider]) {
				if out == nil {
					out = map[string]time.Time{}
				}
				out[provider] = until
			}
		}
	}
	return out
}

// waitAtHead lets an event that has to wait, untried, keep its place: under
// Run it stays at the head of its subject for handBackDelay, or until the
// event of key waitFor ("": none) has run (Message.parkable); else it is
// handed back.
func (p *Processor) waitAtHead(m *Message, waitFor string) {
	p.waitAtHeadFor(m, waitFor, handBackDelay)
}

// waitAtHeadFor is waitAtHead for d instead of handBackDelay.
func (p *Processor) waitAtHeadFor(m *Message, waitFor string, d time.Duration) {
	if !m.parkable || m.stopping() {
		p.handBack(m, d)
		return
	}
	m.waitFor, m.waitUntil = waitFor, time.Now().Add(d)
	m.waits++
	p.parks.Add(1)
}

// handBackDelay delays the redelivery of an event handed back untried (its
// store did not answer, its subject is in doubt, its Run is stopping).
const handBackDelay = time.Second

// lastingWait is how long an event waits between tries of a write its
// store refuses until an operator acts (a full DLQ): each try is one
// quick refused write, and the operator's fix (a raised limit, letters
// removed) is seen within seconds.
const lastingWait = 5 * time.Second

// keepAlive is how often a delivery whose effects still run is marked in
// progress, well inside any AckWait.
const keepAlive = 5 * time.Second

func (p *Processor) runEffects(ctx context.Context, m *Message, effects []Effect) error {
	// Keep the delivery alive while effects run. A timer, not a goroutine
	// per event: almost every event finishes long before it fires. The
	// mark is sent under mu, so none goes out after the effects ended: the
	// server would let a late one replace a negative acknowledgement's
	// delay with the ack wait.
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	mu.Lock()
	t = time.AfterFunc(keepAlive, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			_ = m.Delivery.InProgress()
			t.Reset(keepAlive)
		}
	})
	mu.Unlock()
	defer func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
		t.Stop()
	}()
	for i, e := range effects {
		if i < m.effectsDone {
			continue // succeeded in an earlier run of this delivery
		}
		if err := e.Apply(ctx, m.Event); err != nil {
			if errors.Is(err, ErrStoreUnavailable) {
				m.effectsDone = max(m.effectsDone, i)
			}
			return err
		}
	}
	return nil
}

func (p *Processor) finishRemembered(ctx context.Context, m *Message) Outcome {
	if p.crashAt(stepBeforeAck, m.Event.Key) {
		return crashed
	}
	p.record(m.Event, event.DecisionApplied, "")
	return p.ack(ctx, m, Outcome{Decision: Applied})
}

func (p *Processor) record(ev Event, decision, reason string) {
	p.recordStatus(ev, decision, reason, 0)
}

// recordStatus is record with an HTTP status (0: none).
func (p *Processor) recordStatus(ev Event, decision, reason string, status int) {
	p.audit.Record(event.AuditRecord{
		Time: p.opts.Now().UTC(), Decision: decision, Provider: ev.Provider, Account: ev.Account,
		Key: ev.Key, Seq: ev.Seq, Status: status, Reason: reason, Actor: p.opts.Actor,
	})
}

// unorderable says why a watermark rule cannot place ev ("" when it can):
// no subject, no occurred_at, or one that does not parse, with
// ParseOccurredAt's reason (a letter quoting the value alone left the
// operator to guess, e.g. that 13 digits are milliseconds; review 9).
func unorderable(ev Event) string {
	switch {
	case ev.Subject == "":
		return "no subject: ordering is watermark and the subject source found nothing"
	case !ev.OccurredAt.IsZero():
		return ""
	case ev.OccurredRaw == "":
		return "no occurred_at: ordering is watermark and the occurred_at source found nothing"
	}
	// Prepared events carry the parsed time; parse again for the reason.
	why := "does not parse"
	if _, err := ParseOccurredAt(ev.OccurredRaw); err != nil {
		why = strings.TrimPrefix(err.Error(), ErrInvalidOccurredAt.Error()+" ")
	}
	return "unparseable occurred_at " + strings.TrimPrefix(why, "occurred_at ")
}
