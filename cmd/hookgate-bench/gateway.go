package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/gateway"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// headerRoom is cmd/hookgate's: what a stored event's headers may add.
const headerRoom = 64 << 10

// runGateway is `hookgate serve` with the gateway role only, wired the way
// cmd/hookgate/serve.go and system.go wire it (embedded server, connect,
// provision, publisher, audit writer, gateway.NewServer, http.Server with
// the config's timeouts), plus net/http/pprof under /debug/pprof/ so the
// harness can take a CPU profile under load. hookgate itself exposes no
// pprof endpoint; this copy is what is profiled. Keep it in step with
// serve.go.
func runGateway(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	path := fs.String("config", "", "config file")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	cfg, err := config.Load(*path, os.Getenv)
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.NATS.URL != "" {
		return errors.New("gateway: only the embedded server is supported here")
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.Log.SlogLevel()}))

	e, err := jetstream.StartEmbedded(jetstream.EmbeddedOptions{
		DataDir:    cfg.NATS.Embedded.DataDir,
		Listen:     cfg.NATS.Embedded.Listen,
		Token:      cfg.NATS.Embedded.Token.Reveal(),
		SyncAlways: cfg.NATS.Embedded.Sync == config.SyncAlways,
		MaxPayload: int32(max(cfg.HTTP.MaxBodyBytes+headerRoom, 1<<20)),
		Limits:     cfg.Retention.TotalMaxBytes(),
		Log:        logger,
	})
	if err != nil {
		return err
	}
	defer e.Shutdown()
	conn, err := jetstream.Connect(jetstream.ConnectOptions{Name: "hookgate-bench-gateway", Embedded: e})
	if err != nil {
		return err
	}
	defer conn.Close()
	lim := func(l config.Limits) jetstream.Limits {
		return jetstream.Limits{MaxAge: l.MaxAge, MaxBytes: l.MaxBytes}
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := jetstream.Provision(pctx, conn.JS, jetstream.StreamsConfig{
		Replicas: cfg.NATS.Replicas, Horizon: cfg.Dedup.Horizon, DedupWindow: cfg.Dedup.Window, KeyIndex: true,
		MaxMsgSize: int32(cfg.HTTP.MaxBodyBytes + headerRoom),
		Webhooks:   lim(cfg.Retention.Webhooks), Grants: lim(cfg.Retention.Grants),
		DLQ: lim(cfg.Retention.DLQ), Audit: lim(cfg.Retention.Audit),
	}); err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	auditFailures := prometheus.NewCounter(prometheus.CounterOpts{Name: "hookgate_audit_write_failures_total", Help: "AUDIT records that could not be written (logged)."})
	reg.MustRegister(auditFailures)
	audit := jetstream.NewAuditWriter(conn, logger, 8192, auditFailures.Inc)
	auditCtx, stopAudit := context.WithCancel(context.Background())
	auditDone := make(chan error, 1)
	go func() { auditDone <- audit.Run(auditCtx) }()
	defer func() { stopAudit(); <-auditDone }()

	// As serve on the embedded server: the key index in front.
	keys, err := jetstream.OpenKeyIndex(ctx, conn, jetstream.KeyIndexOptions{
		Path: filepath.Join(cfg.NATS.Embedded.DataDir, "webhooks-keys.idx"), Horizon: cfg.Dedup.Horizon, Window: cfg.Dedup.Window, Log: logger,
	})
	if err != nil {
		return err
	}
	keysCtx, stopKeys := context.WithCancel(context.Background())
	keysDone := make(chan error, 1)
	go func() { keysDone <- keys.Run(keysCtx) }()
	defer func() { stopKeys(); <-keysDone }()
	h, err := gateway.NewServer(logger, cfg, gateway.Deps{
		Publisher: keys.Publisher(jetstream.NewPublisher(conn, 5*time.Second)),
		Audit:     audit,
		Ready: func(ctx context.Context) error {
			_, err := conn.JS.Stream(ctx, jetstream.StreamWebhooks)
			return err
		},
		Registry: reg,
		Gatherer: reg,
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.Handle("/", h)
	t := cfg.HTTP.Timeouts
	srv := &http.Server{
		Handler: mux, ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read, IdleTimeout: t.Idle,
		// The profile request runs for its whole duration.
		WriteTimeout:   max(t.Write, 5*time.Minute),
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "hookgate: listening on http://%s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	return srv.Shutdown(sctx)
}
