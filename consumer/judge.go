package consumer

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// BeyondHorizon is Judge's decision for an event stored longer ago than
// the dedup horizon: its applied key may have expired, so whether it was
// applied can no longer be told.
const BeyondHorizon = "beyond-horizon"

// Judge says what Process would decide for ev now, changing nothing: no
// effect runs, no watermark moves, nothing is acknowledged. It is what
// `replay --dry-run` prints. horizon > 0 enables the beyond-horizon check
// against ev.ReceivedAt. The answer is Applied ("apply"), Stale,
// AlreadyApplied, DeadLettered (would be dead-lettered at once) or
// BeyondHorizon.
func (p *Processor) Judge(ctx context.Context, ev Event, horizon time.Duration) (Outcome, error) {
	return p.judgeAs(ctx, ev, horizon, nil)
}

// DryRun judges events in turn as a run that applies them would decide
// them: an event it judges Applied counts as applied for the events after
// it (its key applied, its subject's mark moved), which Judge alone,
// reading the stores as they are, cannot see. Two events of one subject,
// the newer stored first: Judge says both apply, a replay applies the
// first and finds the second stale, and so does a DryRun (review V). It
// changes nothing in the stores. Not safe for concurrent use.
type DryRun struct {
	p       *Processor
	marks   map[string]Mark // by MarkKey: the marks the run's applies moved
	applied map[string]bool // keys the run applied
}

// NewDryRun starts a dry run over p's rules and stores.
func (p *Processor) NewDryRun() *DryRun {
	return &DryRun{p: p, marks: map[string]Mark{}, applied: map[string]bool{}}
}

// Judge is Processor.Judge for ev after the events this dry run judged
// before it.
func (d *DryRun) Judge(ctx context.Context, ev Event, horizon time.Duration) (Outcome, error) {
	return d.p.judgeAs(ctx, ev, horizon, d)
}

// judgeAs is Judge, in dry run d when d is not nil.
func (p *Processor) judgeAs(ctx context.Context, ev Event, horizon time.Duration, d *DryRun) (Outcome, error) {
	if horizon > 0 && !ev.ReceivedAt.IsZero() && p.opts.Now().Sub(ev.ReceivedAt) > horizon {
		age := p.opts.Now().Sub(ev.ReceivedAt)
		shown := age.Round(time.Second)
		if shown <= horizon {
			// Never "stored 1s ago, horizon 1s" (audit 42).
			shown = age.Round(time.Millisecond)
		}
		return Outcome{Decision: BeyondHorizon, Reason: fmt.Sprintf("stored %s ago, horizon %s", shown, horizon)}, nil
	}
	m := &Message{Event: ev}
	p.prepare(m)
	ev = m.Event
	rule, ok := p.rules[ev.Provider]
	if !ok {
		return Outcome{Decision: DeadLettered, Reason: "no rule for provider " + ev.Provider}, nil
	}
	if d != nil && d.applied[ev.Key] {
		return Outcome{Decision: AlreadyApplied}, nil
	}
	seen, err := p.seen(ctx, ev)
	if err != nil {
		return Outcome{}, err
	}
	if seen {
		return Outcome{Decision: AlreadyApplied}, nil
	}
	if where, err := p.seenElsewhere(ctx, rule, ev); err != nil {
		return Outcome{}, err
	} else if where != "" {
		return Outcome{Decision: AlreadyApplied, Reason: where}, nil
	}
	if !rule.Watermark {
		d.apply(ev, Mark{}, false)
		return Outcome{Decision: Applied}, nil
	}
	if why := unorderable(ev); why != "" {
		return Outcome{Decision: DeadLettered, Reason: why}, nil
	}
	key := MarkKey(ev)
	mark, _, err := p.marks.Get(ctx, key)
	if err != nil {
		return Outcome{}, err
	}
	if d != nil {
		// The run's own applies moved the mark past what the store
		// holds, unless the live consumer moved it further meanwhile.
		if m, ok := d.marks[key]; ok && !m.At.Before(mark.At) {
			if m.At.Equal(mark.At) {
				m.Keys = append(slices.Clip(m.Keys), mark.Keys...)
			}
			mark = m
		}
	}
	switch {
	case mark.At.IsZero() || ev.OccurredAt.After(mark.At):
		d.apply(ev, mark, true)
		return Outcome{Decision: Applied}, nil
	case ev.OccurredAt.Equal(mark.At):
		if slices.Contains(mark.Keys, ev.Key) {
			return Outcome{Decision: AlreadyApplied}, nil
		}
		d.apply(ev, mark, true)
		return Outcome{Decision: Applied}, nil
	}
	return Outcome{Decision: Stale, Reason: fmt.Sprintf("occurred_at %s older than watermark %s", ev.OccurredAt.Format(time.RFC3339Nano), mark.At.Format(time.RFC3339Nano))}, nil
}

// apply records ev applied by the dry run (nothing when d is nil): its
// key, and under watermark ordering the mark it leaves.
func (d *DryRun) apply(ev Event, mark Mark, watermark bool) {
	if d == nil {
		return
	}
	d.applied[ev.Key] = true
	if watermark {
		d.marks[MarkKey(ev)] = advance(mark, ev, true)
	}
}

// ProcessOnce runs one event through the rules outside the durable
// consumer (replay, dead-letter re-feed): deliveries is the attempt number
// to report (with MaxDeliver 1, any failure dead-letters at once).
func (p *Processor) ProcessOnce(ctx context.Context, ev Event, deliveries int) Outcome {
	m := &Message{Event: ev, Deliveries: deliveries, Delivery: noDelivery{}}
	p.prepare(m)
	if rule, ok := p.rules[m.Event.Provider]; ok {
		where, err := p.seenElsewhere(ctx, rule, m.Event)
		if err != nil {
			return p.retry(m, fmt.Errorf("read applied keys: %w", err), false)
		}
		if where != "" {
			if p.memory[m.Event.Provider] == nil {
				// Found in GRANTS by a rule that remembers in APPLIED: it
				// is remembered there too from now on.
				if err := p.remember(ctx, m.Event); err != nil {
					return p.retry(m, fmt.Errorf("remember applied key: %w", err), false)
				}
			}
			return p.ack(ctx, m, Outcome{Decision: AlreadyApplied, Reason: where})
		}
	}
	return p.Process(ctx, m)
}

// noDelivery acknowledges nothing: the event is not on a consumer.
type noDelivery struct{}

func (noDelivery) Ack(context.Context) error        { return nil }
func (noDelivery) NakWithDelay(time.Duration) error { return nil }
func (noDelivery) InProgress() error                { return nil }
