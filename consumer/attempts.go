package consumer

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// handBacks counts, per stored event (its WEBHOOKS sequence), the
// deliveries this process handed back without trying the effects: a
// subject in doubt, a store that did not answer, a stop. JetStream counts
// those as deliveries too; consumer.max_deliver and the backoff count
// attempts (the contract), so they are taken off.
//
// Memory only: what another process handed back, or this one before a
// restart, still counts as attempts, so a lost count only errs the old way
// (fewer retries), never retries for ever. Bounded: when full it starts
// over, with the same effect. Safe for concurrent use.
type handBacks struct {
	mu  sync.Mutex
	max int
	m   map[uint64]int
}

func newHandBacks(max int) *handBacks { return &handBacks{max: max, m: make(map[uint64]int)} }

func (h *handBacks) add(seq uint64) {
	if seq == 0 {
		return // not from the stream (a test's event)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.m[seq]; !ok && len(h.m) >= h.max {
		clear(h.m)
	}
	h.m[seq]++
}

func (h *handBacks) get(seq uint64) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[seq]
}

func (h *handBacks) done(seq uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, seq)
}

// attempt is m's attempt number (the first is 1): its delivery number less
// the deliveries this process handed back untried.
func (p *Processor) attempt(m *Message) int {
	return max(m.Deliveries-p.handBacks.get(m.Event.Seq), 1)
}

// handBack gives m back to the stream for another delivery after d,
// untried: it does not count as an attempt. While Run stops, d is
// stopHandBackDelay whatever the caller asked (see there), or none with
// Options.PlainStopHandBack.
func (p *Processor) handBack(m *Message, d time.Duration) {
	p.handBacks.add(m.Event.Seq)
	if !m.stopping() {
		p.nak(m, d)
		return
	}
	delay := stopHandBackDelay
	if p.opts.PlainStopHandBack {
		delay = 0
	}
	c, ok := m.Delivery.(ConfirmedNaker)
	// One budget for the waits of all of a stop's confirmations: a server
	// that does not answer must not hold the stop for stopNakWait per
	// event. Only waiting spends it (a slow event that holds up the
	// hand-backs behind it does not).
	left := stopNakBudget - time.Duration(p.stopNakSpent.Load())
	if !ok || left <= 0 {
		p.nak(m, delay)
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), min(left, stopNakWait))
	defer cancel()
	err := c.NakWithDelayConfirmed(ctx, delay)
	p.stopNakSpent.Add(int64(time.Since(start)))
	if err != nil {
		p.log.Warn("hand back at stop not confirmed; it may wait out the ack wait", slog.String("key", m.Event.Key), slog.String("error", err.Error()))
	}
}

// stopHandBackDelay is the redelivery delay of everything handed back while
// Run stops. Not zero: JetStream keeps a plain negative acknowledgement in
// memory only, so a server restart (the embedded one stops with hookgate)
// would forget it and redeliver the event only after the ack wait, behind
// newer events of its subject that would turn it stale; a delay is written
// with the consumer's state, and the restarted server queues such events
// for redelivery as it takes the consumer up, ahead of anything new, in
// stream order, so in order per subject (checkPending in nats-server's
// consumer.go; jetstream's TestRestartPullsHandedBackEventsBeforeNewerOnes).
// A server that outlives the process (a cluster) gets plain ones instead
// (Options.PlainStopHandBack): a delayed one may come back after the next
// lock holder took newer events.
const stopHandBackDelay = time.Millisecond

// stopNakWait bounds the wait for the server to take one hand-back at a
// stop, stopNakBudget the waits of all of them together: after it the rest
// go unconfirmed.
const (
	stopNakWait   = 2 * time.Second
	stopNakBudget = 5 * time.Second
)
