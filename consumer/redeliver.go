package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// ErrSubjectInDoubt: a holder stopped between its subject's claim and
// commit, and the subject waits for that event's redelivery to settle it.
var ErrSubjectInDoubt = errors.New("subject in doubt")

// Redeliver runs f, a rule's forward, for ev, an event already applied
// (replay --redeliver), while holding ev's subject lease: effects for one
// subject never run concurrently, even across instances, and a replay's
// redelivery is one of them (review AN: it POSTed beside serve's forward
// of a newer event of the subject). It waits for a live holder's commit
// (up to its lease), and returns ErrSubjectInDoubt, running nothing, while
// the subject waits for an in-doubt event. The mark is left as it was but
// for the lease, claimed and given back; the lease says Redeliver, so a
// holder that stops meanwhile leaves nothing in doubt. f's error is
// returned as is.
func (p *Processor) Redeliver(ctx context.Context, ev Event, f Effect) error {
	m := &Message{Event: ev, Deliveries: 1, Delivery: noDelivery{}}
	p.prepare(m)
	key := LeaseKey(m.Event)
	watermark := p.rules[ev.Provider].Watermark
	var (
		mark Mark
		rev  uint64
	)
	waiting := false
	for {
		var err error
		if mark, rev, err = p.readMark(ctx, key); err != nil {
			return fmt.Errorf("read watermark: %w", err)
		}
		now := p.opts.Now()
		if l := mark.Lease; l != nil && p.leaseLive(l, now) {
			if !waiting {
				waiting = true
				p.leaseWaitStarts(ev, l)
			}
			if err := p.waitLease(ctx, m, l.Until); err != nil {
				return err
			}
			continue
		}
		// In doubt whichever event the lease names (this one's too: its
		// holder may have stopped before recording it applied, which its
		// redelivery does when it finds the lease), under a watermark
		// rule, as for the consumer (review AP).
		if l := mark.Lease; l != nil && !l.Redeliver && watermark && now.Before(l.Until.Add(p.opts.InDoubtWait)) {
			return fmt.Errorf("%w: it waits for event %s, whose holder stopped before its commit; its redelivery settles it, redeliver after that", ErrSubjectInDoubt, l.Key)
		}
		claimed := mark
		claimed.Lease = &Lease{Owner: p.opts.Owner, Key: ev.Key, Until: now.Add(p.opts.LeaseTTL), Redeliver: true}
		n, err := p.putMark(ctx, key, claimed, rev)
		if errors.Is(err, ErrConflict) {
			continue // the mark moved: read it again
		}
		if err != nil {
			return fmt.Errorf("claim watermark: %w", err)
		}
		rev = n
		break
	}
	ferr := f.Apply(ctx, m.Event)
	// The mark as it was before the claim: an expired lease we claimed
	// over comes back (a dead holder's, past its doubt, is claimed over by
	// the next event as before; one naming its own event lets that
	// event's redelivery settle it by the takeover: review AP), but a
	// stopped replay's redeliver lease, which settles nothing, goes.
	released := mark
	if l := mark.Lease; l != nil && l.Redeliver {
		released.Lease = nil
	}
	// Given back even when ctx ended (a Ctrl-C during the forward): left,
	// the lease would hold the subject until it runs out (review AP).
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for range 3 {
		_, err := p.putMark(rctx, key, released, rev)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrConflict) {
			// It expires by itself (LeaseTTL); the subject waits until then.
			p.log.Warn("release watermark lease", slog.String("key", ev.Key), slog.String("error", err.Error()))
			break
		}
		// The mark changed under the lease (a write on top that kept it):
		// give back what is still ours, leave anything else.
		now, nrev, err := p.readMark(rctx, key)
		if err != nil || now.Lease == nil || !now.Lease.Redeliver || now.Lease.Owner != p.opts.Owner || now.Lease.Key != ev.Key {
			break
		}
		released, rev = now, nrev
		released.Lease = nil
	}
	return ferr
}
