package main

import (
	"context"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// streamCollector reads the streams at each scrape, so alerts can see a
// growing DLQ or WEBHOOKS nearing its max_bytes (where the gateway starts
// answering 503) before a sender does.
type streamCollector struct {
	conn                              *jetstream.Conn
	up, failed, msgs, bytes, maxBytes *prometheus.Desc
	maxAge, oldestUnapplied           *prometheus.Desc
}

func newStreamCollector(conn *jetstream.Conn) *streamCollector {
	label := []string{"stream"}
	return &streamCollector{
		conn:     conn,
		up:       prometheus.NewDesc("hookgate_jetstream_up", "1 when JetStream answered this scrape's stream reads, else 0.", nil, nil),
		failed:   prometheus.NewDesc("hookgate_store_write_failed", "1 once the embedded server's file store stopped writing after a write error (a full disk): nothing is stored until serve starts again (by itself once data_dir has room).", nil, nil),
		msgs:     prometheus.NewDesc("hookgate_stream_messages", "Messages a stream holds (DLQ: letters waiting for an operator).", label, nil),
		bytes:    prometheus.NewDesc("hookgate_stream_bytes", "Bytes a stream holds.", label, nil),
		maxBytes: prometheus.NewDesc("hookgate_stream_max_bytes", "A stream's retention max_bytes (absent without a limit); WEBHOOKS at it answers 503.", label, nil),
		maxAge:   prometheus.NewDesc("hookgate_stream_max_age_seconds", "A stream's retention max_age (absent without a limit); WEBHOOKS deletes events at it, applied or not.", label, nil),
		oldestUnapplied: prometheus.NewDesc("hookgate_consumer_oldest_unapplied_seconds",
			"How long ago the gateway stored the oldest event not yet applied (0 when none waits); at WEBHOOKS's max_age it is deleted unapplied.", nil, nil),
	}
}

func (c *streamCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.up
	ch <- c.failed
	ch <- c.msgs
	ch <- c.bytes
	ch <- c.maxBytes
	ch <- c.maxAge
	ch <- c.oldestUnapplied
}

func (c *streamCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	failed := 0.0
	if c.conn.StoreFailure() != nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(c.failed, prometheus.GaugeValue, failed)
	streams, err := jetstream.ReadStreams(ctx, c.conn)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for _, s := range streams {
		if !s.Exists {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.msgs, prometheus.GaugeValue, float64(s.Messages), s.Name)
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(s.Bytes), s.Name)
		if s.MaxBytes > 0 {
			ch <- prometheus.MustNewConstMetric(c.maxBytes, prometheus.GaugeValue, float64(s.MaxBytes), s.Name)
		}
		if s.MaxAge > 0 {
			ch <- prometheus.MustNewConstMetric(c.maxAge, prometheus.GaugeValue, s.MaxAge.Seconds(), s.Name)
		}
	}
	if oldest, err := jetstream.OldestUnapplied(ctx, c.conn); err == nil {
		age := 0.0
		if !oldest.IsZero() {
			age = time.Since(oldest).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(c.oldestUnapplied, prometheus.GaugeValue, age)
	}
}

// keyIndexCollector reports the gateway's key index (embedded server).
type keyIndexCollector struct {
	keys         func() *jetstream.KeyIndex // nil while an upgrade reads the keys back
	size, behind *prometheus.Desc
}

func newKeyIndexCollector(k func() *jetstream.KeyIndex) *keyIndexCollector {
	return &keyIndexCollector{
		keys:   k,
		size:   prometheus.NewDesc("hookgate_key_index_keys", "Keys the gateway's key index holds (accepted within dedup.horizon).", nil, nil),
		behind: prometheus.NewDesc("hookgate_key_index_behind_seconds", "How long since the key index last knew every event stored in WEBHOOKS (a second or two while it keeps up); past half of dedup.window new events get 503.", nil, nil),
	}
}

func (c *keyIndexCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.size
	ch <- c.behind
}

func (c *keyIndexCollector) Collect(ch chan<- prometheus.Metric) {
	k := c.keys()
	if k == nil {
		return
	}
	st := k.Stats()
	ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(st.Keys))
	ch <- prometheus.MustNewConstMetric(c.behind, prometheus.GaugeValue, st.Behind.Seconds())
}
