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
)

// Outcome is what became of one delivery.
type Outcome struct {
	Decision string
	Reason   string
	// transient: a Retry for infrastructure trouble (a store or stream
	// not answering), not the event's fault; not yet negatively
	// acknowledged, so Process may try again in place.
	transient bool
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
	return &Processor{rules: rules, marks: marks, applied: applied, memory: memory, sequenced: sequenced, dlq: dlq, audit: audit, log: log, opts: o, metrics: m, cache: newMarkCache(1 << 16), handBacks: newHandBacks(1 << 16)}
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
	for delay := 100 * time.Millisecond; out.transient && delay <= 3200*time.Millisecond && ctx.Err() == nil && !m.stopping(); delay *= 2 {
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
	if out.transient {
		p.waitAtHead(m, "")
	}
	if !(out.Decision == Retry && m.kept() && m.waits > 1) {
		// Not a run that found a kept event still waiting (Message.waits).
		p.metrics.observe(m.Event.Provider, out.Decision, p.opts.Now().Sub(start))
	}
	return out
}

func (p *Processor) process(ctx context.Context, m *Message) Outcome {
	if m.letter != "" {
		return p.deadLetter(ctx, m, m.letter)
	}
	ev := m.Event
	rule, ok := p.rules[ev.Provider]
	if !ok {
		return p.deadLetter(ctx, m, "no rule for provider "+ev.Provider+" (removed from the config?)")
	}
	if rule.Watermark {
		if why := unorderable(ev); why != "" {
			return p.deadLetter(ctx, m, why)
		}
		// The watermark tells most events apart without APPLIED: one newer
		// than the mark was not applied (a holder that remembered it and
		// stopped before committing left its lease naming the key, which
		// applyLeased settles). applyLeased reads APPLIED only for the rest.
		return p.applyLeased(ctx, m, rule)
	}
	if out, done := p.checkApplied(ctx, m, rule); done {
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
// done is false when the key is not there.
func (p *Processor) checkApplied(ctx context.Context, m *Message, rule Rule) (Outcome, bool) {
	seen, err := p.seen(ctx, m.Event)
	if err != nil {
		return p.retry(m, fmt.Errorf("read applied keys: %w", err), false), true
	}
	if !seen {
		return Outcome{}, false
	}
	if out, done := p.settleOwn(ctx, m, rule); done {
		return out, true
	}
	return p.ack(ctx, m, Outcome{Decision: AlreadyApplied}), true
}

func (p *Processor) applyLeased(ctx context.Context, m *Message, rule Rule) Outcome {
	ev := m.Event
	key := LeaseKey(ev)
	var (
		mark        Mark
		rev         uint64
		tookOver    bool      // the lease we claimed already named our key
		guessed     bool      // no mark read or cached: guessed absent (newGuess)
		waitedSince time.Time // first wait for another holder's lease
	)
	for first := true; ; first = false {
		// The cached mark only ever leads to the lease claim below (its
		// compare-and-set fails if the mark moved, and the loop reads the
		// store): every decision taken without a write (stale,
		// already-applied, wait) is taken on a mark read from the store.
		cm, cr, cached, uncached := Mark{}, uint64(0), false, false
		if first {
			cm, cr, cached = p.cache.get(key)
			// No mark cached: when most such subjects had none lately,
			// guess this one has none either (a new subject). The claim
			// below then creates the entry; if one exists, the create
			// conflicts and the loop reads it.
			uncached = !cached
			guessed = uncached && p.guessNew.guess()
			cached = cached || guessed
		}
		if cached && (!rule.Watermark || ev.OccurredAt.After(cm.At)) {
			mark, rev = cm, cr
		} else {
			var err error
			if mark, rev, err = p.readMark(ctx, key); err != nil {
				return p.retry(m, fmt.Errorf("read watermark: %w", err), false)
			}
			if uncached {
				p.guessNew.learn(rev == 0)
			}
		}
		if rule.Watermark && !ev.OccurredAt.After(mark.At) {
			// Not newer than the mark (now: the mark may have moved while
			// we waited for a lease): a replay, or an event of the same
			// instant. Only APPLIED tells already-applied from stale.
			if out, done := p.checkApplied(ctx, m, rule); done {
				return out
			}
		}
		if rule.Watermark {
			if out, done := p.judge(ctx, m, mark); done {
				return out
			}
		}
		now := p.opts.Now()
		if l := mark.Lease; l != nil && p.leaseLive(l, now) {
			// Another instance is applying an event of this subject. Wait
			// for it (bounded by its lease) rather than run beside it: in
			// place for a while (most holders commit within milliseconds),
			// then, under Run, at the head of the subject (at once when it
			// was kept before), so the worker takes other subjects meanwhile
			// (as many leases held elsewhere as workers held up every
			// subject, up to LeaseTTL).
			if waitedSince.IsZero() {
				waitedSince = time.Now()
			}
			if m.parkable && !m.stopping() && (m.waits > 0 || time.Since(waitedSince) >= leaseWaitInPlace) {
				out := p.retry(m, fmt.Errorf("subject held by the lease of %s", l.Owner), false)
				out.transient = false
				p.waitAtHead(m, "")
				return out
			}
			if err := p.waitLease(ctx, m, l.Until); err != nil {
				return p.retry(m, err, false)
			}
			continue
		}
		if l := mark.Lease; rule.Watermark && l != nil && l.Key != ev.Key && now.Before(l.Until.Add(p.opts.InDoubtWait)) {
			// The holder stopped between claim and commit: its event may
			// be in GRANTS already. Deciding ours against this mark could
			// publish an older event after it, or leave it in GRANTS and
			// judged stale later. Its redelivery settles it; come back
			// after that.
			// Don't wait in place: the in-doubt event's redelivery may be
			// queued behind this one (Run keeps a subject's events in
			// order). Under Run, let it park the event at the head of its
			// subject and run the in-doubt one first (Message.parkable);
			// else hand it back.
			out := p.retry(m, fmt.Errorf("subject waits for in-doubt event %s", l.Key), false)
			out.transient = false
			p.waitAtHead(m, l.Key)
			return out
		}
		tookOver = mark.Lease != nil && mark.Lease.Key == ev.Key
		claimed := mark
		claimed.Lease = &Lease{Owner: p.opts.Owner, Key: ev.Key, Until: now.Add(p.opts.LeaseTTL)}
		newRev, err := p.putMark(ctx, key, claimed, rev)
		if guessed && (err == nil || errors.Is(err, ErrConflict)) {
			p.guessNew.learn(err == nil)
			guessed = false
		}
		if errors.Is(err, ErrConflict) {
			continue // read the store again: the cached (or guessed) mark was behind
		}
		if err != nil {
			return p.retry(m, fmt.Errorf("claim watermark: %w", err), false)
		}
		rev = newRev
		break
	}
	if !rule.Watermark {
		// The mark keeps no keys under ordering none, so the applied-key
		// check above ran before we held the subject: another instance
		// may have applied this key while we waited. Check again, now
		// that the lease serializes us.
		seen, err := p.seen(ctx, ev)
		if err != nil || seen {
			released := mark
			released.Lease = nil
			if _, rerr := p.putMark(ctx, key, released, rev); rerr != nil && !errors.Is(rerr, ErrConflict) {
				p.log.Warn("release watermark lease", slog.String("key", ev.Key), slog.String("error", rerr.Error()))
			}
			if err != nil {
				return p.retry(m, fmt.Errorf("read applied keys: %w", err), false)
			}
			return p.ack(ctx, m, Outcome{Decision: AlreadyApplied})
		}
	}

	settled := false
	var pub *grantPublish // the sequenced GRANTS publish, if the rule's is
	if tookOver {
		// A holder before us, for this same key, may have run the effects
		// (and remembered the key), then stopped before committing. Then
		// commit without running the effects again. Where the key is
		// remembered in APPLIED, the GRANTS message (published last) also
		// tells, when the crash came before remembering: that spares a
		// second forward.
		seen, err := p.seen(ctx, ev)
		if err == nil && !seen && p.memory[ev.Provider] == nil { // seen searched GRANTS already
			if seen, err = p.inGrants(ctx, rule, ev); seen && err == nil {
				err = p.remember(ctx, ev)
			}
		}
		if err != nil {
			return p.retry(m, fmt.Errorf("read applied keys: %w", err), false)
		}
		settled = seen
		m.effectsRan = m.effectsRan || seen
	}
	if !settled {
		if p.crashAt(stepBeforeEffects, m.Event.Key) {
			return crashed
		}
		effects := rule.Effects
		if sg := p.sequenced[ev.Provider]; sg != nil {
			pub = &grantPublish{p: p, sg: sg, mark: &mark}
			effects = append(slices.Clip(effects[:len(effects)-1]), pub)
		}
		if err := p.runEffects(ctx, m, effects); err != nil {
			// Release the lease so newer events of the subject can apply while
			// this one waits for its retry. The mark keeps what a sequenced
			// publish learned from GRANTS.
			released := mark
			released.Lease = nil
			if errors.Is(err, errSuperseded) {
				return p.superseded(ctx, m, key, released, rev, pub)
			}
			if _, rerr := p.putMark(ctx, key, released, rev); rerr != nil && !errors.Is(rerr, ErrConflict) {
				p.log.Warn("release watermark lease", slog.String("key", ev.Key), slog.String("error", rerr.Error()))
			} else if rerr == nil {
				pub.recordAdopted()
			}
			if errors.Is(err, errGrantsMoving) {
				return p.retry(m, err, false) // not the event's fault
			}
			return p.failed(ctx, m, err)
		}

		m.effectsRan = true
		if p.crashAt(stepAfterEffects, m.Event.Key) {
			return crashed
		}
		// Remember the key before the commit releases the lease. So every key
		// a watermark holds is already in APPLIED when a later commit drops it
		// (a late redelivery is already-applied, never stale), and under
		// ordering none the next holder's re-check sees it. A crash between
		// here and the commit is settled by the redelivery (settleOwn).
		if err := p.remember(ctx, ev); err != nil {
			return p.retry(m, fmt.Errorf("remember applied key: %w", err), false)
		}
		if p.crashAt(stepAfterRemember, m.Event.Key) {
			return crashed
		}
	}
	lost := false
	for {
		base := mark
		if lost && pub != nil {
			// Committing on top of a mark re-read below: keep every event
			// our publish read in GRANTS (taken in before ours, as they were
			// when we published), or a later event would publish after
			// them without knowing them.
			base = pub.fold(base)
		}
		next := advance(base, ev, rule.Watermark)
		if lost && pub != nil && pub.seq > next.Grants[pub.subject] {
			// Our message's sequence (another holder's later one would be
			// higher).
			next = withGrant(next, pub.subject, pub.seq)
		}
		if l := mark.Lease; lost && l != nil && l.Owner != p.opts.Owner && p.opts.Now().Before(l.Until) {
			// Someone took the subject after our lease expired and is
			// applying now: keep their claim.
			next.Lease = l
		}
		_, err := p.putMark(ctx, key, next, rev)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrConflict) {
			// The effects are done and idempotent; redelivery converges.
			return p.retry(m, fmt.Errorf("commit watermark: %w", err), false)
		}
		// Our lease expired and someone moved the entry: re-read and
		// commit on top of what is there now, never backwards.
		var gerr error
		lost = true
		mark, rev, gerr = p.readMark(ctx, key)
		if gerr != nil {
			return p.retry(m, fmt.Errorf("re-read watermark: %w", gerr), false)
		}
		p.log.Warn("watermark lease lost while applying; committing on top",
			slog.String("provider", ev.Provider), slog.String("key", ev.Key), slog.String("subject", ev.Subject))
	}
	pub.recordAdopted()
	if p.crashAt(stepAfterWatermark, m.Event.Key) {
		return crashed
	}
	return p.finishRemembered(ctx, m)
}

// settleOwn finishes an event whose holder stopped after remembering its
// key and before committing: the subject's lease still names the key.
// Its effects ran; commit the watermark (compare-and-set, monotonic, so
// doing it twice is harmless) and release the subject. done reports that
// it decided the delivery (applied now, or a retry).
func (p *Processor) settleOwn(ctx context.Context, m *Message, rule Rule) (Outcome, bool) {
	ev := m.Event
	key := LeaseKey(ev)
	for {
		mark, rev, err := p.readMark(ctx, key)
		if err != nil {
			return p.retry(m, fmt.Errorf("read watermark: %w", err), false), true
		}
		if mark.Lease == nil || mark.Lease.Key != ev.Key {
			return Outcome{}, false
		}
		next := advance(mark, ev, rule.Watermark)
		if _, err := p.putMark(ctx, key, next, rev); err != nil {
			if errors.Is(err, ErrConflict) {
				continue
			}
			return p.retry(m, fmt.Errorf("commit watermark: %w", err), false), true
		}
		p.record(ev, event.DecisionApplied, "")
		return p.ack(ctx, m, Outcome{Decision: Applied}), true
	}
}

// judge applies the watermark rule to a mark. done reports a final outcome.
func (p *Processor) judge(ctx context.Context, m *Message, mark Mark) (Outcome, bool) {
	ev := m.Event
	switch {
	case mark.At.IsZero() || ev.OccurredAt.After(mark.At):
		return Outcome{}, false
	case ev.OccurredAt.Equal(mark.At):
		if slices.Contains(mark.Keys, ev.Key) {
			// The mark moved but the crash came before APPLIED was written.
			if err := p.remember(ctx, ev); err != nil {
				return p.retry(m, fmt.Errorf("remember applied key: %w", err), false), true
			}
			return p.ack(ctx, m, Outcome{Decision: AlreadyApplied}), true
		}
		return Outcome{}, false
	}
	reason := fmt.Sprintf("occurred_at %s older than watermark %s", ev.OccurredAt.Format(time.RFC3339Nano), mark.At.Format(time.RFC3339Nano))
	if p.attempt(m) > 1 {
		reason = "superseded while retrying: " + reason
	}
	p.record(ev, event.DecisionStale, reason)
	return p.ack(ctx, m, Outcome{Decision: Stale, Reason: reason}), true
}

// superseded settles an event whose sequenced publish found a newer event
// of its subject in GRANTS (published by a holder that stopped before
// committing): it is stale, and released is the mark with that event taken
// in and the lease cleared.
func (p *Processor) superseded(ctx context.Context, m *Message, key string, released Mark, rev uint64, pub *grantPublish) Outcome {
	if _, err := p.putMark(ctx, key, released, rev); err != nil {
		return p.retry(m, fmt.Errorf("commit watermark: %w", err), false)
	}
	pub.recordAdopted()
	ev := m.Event
	reason := fmt.Sprintf("occurred_at %s older than %s, an event found in GRANTS whose holder stopped before committing",
		ev.OccurredAt.Format(time.RFC3339Nano), released.At.Format(time.RFC3339Nano))
	p.record(ev, event.DecisionStale, reason)
	return p.ack(ctx, m, Outcome{Decision: Stale, Reason: reason})
}

// advance is the mark after ev applied: time moves forward only.
func advance(mark Mark, ev Event, watermark bool) Mark {
	next := Mark{At: mark.At, Keys: mark.Keys, Grants: mark.Grants}
	if !watermark {
		return next
	}
	switch {
	case mark.At.IsZero() || ev.OccurredAt.After(mark.At):
		next.At, next.Keys = ev.OccurredAt, []string{ev.Key}
	case ev.OccurredAt.Equal(mark.At) && !slices.Contains(mark.Keys, ev.Key):
		next.Keys = append(slices.Clone(mark.Keys), ev.Key)
	}
	return next
}

// leaseWaitInPlace is how long a worker waits in place for another holder's
// lease before it keeps the event at its subject's head instead.
const leaseWaitInPlace = time.Second

// errStopping: the Run that delivered the event is stopping; the event,
// whose effects have not started, goes back to the stream.
var errStopping = errors.New("consumer stopping")

func (p *Processor) waitLease(ctx context.Context, m *Message, until time.Time) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for p.opts.Now().Before(until) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.stop:
			// Run hands Process a context that never ends, so that effects
			// under way finish; a wait for another holder's lease (up to
			// LeaseTTL) must not hold the shutdown.
			return errStopping
		case <-t.C:
			_ = m.Delivery.InProgress()
			return nil // re-read: the holder may have committed already
		}
	}
	return nil
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

// leaseLive reports whether l is another process's lease that may still
// be applying its event (see Options.Gone).
func (p *Processor) leaseLive(l *Lease, now time.Time) bool {
	if l.Owner == p.opts.Owner || !now.Before(l.Until) {
		return false
	}
	return p.opts.Gone == nil || !p.opts.Gone(l.Owner)
}

// waitAtHead lets an event that has to wait, untried, keep its place: under
// Run it stays at the head of its subject for handBackDelay, or until the
// event of key waitFor ("": none) has run (Message.parkable); else it is
// handed back.
func (p *Processor) waitAtHead(m *Message, waitFor string) {
	if !m.parkable || m.stopping() {
		p.handBack(m, handBackDelay)
		return
	}
	m.waitFor, m.waitUntil = waitFor, time.Now().Add(handBackDelay)
	m.waits++
	p.parks.Add(1)
}

// handBackDelay delays the redelivery of an event handed back untried (its
// store did not answer, its subject is in doubt, its Run is stopping).
const handBackDelay = time.Second

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
	for _, e := range effects {
		if err := e.Apply(ctx, m.Event); err != nil {
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
	p.audit.Record(event.AuditRecord{
		Time: p.opts.Now().UTC(), Decision: decision, Provider: ev.Provider, Account: ev.Account,
		Key: ev.Key, Seq: ev.Seq, Reason: reason, Actor: event.ActorConsumer,
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
