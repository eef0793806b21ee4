package consumer

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Source delivers messages; Next blocks until one arrives or ctx ends.
type Source interface {
	Next(ctx context.Context) (*Message, error)
}

// Unreader is a Source that may hold deliveries Next has not returned yet
// (a prefetch buffer). Run calls Unread once, when it stops, to hand those
// back: left alone they would wait out the ack wait while newer events of
// their subjects apply after a restart and turn them stale. After Unread
// the source delivers nothing more.
type Unreader interface {
	Unread() []*Message
}

// Run pulls from src and processes with workers goroutines until ctx ends.
// Events that share a lease (a subject's, or, without a subject, a shard of
// keys: leaseKey) run one at a time, in delivery order, so this process
// never runs a subject's effects concurrently or claims over itself (the
// watermark lease covers other processes). Any free worker takes any other
// event: an event that waits (a slow forward, an in-place retry, another
// holder's lease) holds up only the events of its own subject, which wait
// in memory, kept alive, until it is done. Run returns after every worker
// finished its current event; events waiting behind one are handed back.
func (p *Processor) Run(ctx context.Context, src Source, workers int) error {
	workers = max(workers, 1)
	p.stopNakSpent.Store(0)
	q := &serialQueue{waiting: map[string][]*Message{}, parked: map[string]*Message{}}
	ready := make(chan *Message)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range ready {
				for m != nil {
					// Finish the event even when ctx ends mid-way: a half-run
					// event only costs a redelivery, but finishing is cheaper.
					m.waitFor, m.waitUntil = "", time.Time{}
					p.Process(context.WithoutCancel(ctx), m)
					var rest []*Message
					if m.kept() {
						// Parked at the head of its subject (see
						// Message.parkable); next is the in-doubt event
						// it waits for, if it was queued already.
						m, rest = q.park(m)
					} else {
						m, rest = q.done(m)
					}
					// Stopping: the events queued behind this one never
					// started. Hand them back now rather than let them wait
					// out the ack wait (see stopHandBackDelay: redelivered
					// in stream order, so after the one that ran, which a
					// newer event must not overtake).
					for _, r := range rest {
						p.handBack(r, 0)
					}
					if len(rest) > 0 {
						q.release(rest[0])
					}
				}
			}
		}()
	}
	aliveCtx, stopAlive := context.WithCancel(ctx)
	aliveDone := make(chan struct{})
	go func() {
		defer close(aliveDone)
		q.keepAlive(aliveCtx, keepAlive)
	}()
	// The waker runs a parked event again when its wait is over and the
	// event it waits for has not come.
	wakeCtx, stopWake := context.WithCancel(ctx)
	wakeDone := make(chan struct{})
	go func() {
		defer close(wakeDone)
		every(wakeCtx, parkedPoll, func() {
			for _, m := range q.wake(time.Now()) {
				wakeOne(wakeCtx, q, ready, m)
			}
		})
	}()
	defer func() {
		// From here on each worker hands back what waits behind its event.
		q.stop()
		stopWake()
		<-wakeDone
		// The source's unread deliveries: stop the source first (nothing
		// more comes in). Those of a subject a worker holds go back after
		// the events queued behind it, when the workers are done; the rest
		// at once, so another instance need not wait for this one's slowest
		// event to get them.
		var later []*Message
		if u, ok := src.(Unreader); ok {
			for _, m := range u.Unread() {
				m.stop = ctx.Done()
				if q.held(LeaseKey(m.Event)) {
					later = append(later, m)
					continue
				}
				p.handBack(m, 0)
			}
		}
		close(ready)
		wg.Wait()
		// Parked events and those queued behind them never ran: back
		// first, in order, then the source's unread ones of their subjects.
		for _, m := range q.takeParked() {
			p.handBack(m, 0)
		}
		for _, m := range later {
			p.handBack(m, 0)
		}
		stopAlive() // ctx may still be live: the source failed
		<-aliveDone
	}()
	for {
		m, err := src.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			p.log.Error("consumer source stopped", slog.String("error", err.Error()))
			return err
		}
		p.prepare(m)
		m.stop = ctx.Done()
		m.parkable = true
		if q.add(m) {
			continue // behind its subject's running (or parked) event
		}
		select {
		case ready <- m:
		case <-ctx.Done():
			// Never started: its lease key is free again, or, if m is the
			// event a parked key waited for, parked again (its queue goes
			// back with the parked ones).
			q.abandon(m)
			p.handBack(m, 0)
			return nil
		}
	}
}

// wakeOne hands a parked event whose wait is over to a worker, keeping it
// alive while every worker is busy (it is on no queue keepAlive walks).
func wakeOne(ctx context.Context, q *serialQueue, ready chan<- *Message, m *Message) {
	t := time.NewTicker(keepAlive)
	defer t.Stop()
	for {
		select {
		case ready <- m:
			return
		case <-t.C:
			_ = m.Delivery.InProgress()
		case <-ctx.Done():
			// Stopping before a worker took it: it goes back with its
			// subject's queue, first.
			q.repark(m)
			return
		}
	}
}

// serialQueue keeps the events of one lease key in order behind the one
// a worker runs. Safe for concurrent use.
type serialQueue struct {
	mu sync.Mutex
	// waiting has an entry for every lease key a worker holds or that is
	// parked: the events of that key delivered since, oldest first (a
	// parked key's parked event at the head).
	waiting map[string][]*Message
	// parked has the lease keys whose head event waits for another
	// event's key (Message.waitFor) and no worker runs.
	parked  map[string]*Message
	stopped bool
}

// parkedPoll is how often Run looks for parked events whose wait is over.
const parkedPoll = 100 * time.Millisecond

// add reports whether m was queued behind a running or parked event of its
// lease key; if not, the caller must run m (its key is now held). The event
// a parked key waits for runs at once, ahead of the parked one.
func (q *serialQueue) add(m *Message) bool {
	k := LeaseKey(m.Event)
	q.mu.Lock()
	defer q.mu.Unlock()
	if w, held := q.waiting[k]; held {
		if head := q.parked[k]; head != nil && head.waitFor != "" && head.waitFor == m.Event.Key {
			delete(q.parked, k) // the worker that runs m holds the key
			return false
		}
		q.waiting[k] = append(w, m)
		return true
	}
	q.waiting[k] = nil
	return false
}

// park is called when m has been run and asks to wait (Message.kept): m
// goes back to the head of its lease key's queue. If the event of key
// m.waitFor is queued already, it is taken out and returned as next (the
// caller runs it, then m through done); else the key is parked, held with
// no worker, until add gets that event or wake finds the wait over. After
// stop it is done's rest: m first.
func (q *serialQueue) park(m *Message) (next *Message, rest []*Message) {
	k := LeaseKey(m.Event)
	q.mu.Lock()
	defer q.mu.Unlock()
	w := q.waiting[k]
	if q.stopped {
		q.waiting[k] = nil
		return nil, append([]*Message{m}, w...)
	}
	for i, e := range w {
		if m.waitFor != "" && e.Event.Key == m.waitFor {
			w = append(w[:i:i], w[i+1:]...)
			q.waiting[k] = append([]*Message{m}, w...)
			m.waitFor = ""
			return e, nil
		}
	}
	q.waiting[k] = append([]*Message{m}, w...)
	q.parked[k] = m
	return nil, nil
}

// wake takes the parked events whose wait is over off their keys' queue
// heads, for the caller to run (their keys stay held).
func (q *serialQueue) wake(now time.Time) []*Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	var run []*Message
	for k, m := range q.parked {
		if q.stopped || now.Before(m.waitUntil) {
			continue
		}
		delete(q.parked, k)
		q.waiting[k] = q.waiting[k][1:]
		run = append(run, m)
	}
	return run
}

// repark puts back an event wake took but nobody ran.
func (q *serialQueue) repark(m *Message) {
	k := LeaseKey(m.Event)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.waiting[k] = append([]*Message{m}, q.waiting[k]...)
	q.parked[k] = m
}

// abandon gives up m, which add let run but no worker took: its lease key
// is free again, or parked again behind the events queued for it.
func (q *serialQueue) abandon(m *Message) {
	k := LeaseKey(m.Event)
	q.mu.Lock()
	defer q.mu.Unlock()
	w := q.waiting[k]
	if len(w) == 0 {
		delete(q.waiting, k)
		return
	}
	q.parked[k] = w[0]
}

// takeParked releases the parked keys and returns their events, each key's
// in order.
func (q *serialQueue) takeParked() []*Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	var all []*Message
	for k := range q.parked {
		all = append(all, q.waiting[k]...)
		delete(q.waiting, k)
		delete(q.parked, k)
	}
	return all
}

// done is called when m has been run: it returns the next event of m's
// lease key for the same worker, or nil, releasing the key. After stop it
// returns nil and, in rest, the events that were queued behind m, oldest
// first, none of them started; the key is then released by release.
func (q *serialQueue) done(m *Message) (next *Message, rest []*Message) {
	k := LeaseKey(m.Event)
	q.mu.Lock()
	defer q.mu.Unlock()
	w := q.waiting[k]
	if len(w) == 0 {
		delete(q.waiting, k)
		return nil, nil
	}
	if q.stopped {
		// The key stays held until the caller handed rest back (release):
		// the source's unread events of it go back after them.
		q.waiting[k] = nil
		return nil, w
	}
	next = w[0]
	w[0] = nil
	q.waiting[k] = w[1:]
	return next, nil
}

// release frees the lease key of m after done handed its queue over.
func (q *serialQueue) release(m *Message) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.waiting, LeaseKey(m.Event))
}

// held reports whether a worker runs an event of lease key k (or still
// hands back the events that were queued behind it).
func (q *serialQueue) held(k string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.waiting[k]
	return ok
}

// stop makes done hand over the queued events instead of the next one.
func (q *serialQueue) stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopped = true
}

// keepAlive marks every queued event in progress every interval until ctx
// ends, so an event waiting behind a slow one of its subject is not
// redelivered meanwhile (a redelivery would only queue up behind it again).
// It holds the lock while it does: an event is settled only after done took
// it off the queue, and a progress mark the server got after a negative
// acknowledgement would replace its redelivery delay with the ack wait.
func (q *serialQueue) keepAlive(ctx context.Context, interval time.Duration) {
	every(ctx, interval, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		for _, w := range q.waiting {
			for _, m := range w {
				_ = m.Delivery.InProgress()
			}
		}
	})
}

// every calls fn every interval until ctx ends.
func every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// prepare parses what the gateway stored as raw text.
func (p *Processor) prepare(m *Message) {
	if m.Event.OccurredAt.IsZero() && m.Event.OccurredRaw != "" {
		if t, err := ParseOccurredAt(m.Event.OccurredRaw); err == nil {
			m.Event.OccurredAt = t
		}
	}
}
