package main

import (
	"github.com/hookgate/hookgate/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// natsCollector reports each of serve's NATS connections: whether it is
// connected, and how often it reconnected (a node lost or left as
// stale, see jetstream.Connect's pings). On a cluster, a connection that
// stays down, or reconnects that keep rising, explain 503s and lag.
type natsCollector struct {
	conns                 func() []*jetstream.Conn
	connected, reconnects *prometheus.Desc
}

func newNATSCollector(conns func() []*jetstream.Conn) *natsCollector {
	label := []string{"connection"}
	return &natsCollector{
		conns:      conns,
		connected:  prometheus.NewDesc("hookgate_nats_connected", "1 while the NATS connection (hookgate-serve: the gateway's and the operator reads', hookgate-consumer: the consumer's) is connected, else 0.", label, nil),
		reconnects: prometheus.NewDesc("hookgate_nats_reconnects_total", "Reconnects of the NATS connection since serve started.", label, nil),
	}
}

func (c *natsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.connected
	ch <- c.reconnects
}

func (c *natsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, conn := range c.conns() {
		name := conn.NC.Opts.Name
		up := 0.0
		if conn.NC.IsConnected() {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.connected, prometheus.GaugeValue, up, name)
		ch <- prometheus.MustNewConstMetric(c.reconnects, prometheus.CounterValue, float64(conn.NC.Stats().Reconnects), name)
	}
}
