package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/hookgate/hookgate/event"
)

// failed handles an effect error: dead-letter when permanent or out of
// attempts, else retry after backoff.
func (p *Processor) failed(ctx context.Context, m *Message, err error) Outcome {
	if errors.Is(err, ErrPermanent) || p.attempt(m) >= p.opts.MaxDeliver {
		status := 0
		var fe *ForwardError
		if errors.As(err, &fe) {
			// The AUDIT record's status, "HTTP status where there is
			// one": the receiver's answer (review AB: only in the reason).
			status = fe.Status
			// Why it refused goes on the letter only (see
			// ForwardError.Response); a copy, so the delivery's own
			// headers stay as stored.
			h := m.Event.Header.Clone()
			if h == nil {
				h = make(map[string][]string, 1)
			}
			if fe.Response != "" {
				h.Set(event.HeaderDlqResponse, fe.Response)
			} else {
				h.Del(event.HeaderDlqResponse)
			}
			m.Event.Header = h
		}
		return p.deadLetter(ctx, m, err.Error(), status)
	}
	return p.retry(m, err, true)
}

func (p *Processor) retry(m *Message, err error, counted bool) Outcome {
	if !counted {
		// Infrastructure trouble: Process tries again in place first. A
		// kept event found still waiting for the same reason said so when
		// it was first kept.
		level := slog.LevelWarn
		if m.waits > 0 && err.Error() == m.lastRetry {
			level = slog.LevelDebug
		}
		m.lastRetry = err.Error()
		p.log.LogAttrs(context.Background(), level, "event not decided yet", slog.String("provider", m.Event.Provider), slog.String("key", m.Event.Key),
			slog.Int("deliveries", m.Deliveries), slog.String("error", err.Error()))
		return Outcome{Decision: Retry, Reason: err.Error(), transient: true, lasting: errors.Is(err, ErrStoreFull)}
	}
	n := p.attempt(m)
	d := p.backoff(n)
	// The receiver may ask for longer (Retry-After on a 429 or 503):
	// honoured up to the longest wait the operator configured, never
	// shortening the backoff's own (jittered) wait.
	d = max(d, min(retryAfter(err), slices.Max(p.opts.Backoff)))
	if m.stopping() {
		// Cut short by the stop: the delay is not waited out here, the
		// event comes back at the next start (it read as a retry "in
		// 1.1s" just before "hookgate stopped"; a logs audit, stop 38).
		p.log.Debug("event handed back at the stop; it is delivered again at the next start", slog.String("provider", m.Event.Provider),
			slog.String("key", m.Event.Key), slog.String("error", err.Error()))
	} else {
		// The event's stable keys, as the dead-letter line has them (audit
		// 42: provider and key alone).
		ev, deliveries, why := m.Event, m.Deliveries, err.Error()
		line := func(suppressed int) {
			p.log.Warn("event will be retried", slog.String("provider", ev.Provider), slog.String("account", ev.Account),
				slog.String("key", ev.Key), slog.String("subject", ev.Subject), slog.Uint64("seq", ev.Seq),
				slog.String("decision", Retry), slog.Int("attempt", n), slog.Int("deliveries", deliveries), slog.Duration("delay", d),
				slog.String("error", why), slog.Int("suppressed", suppressed))
		}
		if ok, held := p.retryLines.AllowOrLater(ev.Provider, p.opts.Now(), line); ok {
			line(held)
		}
	}
	p.nak(m, d)
	return Outcome{Decision: Retry, Reason: err.Error()}
}

// retryAfter is the delay a forward's receiver asked for, 0 when none.
func retryAfter(err error) time.Duration {
	var fe *ForwardError
	if errors.As(err, &fe) {
		return fe.RetryAfter
	}
	return 0
}

func (p *Processor) nak(m *Message, d time.Duration) {
	if err := m.Delivery.NakWithDelay(d); err != nil {
		p.log.Warn("nak failed; redelivery after ack wait", slog.String("key", m.Event.Key), slog.String("error", err.Error()))
	}
}

// storeTroubleMax bounds how long one delivery is tried again in place
// for ErrStoreUnavailable: a cause that does not pass (a permission the
// NATS user lacks on a GRANTS subject reads as no answer in time) would
// otherwise hold its subject, and a worker for most of each second, for
// good. Past it the failure is an attempt, retried with backoff and in
// the end dead-lettered (found by review).
const storeTroubleMax = 30 * time.Minute

// storeTrouble reports err as the store's trouble that m may still wait
// out in place, and marks when m's first such failure came.
func (p *Processor) storeTrouble(m *Message, err error) bool {
	if !errors.Is(err, ErrStoreUnavailable) {
		return false
	}
	now := p.opts.Now()
	if m.storeTroubleSince.IsZero() {
		m.storeTroubleSince = now
	}
	return now.Sub(m.storeTroubleSince) < storeTroubleMax
}

// withOp prefixes err with op unless its text starts with it already (a
// store names the operation itself): "publish S: publish S: ..." read as
// two failures (a resource audit, stop 39).
func withOp(op string, err error) error {
	if strings.HasPrefix(err.Error(), op) {
		return err
	}
	return fmt.Errorf("%s: %w", op, err)
}

// backoff is the delay before the retry after attempt n (1-based), with
// +-20% jitter so a burst of failures does not come back in lockstep.
func (p *Processor) backoff(n int) time.Duration {
	i := n - 1
	if i >= len(p.opts.Backoff) {
		i = len(p.opts.Backoff) - 1
	}
	if i < 0 {
		i = 0
	}
	d := p.opts.Backoff[i]
	j := time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
	if j <= 0 {
		j = d
	}
	return j
}

// deadLetter writes m's letter with reason; status is the HTTP status of
// the failure (a forward's answer) for the AUDIT record, 0 when none.
func (p *Processor) deadLetter(ctx context.Context, m *Message, reason string, status int) Outcome {
	letter, err := p.dlq.DeadLetter(ctx, m.Event, reason, m.Deliveries)
	if errors.Is(err, ErrLeftToConsumer) {
		return Outcome{Decision: Retry, Reason: reason + "; not dead-lettered: " + err.Error()}
	}
	if err != nil {
		m.letter, m.letterStatus = reason, status
		return p.retry(m, withOp("dead-letter", err), false)
	}
	p.recordStatus(m.Event, event.DecisionDeadLettered, reason, status)
	m.letterSeq = letter
	return p.ack(ctx, m, Outcome{Decision: DeadLettered, Reason: reason})
}

func (p *Processor) ack(ctx context.Context, m *Message, out Outcome) Outcome {
	// Logged before the ack, so whoever sees the ack sees the line too.
	// A dead letter needs an operator; the other decisions are routine and
	// in AUDIT, so they are debug (see config.Log).
	level, msg := slog.LevelDebug, "event"
	attrs := []slog.Attr{slog.String("provider", m.Event.Provider), slog.String("account", m.Event.Account),
		slog.String("key", m.Event.Key), slog.String("subject", m.Event.Subject), slog.Uint64("seq", m.Event.Seq),
		slog.String("decision", out.Decision), slog.String("reason", out.Reason)}
	if out.Decision == DeadLettered {
		// Says what happened and what to do without reading the fields
		// (a metrics and logs audit, stop 38: the message was "event").
		// "letter" is the DLQ sequence the dlq commands take ("seq" is
		// the event's in WEBHOOKS; an operations audit, stop 41).
		msg = "event dead-lettered: 'hookgate dlq show LETTER' shows it, 'hookgate dlq replay LETTER' re-feeds it once the cause is fixed"
		attrs = append(attrs, slog.Uint64("letter", m.letterSeq))
		// At most a few a second per provider, as the retry lines: a
		// receiver down for long wrote one a dead letter (15k lines in a
		// soak audit, stop 40); AUDIT and DLQ hold every one.
		// One held back is at debug now, and the last of a second's is
		// written at warn at its end, standing for them all, unless a
		// later line carried the count (LineLimit.AllowOrLater).
		kept := slices.Clone(attrs)
		later := func(suppressed int) {
			p.log.LogAttrs(context.Background(), slog.LevelWarn, msg, append(kept, slog.Int("suppressed", suppressed))...)
		}
		if ok, held := p.letterLines.AllowOrLater(m.Event.Provider, p.opts.Now(), later); ok {
			level = slog.LevelWarn
			attrs = append(attrs, slog.Int("suppressed", held))
		}
	}
	p.log.LogAttrs(ctx, level, msg, attrs...)
	p.handBacks.done(m.Event.Seq)
	if err := m.Delivery.Ack(ctx); err != nil {
		// Redelivery will find the key applied (or the event stale).
		p.log.Warn("ack failed", slog.String("key", m.Event.Key), slog.String("error", err.Error()))
	}
	return out
}
