package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// pipeline names what an end-to-end round watches: the stream the
// gateway stores to, its durable consumer, and the stream that consumer
// publishes applied events to.
type pipeline struct {
	Webhooks, Durable, Grants string
}

// pipeline is hookgate's names, or the floor's.
func (c Configuration) pipeline() pipeline {
	if c.Floor {
		return pipeline{Webhooks: FloorStream(0).Name, Durable: FloorDurable, Grants: FloorGrantsStream}
	}
	return pipeline{Webhooks: jetstream.StreamWebhooks, Durable: jetstream.DurableApply, Grants: jetstream.StreamGrants}
}

// e2eMonitor watches GRANTS and the consumer's lag over NATS while the
// end-to-end round runs.
type e2eMonitor struct {
	nc     *nats.Conn
	j      js.JetStream
	names  pipeline
	t0     time.Time
	mu     sync.Mutex
	points []Point
	// edges are samples at the measured window's start and end (mark).
	edges   [2]Point
	marked  [2]bool
	stop    chan struct{}
	stopped chan struct{}
}

func newE2EMonitor(ctx context.Context, port int, token string, names pipeline) (*e2eMonitor, error) {
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", port), nats.Token(token))
	if err != nil {
		return nil, fmt.Errorf("connect to hookgate's NATS: %w", err)
	}
	j, err := js.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	m := &e2eMonitor{nc: nc, j: j, names: names}
	// The consumer is created after the gateway listens: wait for it.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, _, err = m.sample(ctx); err == nil {
			return m, nil
		}
		if time.Now().After(deadline) {
			nc.Close()
			return nil, fmt.Errorf("consumer %s not found: %w", names.Durable, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sample returns GRANTS' message count and the consumer's lag (not yet
// delivered plus delivered and not acked).
func (m *e2eMonitor) sample(ctx context.Context) (applied, lag uint64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := m.j.Stream(ctx, m.names.Grants)
	if err != nil {
		return 0, 0, err
	}
	cons, err := m.j.Consumer(ctx, m.names.Webhooks, m.names.Durable)
	if err != nil {
		return 0, 0, err
	}
	info := cons.CachedInfo()
	return st.CachedInfo().State.Msgs, info.NumPending + uint64(info.NumAckPending), nil
}

// mark samples GRANTS and the lag at the measured window's start or end
// (the load generator's OnWindow), for the applied rate inside it.
// A failed sample leaves the window unmeasured (E2EResult.WindowSeconds
// 0), never a window of zeros.
func (m *e2eMonitor) mark(start bool) {
	t := time.Since(m.t0).Seconds() // the edge, not the answer's arrival
	a, l, err := m.sample(context.Background())
	if err != nil {
		return
	}
	i := 1
	if start {
		i = 0
	}
	m.mu.Lock()
	m.edges[i], m.marked[i] = Point{T: t, Applied: a, Lag: l}, true
	m.mu.Unlock()
}

func (m *e2eMonitor) start() {
	m.t0 = time.Now()
	m.stop, m.stopped = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(m.stopped)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			if a, l, err := m.sample(context.Background()); err == nil {
				m.mu.Lock()
				m.points = append(m.points, Point{T: time.Since(m.t0).Seconds(), Applied: a, Lag: l})
				m.mu.Unlock()
			}
			select {
			case <-m.stop:
				return
			case <-t.C:
			}
		}
	}()
}

// drain is called when the load ends: it waits until the lag is 0 (or
// timeout) and computes the consumer's rates.
func (m *e2eMonitor) drain(ctx context.Context, timeout time.Duration) *E2EResult {
	loadEnd := time.Now()
	r := &E2EResult{LoadSeconds: loadEnd.Sub(m.t0).Seconds()}
	if a, l, err := m.sample(ctx); err == nil {
		r.AppliedDuring = float64(a) / r.LoadSeconds
		r.LagAtLoadEnd = l
	}
	deadline := loadEnd.Add(timeout)
	var stillLag uint64
	var stillSince time.Time
	for {
		a, l, err := m.sample(ctx)
		if err == nil && l == 0 {
			r.Drained = true
			r.Applied = a
			// sample read GRANTS before the lag: events applied in
			// between were missing from a (a run counted 21046 of 21068).
			if a2, _, err := m.sample(ctx); err == nil && a2 > a {
				r.Applied = a2
			}
			break
		}
		if err == nil && l != stillLag {
			stillLag, stillSince = l, time.Now()
		} else if err == nil && r.Stall == "" && time.Since(stillSince) >= stallAfter {
			r.Stall = m.describe(ctx, l, time.Since(loadEnd))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.Applied = a
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	done := time.Now()
	close(m.stop)
	<-m.stopped
	r.DrainSeconds = done.Sub(loadEnd).Seconds()
	r.AppliedRate = float64(r.Applied) / done.Sub(m.t0).Seconds()
	if st, err := m.j.Stream(ctx, m.names.Webhooks); err == nil {
		r.Stored = st.CachedInfo().State.Msgs
	}
	m.mu.Lock()
	r.Timeline = append(r.Timeline, m.points...)
	if m.marked[0] && m.marked[1] && m.edges[1].T > m.edges[0].T {
		w0, w1 := m.edges[0], m.edges[1]
		r.WindowSeconds = w1.T - w0.T
		r.WindowApplied = float64(w1.Applied-w0.Applied) / r.WindowSeconds
		r.WindowLagEnd, r.WindowLagMax = w1.Lag, max(w0.Lag, w1.Lag)
		for _, p := range m.points {
			if p.T >= w0.T && p.T <= w1.T {
				r.WindowLagMax = max(r.WindowLagMax, p.Lag)
			}
		}
	}
	m.mu.Unlock()
	r.Timeline = append(r.Timeline, Point{T: done.Sub(m.t0).Seconds(), Applied: r.Applied})
	for i, p := range r.Timeline {
		for _, q := range r.Timeline[i+1:] {
			if q.T-p.T >= 1 {
				r.AppliedPeak = max(r.AppliedPeak, float64(q.Applied-p.Applied)/(q.T-p.T))
				break
			}
		}
	}
	return r
}

func (m *e2eMonitor) close() { m.nc.Close() }

// stallAfter is how long the lag must stand still in a drain to be
// described as a stall.
const stallAfter = 5 * time.Second

// describe is the consumer's state during a stall.
func (m *e2eMonitor) describe(ctx context.Context, lag uint64, at time.Duration) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cons, err := m.j.Consumer(ctx, m.names.Webhooks, m.names.Durable)
	if err != nil {
		return fmt.Sprintf("lag %d still for %s, %.1fs after the load: %v", lag, stallAfter, at.Seconds(), err)
	}
	i := cons.CachedInfo()
	return fmt.Sprintf("lag %d still for %s, %.1fs after the load: pending %d, ack pending %d, redelivered %d, waiting pulls %d, delivered seq %d, ack floor seq %d",
		lag, stallAfter, at.Seconds(), i.NumPending, i.NumAckPending, i.NumRedelivered, i.NumWaiting, i.Delivered.Stream, i.AckFloor.Stream)
}
