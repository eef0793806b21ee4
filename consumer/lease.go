package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/hookgate/hookgate/event"
)

// applyLeased carries an event through steps 1 to 6 of Process under the
// subject's lease (for an event without a subject, a shard's): read or
// take the cached mark, wait for another holder, claim, run the effects,
// remember the key, commit.
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
			if out, done := p.checkApplied(ctx, m, rule, &mark); done {
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
				p.leaseWaitStarts(ev, l)
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
		if l := mark.Lease; rule.Watermark && l != nil && l.Key != ev.Key && !l.Redeliver && now.Before(l.Until.Add(p.opts.InDoubtWait)) {
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
		tookOver = mark.Lease != nil && mark.Lease.Key == ev.Key && !mark.Lease.Redeliver
		if !tookOver {
			// A forward receiver asked for quiet: wait, untried, before
			// claiming (the in-doubt event itself goes on: it may settle
			// without running its effects). On the stored mark: a cached
			// or guessed one may hide that the event is stale, already
			// applied or waits for an in-doubt one.
			if out, paused := p.pausedEffect(m, rule, cached); paused {
				if cached {
					continue
				}
				return out
			}
		}
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
			// publish learned from GRANTS. Released also when ctx ended
			// mid-effect (an operator's Ctrl-C in dlq replay or replay,
			// whose ctx cuts the forward short): left, it held the subject
			// for the lease time and then in doubt, waiting for a
			// redelivery that never comes (review AV).
			// (The rest keeps ctx: an interrupted re-feed keeps its letter
			// rather than writing a new one for the interruption.)
			released := mark
			released.Lease = nil
			if errors.Is(err, errSuperseded) {
				return p.superseded(ctx, m, key, released, rev, pub)
			}
			if _, rerr := p.putMark(context.WithoutCancel(ctx), key, released, rev); rerr != nil && !errors.Is(rerr, ErrConflict) {
				p.log.Warn("release watermark lease", slog.String("key", ev.Key), slog.String("error", rerr.Error()))
			} else if rerr == nil {
				pub.recordAdopted()
			}
			if errors.Is(err, errGrantsMoving) || p.storeTrouble(m, err) {
				return p.retry(m, err, false) // not the event's fault
			}
			return p.failed(ctx, m, err)
		}

		m.effectsRan = true
		// The effects ran: finish (remember, commit, acknowledge) even if
		// ctx ends now, so an interrupted operator command leaves no lease
		// behind it (serve's workers run every event so already).
		ctx = context.WithoutCancel(ctx)
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
		if have, ok := pubBase(next, pub); lost && ok && have >= pub.after && pub.seq > have {
			// Our message's sequence (another holder's later one would be
			// higher), on a mark whose sequence covers what our publish
			// followed. A mark without it, or with less (deleted by an
			// operator, restored), has lost track of what came before our
			// message there: its sequence then would tell a later lookup
			// that everything before ours was committed and known to the
			// mark, so an earlier event of the mark's instant would be read
			// as not applied and published again (review S). Without it,
			// the next publish there reads a horizon back, and lookups walk.
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
	return p.commitApplied(ctx, m, "", func(mark Mark) (Mark, *Outcome) {
		if mark.Lease == nil || mark.Lease.Key != m.Event.Key || mark.Lease.Redeliver {
			return Mark{}, nil
		}
		return advance(mark, m.Event, rule.Watermark), &Outcome{}
	})
}

// commitApplied records m applied (with reason) once a compare-and-set of
// its subject's mark with what next makes of the mark read succeeds; it
// reads again on a conflict. next returns a nil outcome when m is not to
// be settled here (done false), or a decided one (a wait) to return
// without writing when it has a decision.
func (p *Processor) commitApplied(ctx context.Context, m *Message, reason string, next func(Mark) (Mark, *Outcome)) (Outcome, bool) {
	key := LeaseKey(m.Event)
	for {
		mark, rev, err := p.readMark(ctx, key)
		if err != nil {
			return p.retry(m, fmt.Errorf("read watermark: %w", err), false), true
		}
		write, out := next(mark)
		switch {
		case out == nil:
			return Outcome{}, false
		case out.Decision != "":
			return *out, true
		}
		if _, err := p.putMark(ctx, key, write, rev); err != nil {
			if errors.Is(err, ErrConflict) {
				continue
			}
			return p.retry(m, fmt.Errorf("commit watermark: %w", err), false), true
		}
		p.record(m.Event, event.DecisionApplied, reason)
		return p.ack(ctx, m, Outcome{Decision: Applied, Reason: reason}), true
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
	if p.attempt(m) > 1 {
		// As judge says it: the contract's reason for a retry that came
		// back superseded (review AB).
		reason = "superseded while retrying: " + reason
	}
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

// leaseWaitStarts tells Options.LeaseWait that ev waits for lease l.
func (p *Processor) leaseWaitStarts(ev Event, l *Lease) {
	if p.opts.LeaseWait != nil {
		p.opts.LeaseWait(ev, *l)
	}
}

// leaseLive reports whether l is another process's lease that may still
// be applying its event (see Options.Gone).
func (p *Processor) leaseLive(l *Lease, now time.Time) bool {
	if l.Owner == p.opts.Owner || !now.Before(l.Until) {
		return false
	}
	return p.opts.Gone == nil || !p.opts.Gone(l.Owner)
}
