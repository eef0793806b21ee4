package consumer_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// reviewZEvents is hookgate_consumer_events_total{provider,decision} in
// reg, and whether that series is exported at all.
func reviewZEvents(t *testing.T, reg *prometheus.Registry, provider, decision string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "hookgate_consumer_events_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if got["provider"] == provider && got["decision"] == decision {
				return m.GetCounter().GetValue(), true
			}
		}
	}
	return 0, false
}

// README's alert for hookgate_consumer_events_total is "`dead-lettered`
// rising". The series of a provider is born at its first dead letter, at
// 1: rate()/increase() see no rise in a series whose first sample is
// already 1, so the first dead letter after a start (often the only
// one: one malformed event) never fires the documented alert. The
// processor knows its providers (its rules) when it is built; the series
// must be there at 0 before the first dead letter.
func TestReviewZDeadLetteredSeriesBornAtFirstDeadLetter(t *testing.T) {
	s := newSeqEnv(t)
	reg := prometheus.NewRegistry()
	p := s.procWith("a", jetstream.NewEffects(s.env.Conn), &auditLog{}, slog.New(slog.NewTextHandler(io.Discard, nil)), consumer.NewMetrics(reg), nil)
	_, existed := reviewZEvents(t, reg, "grants", consumer.DeadLettered)

	// An event without a subject under ordering watermark: dead-lettered at once.
	e := s.event(t, ev{"k1", "G-1", "2026-11-30T10:00:00Z", "a"})
	e.Subject = ""
	if out := p.Process(t.Context(), &consumer.Message{Event: e, Deliveries: 1, Delivery: nopDelivery{}}); out.Decision != consumer.DeadLettered {
		t.Fatalf("setup: decision %q, want %q", out.Decision, consumer.DeadLettered)
	}
	after, _ := reviewZEvents(t, reg, "grants", consumer.DeadLettered)
	if after != 1 {
		t.Fatalf("dead-lettered = %v after one dead letter, want 1", after)
	}
	if !existed {
		t.Fatalf(`scrape before the dead letter: no hookgate_consumer_events_total{provider="grants",decision="dead-lettered"} series; after it: %v. rate() over the two sees no increase: the README's "dead-lettered rising" alert stays silent`, after)
	}
}
