package gateway

import (
	"github.com/hookgate/hookgate/event"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the gateway's Prometheus series, registered on the registry
// passed in (never the global one).
type metrics struct {
	requests        *prometheus.CounterVec   // provider, decision
	unknownProvider prometheus.Counter       //
	publishSeconds  *prometheus.HistogramVec // provider, outcome
	requestSeconds  *prometheus.HistogramVec // provider
	auditSuppressed *prometheus.CounterVec   // provider
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookgate_gateway_requests_total",
			Help: "Webhook requests by provider and decision (accepted, duplicate, rejected, rate-limited, unavailable).",
		}, []string{"provider", "decision", "status"}),
		unknownProvider: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookgate_gateway_unknown_provider_total",
			Help: "Webhook requests for a provider that is not configured, or to a path under /webhooks that is no route (404).",
		}),
		publishSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hookgate_gateway_publish_seconds",
			Help:    "Time from publish to JetStream ack, by provider and outcome.",
			Buckets: []float64{.0002, .0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30},
		}, []string{"provider", "outcome"}),
		requestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hookgate_gateway_request_seconds",
			Help: "Time to answer a webhook request, by provider.",
			// Up to the write timeout's default (30 s): a publish may wait
			// that long less a second, and a slow store's answers all fell
			// in +Inf past 10 s (review AO).
			Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30},
		}, []string{"provider"}),
		auditSuppressed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookgate_gateway_audit_suppressed_total",
			Help: "Rejected-request audit records held back by the per-provider limit: each is folded into a later record's suppressed count, or, the last of a burst, written about a second later.",
		}, []string{"provider"}),
	}
	reg.MustRegister(m.requests, m.unknownProvider, m.publishSeconds, m.requestSeconds, m.auditSuppressed)
	return m
}

// providerMetrics are one provider's series on the success path, resolved
// once at start: a label lookup per request costs more than the update.
type providerMetrics struct {
	requestSeconds                  prometheus.Observer
	publishStored, publishDuplicate prometheus.Observer
	accepted, duplicate             prometheus.Counter
}

func (m *metrics) forProvider(name string) providerMetrics {
	// The series an alert watches exist from the start, at 0: one first
	// exported at the first 503 already holds its value, and rate() sees
	// no rise (review Z: the first outage, and every one between two
	// scrapes, went unnoticed).
	m.requests.WithLabelValues(name, "unavailable", "503")
	// And those of a 401 storm (a secret rotated on one side only), the
	// likeliest rejection to page for (review AO: they appeared at the
	// first rejection, at 1).
	m.requests.WithLabelValues(name, event.DecisionRejected, "401")
	m.auditSuppressed.WithLabelValues(name)
	return providerMetrics{
		requestSeconds:   m.requestSeconds.WithLabelValues(name),
		publishStored:    m.publishSeconds.WithLabelValues(name, "stored"),
		publishDuplicate: m.publishSeconds.WithLabelValues(name, "duplicate"),
		accepted:         m.requests.WithLabelValues(name, event.DecisionAccepted, "200"),
		duplicate:        m.requests.WithLabelValues(name, event.DecisionDuplicate, "200"),
	}
}
