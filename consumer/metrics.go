package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the consumer's Prometheus series.
type Metrics struct {
	events  *prometheus.CounterVec
	seconds *prometheus.HistogramVec
	// Pending is the durable consumer's lag (messages not yet delivered
	// plus delivered and not yet acked), set by the runner.
	Pending prometheus.Gauge
	// Applying is 1 while this instance applies events: on a cluster, while
	// it holds the consumer lock (its standbys report 0).
	Applying prometheus.Gauge
	// Expired counts stored events that left WEBHOOKS at its max_age
	// before they were delivered, so were never applied: lost.
	Expired prometheus.Counter
}

// NewMetrics registers the consumer's series on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookgate_consumer_events_total",
			Help: "Deliveries by provider and decision (applied, stale, already-applied, dead-lettered, retry).",
		}, []string{"provider", "decision"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hookgate_consumer_processing_seconds",
			Help:    "Time to decide and apply one delivery.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 14),
		}, []string{"provider"}),
		Pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hookgate_consumer_pending",
			Help: "Events stored but not yet applied (consumer lag).",
		}),
		Applying: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hookgate_consumer_applying",
			Help: "1 while this instance applies events (on a cluster: holds the consumer lock), else 0.",
		}),
		Expired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookgate_consumer_events_expired_total",
			Help: "Stored events that left WEBHOOKS at retention.webhooks.max_age before they were applied (lost).",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.events, m.seconds, m.Pending, m.Applying, m.Expired)
	}
	return m
}

// zero creates provider's series for decision at 0.
func (m *Metrics) zero(provider, decision string) {
	if m != nil {
		m.events.WithLabelValues(provider, decision)
	}
}

func (m *Metrics) observe(provider, decision string, d time.Duration) {
	if m == nil {
		return
	}
	// The histogram first: a scrape that sees the decision counted sees
	// its time too (one between the two lines saw the count without the
	// histogram's family: a CI run's TestReviewAOReadmeMetricsExist).
	m.seconds.WithLabelValues(provider).Observe(d.Seconds())
	m.events.WithLabelValues(provider, decision).Inc()
}

// ForwardMetrics observes the forward effect: latency and status class.
type ForwardMetrics struct {
	seconds *prometheus.HistogramVec // provider, class
}

// NewForwardMetrics registers hookgate_forward_seconds on reg.
func NewForwardMetrics(reg prometheus.Registerer) *ForwardMetrics {
	m := &ForwardMetrics{seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hookgate_forward_seconds",
		Help:    "Forward effect latency by provider and outcome class (2xx, 3xx, 4xx, 5xx, timeout, error).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
	}, []string{"provider", "class"})}
	if reg != nil {
		reg.MustRegister(m.seconds)
	}
	return m
}

// Wrap returns e instrumented: each Apply is timed and classed. A Pauser
// stays one.
func (m *ForwardMetrics) Wrap(provider string, e Effect) Effect {
	return timedEffect{m: m, provider: provider, e: e}
}

type timedEffect struct {
	m        *ForwardMetrics
	provider string
	e        Effect
}

func (t timedEffect) Apply(ctx context.Context, ev Event) error {
	start := time.Now()
	err := t.e.Apply(ctx, ev)
	t.m.seconds.WithLabelValues(t.provider, forwardClass(err)).Observe(time.Since(start).Seconds())
	return err
}

func (t timedEffect) PausedUntil(now time.Time, limit time.Duration) (time.Time, bool) {
	if p, ok := t.e.(Pauser); ok {
		return p.PausedUntil(now, limit)
	}
	return time.Time{}, false
}

func (t timedEffect) PauseEnd(now time.Time, limit time.Duration) time.Time {
	if p, ok := t.e.(Pauser); ok {
		return p.PauseEnd(now, limit)
	}
	return time.Time{}
}

// forwardClass names the outcome of a forward for metrics.
func forwardClass(err error) string {
	if err == nil {
		return "2xx"
	}
	var fe *ForwardError
	if errors.As(err, &fe) && fe.Status > 0 {
		return fmt.Sprintf("%dxx", fe.Status/100)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	return "error"
}
