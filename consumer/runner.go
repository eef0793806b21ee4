package consumer

import (
	"context"
	"hash/maphash"
	"log/slog"
	"sync"
)

// Source delivers messages; Next blocks until one arrives or ctx ends.
type Source interface {
	Next(ctx context.Context) (*Message, error)
}

// Run pulls from src and processes with workers lanes until ctx ends. All
// events of one subject go to the same lane, in delivery order, so they
// never run concurrently in this process (the watermark lease covers other
// processes). Events without a subject are spread by their key's shard. Run returns
// after every lane finished its current event.
func (p *Processor) Run(ctx context.Context, src Source, workers int) error {
	if workers < 1 {
		workers = 1
	}
	seed := maphash.MakeSeed()
	lanes := make([]chan *Message, workers)
	var wg sync.WaitGroup
	for i := range lanes {
		lanes[i] = make(chan *Message, 1)
		wg.Add(1)
		go func(ch <-chan *Message) {
			defer wg.Done()
			for m := range ch {
				// Finish the event even when ctx ends mid-way: a half-run
				// event only costs a redelivery, but finishing is cheaper.
				p.Process(context.WithoutCancel(ctx), m)
			}
		}(lanes[i])
	}
	defer func() {
		for _, ch := range lanes {
			close(ch)
		}
		wg.Wait()
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
		lane := laneOf(seed, m.Event, workers)
		select {
		case lanes[lane] <- m:
		case <-ctx.Done():
			// Taken from the source but never started: hand it back now
			// rather than let it wait out the ack wait while newer events
			// of its subject apply and turn it stale.
			p.handBack(m, 0)
			return nil
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

// laneOf spreads events by the lease they run under: two lanes never hold
// one lease, so this process never claims over itself.
func laneOf(seed maphash.Seed, ev Event, n int) int {
	return int(maphash.String(seed, leaseKey(ev)) % uint64(n))
}
