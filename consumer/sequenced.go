package consumer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hookgate/hookgate/event"
)

// Sequenced GRANTS publishes: how a watermark rule publishes each applied
// event to GRANTS exactly once without a horizon-long duplicate window.
//
// A subject's events are applied one at a time (the lease), so the GRANTS
// subject an event publishes to (rendered from a template naming
// {subject}) only ever gets messages from its holders. The mark keeps, per
// such GRANTS subject, the sequence of its last message as of the last
// commit (Mark.Grants), and every publish is conditional on it
// (Nats-Expected-Last-Subject-Sequence). The publish succeeds only when
// nothing was published there since the mark's last commit, so this
// event's message is not there yet. When it fails, a holder published and
// stopped before committing (a crash, an answer lost to a timeout, a
// failure after the publish): the messages since the mark's sequence are
// read. This event's own message among them means it is published
// already; any other of this subject's events found there is taken into
// the mark as applied (it is in GRANTS), so its own redelivery finds it
// applied instead of publishing it again, and an event it supersedes is
// stale. Then the publish is tried again on the new sequence.
//
// Nothing here depends on how long ago the earlier publish was, so GRANTS
// needs no duplicate window longer than a quick retry's (dedup.window);
// each key in a horizon-long one costs memory on every replica and time at
// every restart. Rules that publish elsewhere (ordering none, a template
// without {subject}) share GRANTS subjects between subjects or have no
// lease order; they keep Nats-Msg-Id deduplication, and with them GRANTS
// keeps a horizon-long window (see SequencedTemplate).

// ErrGrantMoved is a sequenced publish refused because the GRANTS
// subject's last message is not the expected one.
var ErrGrantMoved = errors.New("GRANTS subject's last message is not the expected one")

// errSuperseded: a sequenced publish found a newer event of the subject in
// GRANTS, so this one is stale and must not be published after it.
var errSuperseded = errors.New("superseded by an event found in GRANTS")

// GrantMsg is one GRANTS message as a scan reads it.
type GrantMsg struct {
	Seq    uint64
	Key    string      // its Nats-Msg-Id
	Header http.Header // its headers (the Hookgate-* ones of the event)
}

// SequencedGrants is a GRANTS store that publishes conditionally on a
// subject's last message and can read a subject's messages in order. A
// rule's Grants that implements it publishes the sequenced way (above).
type SequencedGrants interface {
	// PublishGrantAfter publishes like Grants.PublishGrant, only if the
	// last message on subject is at sequence last (0: none); else it
	// returns an error wrapping ErrGrantMoved and stores nothing.
	PublishGrantAfter(ctx context.Context, subject, key string, last uint64, header http.Header, body []byte) (uint64, error)
	// LastGrant returns the sequence of subject's last message, 0 if none.
	LastGrant(ctx context.Context, subject string) (uint64, error)
	// ScanGrants calls fn, in order, for subject's messages after
	// sequence after (0: from since, or from the first when since is
	// zero) up to sequence upTo.
	ScanGrants(ctx context.Context, subject string, after uint64, since time.Time, upTo uint64, fn func(GrantMsg)) error
}

// SequencedTemplate reports whether a rule with this ordering and publish
// template publishes the sequenced way (given a store that can), and so
// needs no horizon-long duplicate window in GRANTS: watermark ordering,
// and a template that gives each of the provider's subjects GRANTS
// subjects of their own ({provider} and {subject}, and {account} unless
// every event has the same account). A GRANTS subject shared with other
// subjects would move under a subject's expected sequence with every
// publish of theirs, and each refusal reads their messages.
func SequencedTemplate(watermark, oneAccount bool, tmpl string) bool {
	return watermark && strings.Contains(tmpl, "{provider}") && strings.Contains(tmpl, "{subject}") &&
		(oneAccount || strings.Contains(tmpl, "{account}"))
}

// sequencedOf returns r's GRANTS publish when r publishes the sequenced
// way, else nil.
func sequencedOf(r Rule) *sequencedGrants {
	g, ok := r.lastGrants()
	if !ok || !SequencedTemplate(r.Watermark, r.OneAccount, g.Template) {
		return nil
	}
	s, ok := g.Grants.(SequencedGrants)
	if !ok {
		return nil
	}
	return &sequencedGrants{tmpl: g.Template, store: s}
}

type sequencedGrants struct {
	tmpl  string
	store SequencedGrants
}

// maxMarkGrants bounds Mark.Grants (a subject's events go to one GRANTS
// subject per type). Past it the entry with the oldest sequence goes; the
// next publish to that GRANTS subject then reads back a horizon of it
// (see grantPublish.Apply), and a subject that keeps cycling through more
// types than this pays that read on most events.
const maxMarkGrants = 64

// maxGrantRounds bounds the publish, read, publish rounds of one event; a
// GRANTS subject that keeps moving (holders still publishing after losing
// their lease) is infrastructure trouble (errGrantsMoving), tried again
// later without counting as an attempt.
const maxGrantRounds = 8

// errGrantsMoving: a sequenced publish was refused maxGrantRounds times.
var errGrantsMoving = errors.New("GRANTS subject kept moving")

// grantPublish is the sequenced publish as the last effect of one event:
// it reads and updates the mark the event's lease was claimed on.
type grantPublish struct {
	p    *Processor
	sg   *sequencedGrants
	mark *Mark
	// subject and seq are the published message's, for the commit; after
	// is the sequence its publish was conditional on (0: none).
	subject string
	seq     uint64
	after   uint64
	// found are the subject's events read from GRANTS (other than this
	// one), all taken into the mark: a commit on top of a mark read again
	// takes them in again (see Processor.applyLeased).
	found []Event
	// adopted are those of found that no commit had taken into the mark
	// yet: applied (their holders stopped after the publish, their last
	// effect), recorded so once the mark commits.
	adopted []Event
}

// fold takes the events g found in GRANTS into m, a mark read again after
// the lease was lost. Of the events g would record applied, it keeps those
// that move m: another holder may have found and recorded the rest.
func (g *grantPublish) fold(m Mark) Mark {
	var still []Event
	for _, ev := range g.found {
		next := takeIn(m, ev)
		if moved(m, next) && slices.ContainsFunc(g.adopted, func(a Event) bool { return a.Key == ev.Key }) {
			still = append(still, ev)
		}
		m = next
	}
	g.adopted = still
	return m
}

// takeIn is m with ev, an event found applied in GRANTS, taken in; the
// lease stays.
func takeIn(m Mark, ev Event) Mark {
	next := advance(m, ev, true)
	next.Lease = m.Lease
	return next
}

// moved reports whether advance changed the mark.
func moved(before, after Mark) bool {
	return !after.At.Equal(before.At) || len(after.Keys) != len(before.Keys)
}

// adoptedReason is the AUDIT reason of an event taken into its mark from
// GRANTS.
const adoptedReason = "found in GRANTS: its holder published it and stopped before committing"

// recordAdopted records the events g took into the mark, once that mark
// is committed.
func (g *grantPublish) recordAdopted() {
	if g == nil {
		return
	}
	for _, ev := range g.adopted {
		g.p.record(ev, event.DecisionApplied, adoptedReason)
	}
}

// Apply implements Effect.
func (g *grantPublish) Apply(ctx context.Context, ev Event) error {
	subj := RenderSubject(g.sg.tmpl, ev)
	g.subject = subj
	last, known := g.mark.Grants[subj]
	lease := LeaseKey(ev)
	for range maxGrantRounds {
		seq, err := g.sg.store.PublishGrantAfter(ctx, subj, ev.Key, last, ev.Header, ev.Body)
		if err == nil {
			g.seq, g.after = seq, last
			*g.mark = withGrant(*g.mark, subj, seq)
			return nil
		}
		if !errors.Is(err, ErrGrantMoved) {
			return withOp("publish "+subj, err)
		}
		top, err := g.sg.store.LastGrant(ctx, subj)
		if err != nil {
			return fmt.Errorf("read %s: %w", subj, err)
		}
		// Read what was published since the mark's commit; without a
		// sequence (a subject from before sequenced publishes, a mark an
		// operator deleted, an entry dropped past maxMarkGrants), what the
		// horizon still covers.
		var since time.Time // without a sequence, last is 0
		if h := g.p.opts.Horizon; !known && h > 0 {
			since = g.p.opts.Now().Add(-h - grantsClockSlack)
		}
		ours, from := uint64(0), last
		err = g.sg.store.ScanGrants(ctx, subj, last, since, top, func(m GrantMsg) {
			if m.Key == ev.Key {
				ours = m.Seq
				return
			}
			other, ok := grantEvent(m)
			if !ok || LeaseKey(other) != lease {
				return // another subject's, on a subject the template shares
			}
			next := takeIn(*g.mark, other)
			g.found = append(g.found, other)
			// Recorded when it moves the mark, and read after the mark's
			// sequence (a horizon's read finds committed events too). A
			// settled takeover commits without its sequence, so its event
			// is read again here, already in the mark.
			if known && moved(*g.mark, next) {
				g.adopted = append(g.adopted, other)
			}
			*g.mark = next
		})
		if err != nil {
			return fmt.Errorf("read %s: %w", subj, err)
		}
		*g.mark = withGrant(*g.mark, subj, top)
		last, known = top, true
		if ours != 0 {
			// Everything between from and ours was read and taken in.
			g.seq, g.after = ours, from
			return nil
		}
		if ev.OccurredAt.Before(g.mark.At) {
			return errSuperseded
		}
	}
	return fmt.Errorf("publish %s: %w (refused %d times)", subj, errGrantsMoving, maxGrantRounds)
}

// grantEvent reads what advance needs from a GRANTS message: key, lease
// key fields and occurred_at. ok is false without a parseable time.
func grantEvent(m GrantMsg) (Event, bool) {
	h := map[string][]string(m.Header)
	ev := Event{
		Key:         m.Key,
		Provider:    m.Header.Get(event.HeaderProvider),
		Type:        event.ExtractedValue(h, event.HeaderType),
		Account:     event.ExtractedValue(h, event.HeaderAccount),
		Subject:     event.ExtractedValue(h, event.HeaderSubject),
		OccurredRaw: event.ExtractedValue(h, event.HeaderOccurredAt),
	}
	t, err := ParseOccurredAt(ev.OccurredRaw)
	if err != nil || ev.Key == "" || ev.Subject == "" {
		return Event{}, false
	}
	ev.OccurredAt = t
	return ev, true
}

// pubBase is m's sequence for the GRANTS subject pub published to; ok is
// false without pub or without one.
func pubBase(m Mark, pub *grantPublish) (seq uint64, ok bool) {
	if pub == nil {
		return 0, false
	}
	seq, ok = m.Grants[pub.subject]
	return seq, ok
}

// withGrant returns m with subject's last GRANTS sequence set to seq. The
// map is copied: marks are shared with the cache.
func withGrant(m Mark, subject string, seq uint64) Mark {
	if m.Grants[subject] == seq {
		return m
	}
	g := make(map[string]uint64, len(m.Grants)+1)
	maps.Copy(g, m.Grants)
	g[subject] = seq
	for len(g) > maxMarkGrants {
		oldest := ""
		for s, q := range g {
			if s != subject && (oldest == "" || q < g[oldest]) {
				oldest = s
			}
		}
		delete(g, oldest)
	}
	m.Grants = g
	return m
}
