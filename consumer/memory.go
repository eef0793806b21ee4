package consumer

import (
	"context"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Where a rule remembers its applied keys for the dedup horizon.
//
// A watermark rule whose last effect publishes to GRANTS, on a subject
// that names the event's {subject}, already leaves a durable record of
// every key it applied: the GRANTS message (Nats-Msg-Id = key, the stream
// kept for the horizon), published before the mark commits. Such a rule
// asks GRANTS whether a key was applied and writes nothing more; every
// other rule (ordering none, no publish, a template without {subject})
// uses the APPLIED bucket. That spares the hot path one stored write of
// four per event, a new KV subject per key (its index and memory) with it.
//
// The guarantees stay those of APPLIED: a key in a mark was published
// before the commit that put it there, so a key a later commit drops is
// in GRANTS; a takeover of a lease naming the key sees its message and
// commits without running the effects again. What GRANTS cannot answer
// (the message removed by an operator, a template changed since) reads as
// "not applied": under watermark ordering such an event is older than its
// mark and judged stale, never applied twice.

// grantsMemory is a rule's GRANTS publish used as its applied-key memory.
type grantsMemory struct {
	tmpl string
	idx  GrantsIndex
}

// grantsClockSlack widens the lookup back from the gateway's ReceivedAt:
// GRANTS stamps messages with the NATS server's clock, which may run
// behind the gateway host's.
const grantsClockSlack = 10 * time.Minute

// searchableGrants returns r's GRANTS publish when it is r's last effect
// (GRANTS then holds only events whose every effect succeeded) and its
// store can be searched; else nil.
func searchableGrants(r Rule) *grantsMemory {
	g, ok := r.lastGrants()
	if !ok {
		return nil
	}
	idx, ok := g.Grants.(GrantsIndex)
	if !ok {
		return nil
	}
	return &grantsMemory{tmpl: g.Template, idx: idx}
}

// lastGrants returns r's GRANTS publish when it is r's last effect.
func (r Rule) lastGrants() (GrantsEffect, bool) {
	if len(r.Effects) == 0 {
		return GrantsEffect{}, false
	}
	g, ok := r.Effects[len(r.Effects)-1].(GrantsEffect)
	return g, ok
}

// grantsMemoryOf returns r's GRANTS memory, or nil when r uses APPLIED.
func grantsMemoryOf(r Rule) *grantsMemory {
	if gm := searchableGrants(r); gm != nil && r.Watermark && strings.Contains(gm.tmpl, "{subject}") {
		return gm
	}
	return nil
}

// has reports whether GRANTS holds ev's message.
func (gm *grantsMemory) has(ctx context.Context, ev Event) (bool, error) {
	return gm.idx.HasGrant(ctx, RenderSubject(gm.tmpl, ev), ev.Key, grantsSince(ev))
}

// AppliedInGrants reports whether r remembers applied keys by its GRANTS
// messages rather than in the APPLIED bucket (see above).
func (r Rule) AppliedInGrants() bool { return grantsMemoryOf(r) != nil }

// seen reports whether ev's key was applied within the horizon.
func (p *Processor) seen(ctx context.Context, ev Event) (bool, error) {
	gm := p.memory[ev.Provider]
	if gm == nil {
		return p.applied.Seen(ctx, ev.Key)
	}
	return gm.has(ctx, ev)
}

// seenBy is seen, told by mark (the subject's, as just read; nil: none)
// where it can. An event of the mark's own instant, under a rule that
// publishes the sequenced way, was applied when the mark keeps its key
// (committed), or when its message is among those published on its GRANTS
// subject since the mark's last commit there (uncommitted: a holder that
// published it and stopped or failed before committing): every message
// published there before that sequence was committed, or taken into the
// mark by the publish that found it (sequenced.go). That reads what is
// usually no message, where seen reads every message of the GRANTS
// subject since the event came in, one request each: with events of one
// subject sharing an instant (occurred_at in whole seconds, a busy
// subject) each cost as many requests as the subject had messages in the
// last minutes (300 events of one subject at one instant: applied at
// about 140 a second). Older events still need seen: their messages were
// committed long ago.
func (p *Processor) seenBy(ctx context.Context, ev Event, rule Rule, mark *Mark) (seen, uncommitted bool, err error) {
	if mark == nil || !ev.OccurredAt.Equal(mark.At) || p.memory[ev.Provider] == nil {
		seen, err = p.seen(ctx, ev)
		return seen, false, err
	}
	if slices.Contains(mark.Keys, ev.Key) {
		return true, false, nil
	}
	sg := sequencedOf(rule)
	if sg == nil {
		seen, err = p.seen(ctx, ev)
		return seen, false, err
	}
	subj := RenderSubject(sg.tmpl, ev)
	after, ok := mark.Grants[subj]
	if !ok {
		// Not kept (maxMarkGrants): nothing tells where the commits end.
		seen, err = p.seen(ctx, ev)
		return seen, false, err
	}
	found := false
	err = sg.store.ScanGrants(ctx, subj, after, time.Time{}, math.MaxUint64, func(g GrantMsg) {
		found = found || g.Key == ev.Key
	})
	return found, found, err
}

// grantsSince is where a search of GRANTS for ev starts.
func grantsSince(ev Event) time.Time {
	if ev.ReceivedAt.IsZero() {
		return time.Time{}
	}
	return ev.ReceivedAt.Add(-grantsClockSlack)
}

// inGrants reports whether ev is in GRANTS, for a rule whose last effect
// publishes there to a store that can be searched (else false). A search
// on a subject many events share stops after its bound (see HasGrant) and
// may answer false; the effects then run again, deduplicated downstream
// by the key.
func (p *Processor) inGrants(ctx context.Context, r Rule, ev Event) (bool, error) {
	gm := searchableGrants(r)
	if gm == nil {
		return false, nil
	}
	return gm.has(ctx, ev)
}

// remember records ev's key as applied; a no-op where the GRANTS publish
// (an effect that already succeeded) is the record.
func (p *Processor) remember(ctx context.Context, ev Event) error {
	if p.memory[ev.Provider] != nil {
		return nil
	}
	return p.applied.Remember(ctx, ev.Key)
}

// seenElsewhere reports whether ev's key was applied according to the
// memory ev's rule does not use, and says where it was found ("" when
// not): the provider's ordering changed (none to watermark or back), and
// the events applied before are remembered where the rule then kept them
// (APPLIED under none, GRANTS under a watermark rule that publishes per
// subject); or, under none, the key left APPLIED with the horizon while
// GRANTS still holds the event. A key in either was applied: APPLIED is
// written after the effects, and GRANTS holds an event only once its last
// effect, the publish, succeeded. Read by the operator's commands
// (ProcessOnce, Judge), where `replay` promised never to apply an event
// twice and applied and forwarded every event again after such a change
// (review AH); the live consumer does not pay it per event (README).
func (p *Processor) seenElsewhere(ctx context.Context, r Rule, ev Event) (string, error) {
	if p.memory[ev.Provider] != nil {
		if p.applied == nil {
			return "", nil
		}
		seen, err := p.applied.Seen(ctx, ev.Key)
		if !seen || err != nil {
			return "", err
		}
		return "found in APPLIED: applied while the provider's ordering was none", nil
	}
	if r.Watermark {
		// A watermark rule that remembers in APPLIED (its template names
		// no {subject}): GRANTS was never a memory under that template,
		// and an event a stopped holder published there is the lease
		// takeover's to settle (commit the mark, record it applied), which
		// an early answer here would skip (review AK).
		return "", nil
	}
	if p.applied != nil {
		// In APPLIED, the rule's own memory: the rules decide it there
		// (already-applied), without a search of GRANTS, and without
		// writing its entry again (review BH: the line said "no longer in
		// APPLIED" of a key that was, and the write restarted its TTL).
		if seen, err := p.applied.Seen(ctx, ev.Key); seen || err != nil {
			return "", err
		}
	}
	seen, err := p.inGrants(ctx, r, ev)
	if err != nil {
		return "", err
	}
	if seen {
		return "found in GRANTS: its key is no longer in APPLIED (past the horizon, or applied while the provider's ordering was watermark)", nil
	}
	return p.inMarkGrants(ctx, r, ev)
}

// inMarkGrants looks for ev where its subject's mark says the subject's
// events were published: a watermark rule that published per subject
// kept applied keys there only, and a rule changed since to ordering none
// with another publish template (or none) renders other GRANTS subjects,
// so inGrants missed them and replay applied such events a second time
// (a replay audit, stop 39). The mark's keys at its instant count too.
func (p *Processor) inMarkGrants(ctx context.Context, r Rule, ev Event) (string, error) {
	if ev.Subject == "" || p.marks == nil {
		return "", nil
	}
	mark, rev, err := p.marks.Get(ctx, MarkKey(ev))
	if err != nil || rev == 0 {
		return "", err
	}
	if slices.Contains(mark.Keys, ev.Key) {
		return "found in WATERMARKS: applied at its subject's mark while the provider's ordering was watermark", nil
	}
	idx := p.opts.GrantsIndex
	own := ""
	if gm := searchableGrants(r); gm != nil {
		own = RenderSubject(gm.tmpl, ev) // searched already
		if idx == nil {
			idx = gm.idx
		}
	}
	if idx == nil {
		return "", nil
	}
	subjects := slices.Sorted(maps.Keys(mark.Grants))
	for _, subj := range subjects {
		if subj == own {
			continue
		}
		found, err := idx.HasGrant(ctx, subj, ev.Key, grantsSince(ev))
		if err != nil {
			return "", err
		}
		if found {
			return "found in GRANTS on " + subj + ": applied while the provider published there (its ordering or publish template changed since)", nil
		}
	}
	return "", nil
}
