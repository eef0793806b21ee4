package consumer_test

// The model and the invariants TestProcessorProperty holds every
// delivery and every run to.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"pgregory.net/rapid"
)

// applies is the sequencing rule: newer than the watermark, or equal to it
// with a key not yet applied at that instant.
func applies(m consumer.Mark, s spec) bool {
	return m.At.IsZero() || s.at.After(m.At) || (s.at.Equal(m.At) && !slices.Contains(m.Keys, s.key))
}

// checkDecision holds one settled delivery to the rules, given what it
// read and what had happened when it decided (w.mu held).
func (w *world) checkDecision(d *delivery) {
	s, out := d.spec, d.outcome
	fail := func(format string, args ...any) {
		w.violatef("delivery %d of %s (%s, attempt %d, owner %s) %s: %s", d.id, s.key, fmtAt(s),
			d.msg.deliveries, d.owner, out.Decision, fmt.Sprintf(format, args...))
	}
	switch out.Decision {
	case crashedOutcome:
		if d.acks+d.naks != 0 {
			fail("a crashed delivery was acked %d and naked %d times", d.acks, d.naks)
		}
		if d.crashedAt != d.crashStep {
			fail("crashed at %q, planned %q", d.crashedAt, d.crashStep)
		}
		return
	case consumer.Retry:
		if d.acks != 0 || d.naks != 1 {
			fail("acked %d, naked %d; want one nak", d.acks, d.naks)
		}
		switch {
		case strings.Contains(out.Reason, context.DeadlineExceeded.Error()) && !errors.Is(d.effectErr, errLostTimeout):
			fail("stuck: waited 10 minutes (virtual) for the subject: %s", out.Reason)
		case d.effectErr == nil && d.read != nil && d.read.Lease != nil && d.read.Lease.Key != s.key:
			// Deferring to the event that holds (or held) the subject's
			// lease is no failure of this one.
		case d.effectErr == nil:
			fail("retried without an effect failure: %s", out.Reason)
		case errors.Is(d.effectErr, consumer.ErrPermanent) || w.failed[d.msg.seq] >= propMaxDeliver:
			// The processor's attempt count lies between the failed
			// attempts (deliveries handed back untried are not attempts)
			// and the delivery count (what it forgot, by a restart).
			fail("retried a permanent failure, or at max_deliver (%d failed attempts)", w.failed[d.msg.seq])
		}
		return
	}
	if d.acks != 1 || d.naks != 0 {
		fail("acked %d, naked %d; want one ack", d.acks, d.naks)
	}
	if d.crashedAt != "" {
		fail("went on after crashing at %s", d.crashedAt)
	}
	pubAt, published := w.published[s.key]
	publishedBefore := published && pubAt < d.clock
	switch out.Decision {
	case consumer.Applied:
		if !publishedBefore {
			fail("applied but not in GRANTS")
		}
		if s.provider == provWatermark {
			if d.read == nil || !applies(*d.read, s) {
				fail("applied against watermark %s, which the rule says it does not beat", fmtMarkPtr(d.read))
			}
			// Or, sequenced, newer: its message (stored by an attempt that
			// crashed or lost the answer) was followed in GRANTS by a newer
			// event's whose holder stopped, and this publish, refused,
			// found both and took that one in.
			overtaken := w.sequenced && d.wrote != nil && d.wrote.At.After(s.at) && w.publishedAfter(s, d.clock)
			// Or found after the mark's last commit on its GRANTS subject
			// (an earlier attempt published it and failed): taken into the
			// mark beside whatever lease another holder has there.
			adopted := w.sequenced && strings.HasPrefix(out.Reason, "found in GRANTS") && d.wrote != nil &&
				(d.wrote.Lease == nil || d.wrote.Lease.Key != s.key)
			if d.wrote == nil || d.wrote.Lease != nil && !adopted ||
				!overtaken && (!d.wrote.At.Equal(s.at) || !slices.Contains(d.wrote.Keys, s.key)) {
				fail("committed watermark %s, want %s with the key and no lease", fmtMarkPtr(d.wrote), fmtAt(s))
			}
		}
		if n := w.count(s.key, consumer.Applied); n > 1 && !w.tolerated(knownNoneRerun, d) {
			fail("applied %d times", n)
		}
	case consumer.AlreadyApplied:
		if !publishedBefore {
			fail("already-applied, but it never reached GRANTS")
		}
	case consumer.Stale:
		// superseded (sequenced.go): its publish found a newer event in
		// GRANTS. Its reason does not say whether it was retrying.
		foundInGrants := strings.HasSuffix(out.Reason, "an event found in GRANTS whose holder stopped before committing")
		if s.provider != provWatermark {
			fail("stale under ordering none")
		} else if foundInGrants {
			// Superseded: its sequenced publish found a newer event of
			// the subject in GRANTS, not committed.
			if !w.newerPublished(s, d.clock) {
				fail("superseded, but no newer event of its subject is in GRANTS")
			}
		} else if d.read == nil || applies(*d.read, s) {
			fail("stale against watermark %s, which it beats", fmtMarkPtr(d.read))
		}
		if publishedBefore && !w.limitation(s.key) && !w.lateStale(s.key) && !w.tolerated(knownInDoubt, d) && !w.tolerated(knownDroppedKey, d) {
			fail("stale, yet it is in GRANTS")
		}
		// Retrying: an attempt failed before. Deliveries handed back
		// untried may count or not (see the max_deliver check above).
		if superseded := strings.HasPrefix(out.Reason, "superseded while retrying"); !foundInGrants && ((superseded && d.msg.deliveries == 1) || (!superseded && w.failed[d.msg.seq] > 0)) {
			fail("reason %q for delivery %d after %d failed attempts", out.Reason, d.msg.deliveries, w.failed[d.msg.seq])
		}
	case consumer.DeadLettered:
		switch {
		case s.badTime:
			if w.attempts[s.key] != 0 {
				fail("an event without a valid occurred_at reached its effects")
			}
		case d.effectErr == nil:
			fail("dead-lettered without an effect failure: %s", out.Reason)
		case !errors.Is(d.effectErr, consumer.ErrPermanent) && d.msg.deliveries < propMaxDeliver:
			fail("dead-lettered a retryable failure before max_deliver: %s", out.Reason)
		}
		if publishedBefore && !w.limitation(s.key) && !w.tolerated(knownNoneRerun, d) {
			fail("dead-lettered, yet it is in GRANTS")
		}
	default:
		fail("unknown decision")
	}
}

// checkStep runs after every action: nothing observed so far broke a rule
// (effects never overlap per subject, no key reaches GRANTS twice but as a
// crash rerun, GRANTS gets each subject's events in watermark order, the
// watermark never moves backwards, no live lease is taken, every decision
// agrees with the mark the delivery read and with GRANTS).
func (w *world) checkStep(rt *rapid.T) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.violations) > 0 {
		rt.Fatalf("%s\ntrace:\n%s", strings.Join(w.violations, "\n"), w.traceTail())
	}
}

// checkEnd runs after the drain, when every event has been delivered,
// without crashes, until it settled.
func (w *world) checkEnd(rt *rapid.T) {
	w.checkStep(rt)
	w.mu.Lock()
	defer w.mu.Unlock()
	fail := func(format string, args ...any) {
		rt.Fatalf("%s\ntrace:\n%s", fmt.Sprintf(format, args...), w.traceTail())
	}
	bySubject := map[string][]spec{}
	for _, k := range w.order {
		if s := w.specs[k]; w.delivered[k] {
			bySubject[s.markKey()] = append(bySubject[s.markKey()], s)
		}
	}
	for mk, specs := range bySubject {
		m, _, err := w.marks.Get(context.Background(), mk)
		if err != nil {
			fail("read %s: %v", mk, err)
		}
		// A lease outlives only the process that crashed holding it (it
		// expires, and the next claim replaces it): every delivery that
		// settled released its own.
		if l := m.Lease; l != nil && !w.crashedHolding(l) {
			fail("%s is still leased after the drain, by no crashed delivery: %s", mk, fmtMark(m))
		}
		if specs[0].provider != provWatermark {
			continue
		}
		// The mark is the newest applied instant and the keys applied at
		// it; the subject's newest events all apply, unless dead-lettered.
		var (
			want       consumer.Mark
			newest     time.Time
			newestKeys []string
		)
		for _, s := range specs {
			if s.badTime {
				continue
			}
			if s.at.After(newest) {
				newest, newestKeys = s.at, nil
			}
			if s.at.Equal(newest) {
				newestKeys = append(newestKeys, s.key)
			}
			if _, ok := w.published[s.key]; !ok || w.excused(s.key) {
				continue
			}
			if s.at.After(want.At) {
				want.At, want.Keys = s.at, nil
			}
			if s.at.Equal(want.At) {
				want.Keys = append(want.Keys, s.key)
			}
		}
		if !w.markAgrees(mk, m, specs) {
			fail("%s watermark = %s (with GRANTS after its sequence: %s), want the newest applied: %s", mk, fmtMark(m), fmtMark(w.asRead(mk, m)), fmtMark(want))
		}
		for _, k := range newestKeys {
			if _, ok := w.published[k]; !ok && w.count(k, consumer.DeadLettered) == 0 {
				fail("%s is the newest event of %s and was neither applied nor dead-lettered", k, mk)
			}
		}
	}
	// No key lost: each ends applied (in GRANTS), or stale, or
	// dead-lettered. (A key judged stale or dead-lettered after it reached
	// GRANTS was caught when it was decided.)
	for _, k := range w.order {
		if !w.delivered[k] {
			continue
		}
		_, published := w.published[k]
		dead := w.count(k, consumer.DeadLettered)
		if !published && w.count(k, consumer.Stale)+dead == 0 {
			fail("%s was lost: not in GRANTS, not stale, not dead-lettered: %s", k, w.fmtDecisions(k))
		}
		if dead != w.letters[k] {
			fail("%s: %d dead-letter decisions, %d letters", k, dead, w.letters[k])
		}
	}
}

// asRead is m as the processor reads it under the sequenced way: with
// the messages on its GRANTS subject after m's sequence taken in, as
// seenBy and a refused publish do (w.mu held).
func (w *world) asRead(mk string, m consumer.Mark) consumer.Mark {
	if !w.sequenced {
		return m
	}
	for subj, msgs := range w.grantMsgs {
		after := m.Grants[subj] // 0 (all) without one
		for _, g := range msgs {
			s := w.specs[g.Key]
			if g.Seq <= after || s.markKey() != mk {
				continue
			}
			switch {
			case m.At.IsZero() || s.at.After(m.At):
				m.At, m.Keys = s.at, []string{s.key}
			case s.at.Equal(m.At) && !slices.Contains(m.Keys, s.key):
				m.Keys = append(slices.Clone(m.Keys), s.key)
			}
		}
	}
	return m
}

// markAgrees reports whether mk's mark m, as the processor reads it
// (asRead), is the newest applied instant of specs and the keys applied
// at it. A key no delivery of its own committed (its holder stopped, or
// was told its publish failed, and its redelivery found it in GRANTS) is
// in the mark only if another event's publish took it in: under the
// sequenced way asRead does that; under a plain publish nothing does, and
// GRANTS alone remembers it. An excused key (in GRANTS, never committed,
// dead-lettered say) may be in it or not (w.mu held).
func (w *world) markAgrees(mk string, m consumer.Mark, specs []spec) bool {
	m = w.asRead(mk, m)
	var reqAt time.Time
	required, optional := map[string]time.Time{}, map[string]time.Time{}
	for _, s := range specs {
		if _, ok := w.published[s.key]; !ok || s.badTime {
			continue
		}
		if w.excused(s.key) || (!w.sequenced && !w.committedByOwn(s.key)) {
			optional[s.key] = s.at
			continue
		}
		required[s.key] = s.at
		if s.at.After(reqAt) {
			reqAt = s.at
		}
	}
	if m.At.Before(reqAt) {
		return false
	}
	for k, at := range required {
		if at.Equal(m.At) && !slices.Contains(m.Keys, k) {
			return false
		}
	}
	for _, k := range m.Keys {
		at, ok := required[k]
		if !ok {
			at, ok = optional[k]
		}
		if !ok || !at.Equal(m.At) {
			return false
		}
	}
	return !m.At.After(reqAt) || len(m.Keys) > 0
}

// committedByOwn: a delivery of k committed it to its mark (w.mu held).
func (w *world) committedByOwn(k string) bool {
	return w.count(k, consumer.Applied) > 0 || w.crashes[k][stepAfterWatermark]+w.crashes[k][stepBeforeAck] > 0
}

// Known processor bugs, each tolerated (unless -prop.strict) only in the exact
// situation that produces it, so everything else stays checked. The
// report that came with this file has a failing test and a patch for each.
const (
	// knownNoneRerun: under ordering none the mark keeps no keys, the
	// applied-key check runs before the lease wait, and the holder
	// releases the lease before it writes APPLIED. So a key that already
	// applied runs its effects again: when two deliveries of it race on
	// two instances (two applied decisions), and after a crash between
	// the commit and APPLIED (then a failing rerun even dead-letters an
	// event that is in GRANTS).
	knownNoneRerun = "ordering-none rerun of an applied key"
	// knownInDoubt: a crash after the effects and before the watermark
	// commit leaves an event in GRANTS that the mark does not know of.
	// Whoever takes the expired lease decides against the old mark: an
	// older event may then be published after it (watermark order
	// broken), and the in-doubt event itself, when redelivered, may be
	// judged stale although it is in GRANTS.
	knownInDoubt = "in-doubt effects after a crash"
	// knownDroppedKey: a crash after the watermark commit and before
	// APPLIED is written, then a newer event moving the mark (which drops
	// the key from Mark.Keys): the redelivery is judged stale although the
	// event was applied, and APPLIED never learns the key.
	knownDroppedKey = "applied key dropped from the mark before APPLIED"
)

// tolerated reports whether a violation by delivery d is the known bug
// named (w.mu held).
func (w *world) tolerated(bug string, d *delivery) bool {
	if *propStrict || d == nil {
		return false
	}
	switch bug {
	case knownNoneRerun:
		return d.spec.provider == provNone && (d.overlapped || w.crashes[d.spec.key][stepAfterWatermark] > 0)
	case knownInDoubt:
		return w.crashes[d.spec.key][stepAfterEffects] > 0
	case knownDroppedKey:
		return w.crashes[d.spec.key][stepAfterWatermark] > 0
	}
	return false
}

// publishedAfter reports whether GRANTS had, before clock, an event of
// s's subject newer than s and published after it (w.mu held).
func (w *world) publishedAfter(s spec, clock int) bool {
	for k, at := range w.published {
		if o := w.specs[k]; o.markKey() == s.markKey() && o.at.After(s.at) && at > w.published[s.key] && at < clock {
			return true
		}
	}
	return false
}

// lateStale excuses a stale decision of k though k is in GRANTS: a holder
// of k crashed after its effects and k's redelivery came after the
// in-doubt wait (actLate), when the subject had moved on without it
// (Options.InDoubtWait); a newer event may have applied since. With
// APPLIED as the memory nothing tells it was applied, as the in-doubt wait
// documents; with GRANTS as the memory, seen finds its message (w.mu
// held).
func (w *world) lateStale(k string) bool {
	return !w.grantsMemory && w.lateCrashes[k] > 0
}

// newerPublished reports whether GRANTS had an event of s's subject newer
// than s before clock (w.mu held).
func (w *world) newerPublished(s spec, clock int) bool {
	for k, at := range w.published {
		if o := w.specs[k]; o.markKey() == s.markKey() && o.at.After(s.at) && at < clock {
			return true
		}
	}
	return false
}

// limitation is the case the contract leaves open, so it is never a
// violation: an attempt published k and crashed before committing it, or
// was told its publish failed (a lost answer, loseTimeout), and that or a
// later attempt of k failed. A failing event does not block its subject
// (newer and older events go on as if k had not applied), and if it ends
// dead-lettered GRANTS cannot take it back (w.mu held).
func (w *world) limitation(k string) bool {
	if w.crashedUncommitted(k) == 0 && w.lostAnswers[k] == 0 {
		return false
	}
	pubAt, ok := w.published[k]
	if !ok {
		return false
	}
	for _, d := range w.decisions[k] {
		if (d.outcome.Decision == consumer.DeadLettered || d.outcome.Decision == consumer.Retry) &&
			d.effectErr != nil && d.clock > pubAt {
			return true
		}
	}
	return false
}

// inDoubtNewer reports whether publishing an event after o's (o newer,
// same subject) is excused: o was published by an attempt that crashed
// before committing it, and nothing committed o since (w.mu held).
//
// A publish reported failed though stored (loseTimeout) leaves o the same
// way, without a crash: the failure releases the subject. Only a
// sequenced publish then finds o (and supersedes the older event); a
// plain one cannot, so there it is excused.
//
// So does a holder's crash whose redelivery came late (actLate): after the
// in-doubt wait the subject moves on without it (Options.InDoubtWait),
// and a plain publish cannot find it either.
func (w *world) inDoubtNewer(o spec) bool {
	if w.committed[o.markKey()].At.Before(o.at) && !w.sequenced && w.lostAnswers[o.key]+w.lateCrashes[o.key] > 0 {
		return true
	}
	uncommitted := w.crashedUncommitted(o.key) > 0 && w.committed[o.markKey()].At.Before(o.at)
	return uncommitted && (w.limitation(o.key) || w.tolerated(knownInDoubt, &delivery{spec: o}))
}

// excused: k is in GRANTS but no delivery ever committed it to its mark,
// by the limitation or a tolerated known bug (w.mu held).
func (w *world) excused(k string) bool {
	if w.committedByOwn(k) || w.count(k, consumer.AlreadyApplied) > 0 {
		return false // committed
	}
	if w.limitation(k) {
		return true
	}
	pubAt := w.published[k]
	for _, d := range w.decisions[k] {
		if d.outcome.Decision == consumer.Stale && d.clock > pubAt &&
			(w.lateStale(k) || w.tolerated(knownInDoubt, d) || w.tolerated(knownDroppedKey, d)) {
			return true
		}
	}
	return false
}

// crashedUncommitted counts the crashes of key's holders between its
// publish and its commit: after the effects, or after remembering the
// key, which under GRANTS memory remembers nothing more. A takeover of the
// lease settles them, but after the in-doubt wait another event may have
// taken the lease first (w.mu held).
func (w *world) crashedUncommitted(key string) int {
	return w.crashes[key][stepAfterEffects] + w.crashes[key][stepAfterRemember]
}

func (w *world) crashedAfterEffects(key string) int {
	n := 0
	for step, c := range w.crashes[key] {
		if step != stepBeforeEffects {
			n += c
		}
	}
	return n
}

// crashedHolding reports whether l was left by a delivery that crashed
// holding it (right before or right after its effects).
func (w *world) crashedHolding(l *consumer.Lease) bool {
	for _, d := range w.dels {
		if d.owner == l.Owner && d.spec.key == l.Key && d.outcome.Decision == crashedOutcome &&
			(d.crashedAt == stepBeforeEffects || d.crashedAt == stepAfterEffects) {
			return true
		}
	}
	return false
}

func (w *world) count(key, decision string) int {
	n := 0
	for _, d := range w.decisions[key] {
		if d.outcome.Decision == decision {
			n++
		}
	}
	return n
}

func (w *world) fmtDecisions(key string) string {
	var out []string
	for _, d := range w.decisions[key] {
		out = append(out, fmt.Sprintf("#%d %s", d.id, d.outcome.Decision))
	}
	return "[" + strings.Join(out, ", ") + "]"
}

func (w *world) violatef(format string, args ...any) {
	w.violations = append(w.violations, fmt.Sprintf(format, args...))
}

func (w *world) tracef(format string, args ...any) {
	w.trace = append(w.trace, fmt.Sprintf(format, args...))
}

func (w *world) traceTail() string {
	t := w.trace
	if len(t) > 60 {
		t = t[len(t)-60:]
	}
	return "  " + strings.Join(t, "\n  ")
}

func fmtAt(s spec) string {
	if s.badTime {
		return "bad-time"
	}
	return s.at.Format(time.TimeOnly)
}

func fmtMarkPtr(m *consumer.Mark) string {
	if m == nil {
		return "(none read)"
	}
	return fmtMark(*m)
}
