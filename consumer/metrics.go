package consumer

import (
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
	}
	if reg != nil {
		reg.MustRegister(m.events, m.seconds, m.Pending)
	}
	return m
}

func (m *Metrics) observe(provider, decision string, d time.Duration) {
	if m == nil {
		return
	}
	m.events.WithLabelValues(provider, decision).Inc()
	m.seconds.WithLabelValues(provider).Observe(d.Seconds())
}
