package jetstream_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

type discardAudit struct{}

func (discardAudit) Record(event.AuditRecord) {}

// BenchmarkConsumerDrain is the consumer alone, on a real embedded
// JetStream: b.N events (1 KB, 1000 subjects, times increasing per subject;
// "new-subjects": a subject per event, so no mark is cached, as for most
// events of the end-to-end bench's 32000 subjects) are stored first, then
// the processor applies them (watermark ordering, publish to GRANTS) with
// 8 workers (serve's default) or 32 until GRANTS holds all. It reports events/s, CPU µs per event (the whole process: the
// embedded server is in it) and how many lanes were busy on average.
func BenchmarkConsumerDrain(b *testing.B) {
	for _, workers := range []int{8, 32} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) { benchmarkDrain(b, workers, 1000) })
	}
	b.Run("workers=8/new-subjects", func(b *testing.B) { benchmarkDrain(b, 8, 0) })
}

func benchmarkDrain(b *testing.B, workers, subjects int) {
	if subjects == 0 {
		subjects = b.N
	}
	env := jstest.Start(b, "")
	ctx := context.Background()
	pub := jetstream.NewPublisher(env.Conn, 5*time.Second)
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	body := make([]byte, 1024)
	for i := range body {
		body[i] = 'x'
	}
	for i := range b.N {
		key := fmt.Sprintf("bench:default:evt:%d", i)
		h := nats.Header{}
		h.Set(event.HeaderKey, key)
		h.Set(event.HeaderProvider, "bench")
		h.Set(event.HeaderAccount, "default")
		h.Set(event.HeaderSubject, fmt.Sprintf("G-%d", i%subjects))
		h.Set(event.HeaderOccurredAt, t0.Add(time.Duration(i)*time.Millisecond).Format(time.RFC3339Nano))
		h.Set(event.HeaderType, "grant.updated")
		if _, err := pub.Publish(ctx, jetstream.Message{Subject: "webhooks.bench.default", Key: key, Header: h, Body: body}); err != nil {
			b.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	fx := jetstream.NewEffects(env.Conn)
	rules := map[string]consumer.Rule{"bench": {Watermark: true, OneAccount: true, Effects: []consumer.Effect{consumer.GrantsEffect{Template: config.DefaultPublish, Grants: fx}}}}
	proc := consumer.NewProcessor(rules, env.Marks, env.Applied, fx, discardAudit{}, slog.New(slog.NewTextHandler(io.Discard, nil)), consumer.NewMetrics(reg), consumer.Options{
		Owner: "bench", MaxDeliver: 8, Backoff: []time.Duration{time.Second}, LeaseTTL: 40 * time.Second, InDoubtWait: 80 * time.Second,
	})
	src, err := jetstream.OpenSource(ctx, env.Conn, jetstream.SourceOptions{MaxAckPending: max(workers*16, 128), AckWait: 40 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	grants, err := env.Conn.JS.Stream(ctx, jetstream.StreamGrants)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	start := time.Now()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- proc.Run(runCtx, src, workers) }()
	for {
		info, err := grants.Info(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if info.State.Msgs >= uint64(b.N) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.StopTimer()
	stop()
	src.Stop()
	<-done
	b.ReportMetric(float64(b.N)/took.Seconds(), "events/s")
	// CPU per event is the figure that matters when the gateway shares the
	// machine; busy-lanes says whether the lanes or the store set the pace.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/event")
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "hookgate_consumer_processing_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			b.ReportMetric(h.GetSampleSum()/took.Seconds(), "busy-lanes")
		}
	}
}
