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
	if horizon > 0 && !ev.ReceivedAt.IsZero() && p.opts.Now().Sub(ev.ReceivedAt) > horizon {
		return Outcome{Decision: BeyondHorizon, Reason: fmt.Sprintf("stored %s ago, horizon %s", p.opts.Now().Sub(ev.ReceivedAt).Round(time.Second), horizon)}, nil
	}
	m := &Message{Event: ev}
	p.prepare(m)
	ev = m.Event
	rule, ok := p.rules[ev.Provider]
	if !ok {
		return Outcome{Decision: DeadLettered, Reason: "no rule for provider " + ev.Provider}, nil
	}
	seen, err := p.seen(ctx, ev)
	if err != nil {
		return Outcome{}, err
	}
	if seen {
		return Outcome{Decision: AlreadyApplied}, nil
	}
	if !rule.Watermark {
		return Outcome{Decision: Applied}, nil
	}
	if why := unorderable(ev); why != "" {
		return Outcome{Decision: DeadLettered, Reason: why}, nil
	}
	mark, _, err := p.marks.Get(ctx, MarkKey(ev))
	if err != nil {
		return Outcome{}, err
	}
	switch {
	case mark.At.IsZero() || ev.OccurredAt.After(mark.At):
		return Outcome{Decision: Applied}, nil
	case ev.OccurredAt.Equal(mark.At):
		if slices.Contains(mark.Keys, ev.Key) {
			return Outcome{Decision: AlreadyApplied}, nil
		}
		return Outcome{Decision: Applied}, nil
	}
	return Outcome{Decision: Stale, Reason: fmt.Sprintf("occurred_at %s older than watermark %s", ev.OccurredAt.Format(time.RFC3339Nano), mark.At.Format(time.RFC3339Nano))}, nil
}

// ProcessOnce runs one event through the rules outside the durable
// consumer (replay, dead-letter re-feed): deliveries is the attempt number
// to report (with MaxDeliver 1, any failure dead-letters at once).
func (p *Processor) ProcessOnce(ctx context.Context, ev Event, deliveries int) Outcome {
	m := &Message{Event: ev, Deliveries: deliveries, Delivery: noDelivery{}}
	p.prepare(m)
	return p.Process(ctx, m)
}

// noDelivery acknowledges nothing: the event is not on a consumer.
type noDelivery struct{}

func (noDelivery) Ack(context.Context) error        { return nil }
func (noDelivery) NakWithDelay(time.Duration) error { return nil }
func (noDelivery) InProgress() error                { return nil }
