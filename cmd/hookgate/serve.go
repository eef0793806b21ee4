package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/gateway"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
)

// headerRoom is what a stored event's headers may add to its body; the
// NATS max payload is set (embedded) or checked (external) with it.
const headerRoom = 64 << 10

func runServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var pace restartPace
	var carry carried
	defer carry.close()
	started := time.Now() // the process's start: status shows it, also after a start again
	for {
		err := serveOnce(ctx, args, getenv, stdout, stderr, started, pace.notBefore(), &carry)
		if !errors.Is(err, errStoreWritesAgain) {
			return err
		}
		if ctx.Err() != nil {
			return nil // stopped (SIGTERM) while it was stopping to start again
		}
		// The embedded store stopped writing and data_dir has room again:
		// start again in place, as a restart would (config read again).
		pace.started(time.Now())
	}
}

// serveOnce is one run of serve, from reading the config to a stop. It
// starts again in place (errStoreWritesAgain) not before restartAfter,
// leaving data_dir's lock and its listening sockets in carry for the next
// run, and takes them from there when the previous run left them.
func serveOnce(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, started, restartAfter time.Time, carry *carried) (err error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfgPath := fs.String("config", "", "config file")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		// HOOKGATE_CONFIG=a.yaml hookgate serve b.yaml ran a.yaml (review BF).
		return usagef("serve: unexpected argument %q (the config is --config FILE)", fs.Arg(0))
	}
	cfg, err := loadConfig(*cfgPath, getenv)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.Log.SlogLevel(), ReplaceAttr: readableDuration}))
	// stopped is the last line of a run that stopped, said once every
	// deferred stop ran (the key index's save, the AUDIT writer's flush,
	// NATS closed): said before them, their failures came after "hookgate
	// stopped" (a resource audit, stop 39).
	var stopped string
	defer func() {
		if stopped != "" {
			logger.Info(stopped)
		}
		// The cause in the JSON log too, at error: main prints it as a
		// plain line on stderr, which an alert on the JSON lines' level
		// missed whenever nothing was logged at error before it (a data_dir
		// locked, the key index failing to open; review Z).
		switch {
		case err != nil && cfg.NATS.URL == "" && ctx.Err() == nil && diskFull(err):
			// The embedded store could not start for want of room (its
			// streams' state, a bucket): wait for room and start again,
			// as a running serve does when its store stops writing.
			// Before, serve exited: senders met a refused connection and
			// the line said "jetstream unavailable", nothing of the disk
			// (a resource audit, stop 39).
			if waitForRoom(ctx, cfg.NATS.Embedded.DataDir, restartAfter, err, logger) {
				err = errStoreWritesAgain
			} else {
				logger.Info("hookgate stopped while waiting for room in data_dir")
				err = nil // a clean stop
			}
		case err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled):
			// Stopped while starting (NATS not answering yet): a clean
			// stop, as its exit 0 says; at error it fired alerts on an
			// ordinary deploy (a docs audit, stop 38).
			logger.Info("hookgate stopped while starting", slog.String("waiting_for", err.Error()))
		case err != nil && !errors.Is(err, errStoreWritesAgain) && !errors.Is(err, http.ErrServerClosed):
			logger.Error("serve failed", slog.String("error", err.Error()))
		}
	}()
	// What `config check` warns about, serve says at start too: an
	// operator who never ran it still sees why (a short dedup.window's
	// 503s, an unsigned id header).
	for _, p := range cfg.Check().Warnings() {
		logger.Warn("config: "+p.Msg, slog.String("config_key", p.Key))
	}

	tlsCfg, err := loadTLS(cfg, logger)
	if err != nil {
		return err
	}
	// Listen before the event store opens, with handlers that answer
	// /healthz and /metrics and 503 the rest: the embedded server's
	// recovery after a kill -9 takes about a second per GB, and a liveness
	// probe refused meanwhile killed the process, which then started its
	// recovery over.
	// data_dir's lock comes first, so a second serve on it still names
	// the holder instead of a busy port.
	var lock *os.File
	// startingAgain: this run stops to start again in place (the store
	// stopped writing and data_dir has room again): the lock and the
	// sockets go on to the next run.
	var startingAgain atomic.Bool
	if cfg.NATS.URL == "" {
		lock = carry.takeLock(cfg.NATS.Embedded.DataDir)
	} else {
		carry.takeLock("") // now external: a carried lock is let go
	}
	if cfg.NATS.URL == "" && lock == nil {
		fresh := !jetstream.HasStore(cfg.NATS.Embedded.DataDir)
		if lock, err = jetstream.LockDataDir(cfg.NATS.Embedded.DataDir); err != nil {
			if errors.Is(err, jetstream.ErrDataDirLocked) {
				err = fmt.Errorf("%w (another hookgate): stop it first, or give this serve its own nats.embedded.data_dir", err)
			}
			return err
		}
		if fresh {
			// A first start, or a config moved away from its relative
			// data_dir: the second starts an empty store, where keys
			// accepted before count as new and waiting events are not.
			logger.Warn("data_dir holds no event store: starting a new, empty one (if this serve ran before, check nats.embedded.data_dir; a relative one is read from the config file's directory)",
				slog.String("data_dir", cfg.NATS.Embedded.DataDir))
		}
	}
	if lock != nil {
		// The store's close lets go of lock; a second descriptor of it
		// holds the lock on for the next run when this one starts again.
		held, err := dupFile(lock)
		if err != nil {
			_ = lock.Close()
			return err
		}
		dir := cfg.NATS.Embedded.DataDir
		defer func() {
			if startingAgain.Load() {
				carry.lock, carry.lockDir = held, dir
				return
			}
			_ = held.Close()
		}()
	}
	// /metrics answers from the start: a scrape during a long recovery
	// sees hookgate_starting 1 and the process's series, not a failure.
	reg := prometheus.NewRegistry()
	starting := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hookgate_starting",
		Help: "1 while serve opens the event store (the embedded server's recovery after an unclean stop, an external cluster's connect retries, the streams' provisioning) and the embedded gateway's key index, 0 once it takes webhooks.",
	})
	starting.Set(1)
	reg.MustRegister(starting, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Carried sockets this config does not name as they were named are
	// closed first: the same port written another way ("localhost:P" for
	// "127.0.0.1:P") is then bound again as at a restart, instead of
	// colliding with serve's own open socket (review L).
	carry.keepSockets(listenAddrs(cfg))
	listeners, err := openListeners(cfg, tlsCfg, logger, reg, carry)
	if err != nil {
		if lock != nil {
			_ = lock.Close()
		}
		return err
	}
	// runCtx ends the run: at SIGTERM (ctx), or with http.shutdown_delay
	// set and webhooks taken, that long after it (drain, below).
	runCtx, endRun := context.WithCancel(context.WithoutCancel(ctx))
	defer endRun()
	var takingWebhooks, draining atomic.Bool
	g, gctx := errgroup.WithContext(runCtx)
	go func() {
		select {
		case <-ctx.Done():
		case <-gctx.Done():
			return
		}
		if d := cfg.HTTP.ShutdownDelay; d > 0 && takingWebhooks.Load() {
			draining.Store(true)
			logger.Info("stopping: answering for http.shutdown_delay with /readyz 503 and Connection: close, then no more connections", slog.Duration("shutdown_delay", d))
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-gctx.Done():
			}
		}
		endRun()
	}()
	for _, l := range listeners {
		l.h.draining = &draining
		g.Go(func() error { return serveHTTP(l.srv, l.ln, cfg) })
	}
	handedOver := false // the stop below shuts the servers down from then on
	defer func() {
		if !handedOver {
			for _, l := range listeners {
				_ = l.srv.Close()
			}
			// The goroutines that run until the run ends (the full-disk
			// watcher, the status answerer) end with it: without this the
			// wait hung on a failure after the store opened.
			endRun()
			_ = g.Wait()
			closeListenerSockets(listeners) // a run that fails carries nothing

		}
	}()

	sys, err := openStore(gctx, cfg, logger, lock)
	if err != nil {
		return err
	}
	defer sys.Close()
	if sys.embedded != nil {
		// A store that stopped writing (a full disk) is opened again by
		// starting serve again, once data_dir has room.
		g.Go(func() error {
			err := watchStoreRecovery(gctx, sys.embedded, cfg.NATS.Embedded.DataDir, restartAfter, logger)
			if errors.Is(err, errStoreWritesAgain) {
				// Before the stop (which runs once this returns): the
				// lock and the sockets stay open for the next run.
				startingAgain.Store(true)
				for _, l := range listeners {
					l.ln.keep.Store(true)
				}
			}
			return err
		})
	}

	auditFailures := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hookgate_audit_write_failures_total",
		Help: "AUDIT records that could not be written (logged).",
	})
	reg.MustRegister(auditFailures, newStreamCollector(sys.conn), newNATSCollector(sys.connections))

	// The audit writer outlives the HTTP servers and the consumer so their
	// last decisions are written: its deferred stop runs after theirs.
	audit, stopAudit := startAudit(sys, logger, 8192, auditFailures.Inc)
	defer stopAudit()

	watchClaim := sys.embedded == nil && cfg.Roles.Gateway
	if watchClaim {
		if err := refuseClaimedWebhooks(ctx, sys); err != nil {
			return err
		}
	}
	var publisher gateway.Publisher = jetstream.NewPublisher(sys.conn, 5*time.Second)
	var keys *keyIndexGateway
	if sys.embedded != nil && cfg.Roles.Gateway {
		// The embedded serve is WEBHOOKS's only writer: its gateway keeps
		// the keys over the horizon itself, and WEBHOOKS's own duplicate
		// window is dedup.window (streamsConfig).
		if keys, err = openKeyIndexGateway(ctx, cfg, sys, logger, publisher.(*jetstream.Publisher)); err != nil {
			return err
		}
		// Deferred after the audit writer's stop, so it runs before it
		// and before NATS closes: once the gateway stopped publishing.
		defer keys.close()
		publisher = keys
		reg.MustRegister(newKeyIndexCollector(keys.keys.Load))
	}
	ready := func(ctx context.Context) error {
		if draining.Load() {
			return errDraining
		}
		if keys != nil {
			if err := keys.Ready(); err != nil {
				return err
			}
		}
		return sys.Ready(ctx)
	}
	deps := gateway.Deps{
		Publisher: publisher,
		Audit:     audit,
		Ready:     ready,
		Registry:  reg,
		Gatherer:  reg,
	}

	// Everything else that can fail or take time is set up before the
	// listeners take webhooks; the key index opens while they do (503
	// until then), and the "listening" lines are printed once webhooks
	// are taken, so they mean ready.
	var runConsumer func(context.Context) error
	var applying, paused *atomic.Bool
	var pauses func() map[string]time.Time
	var retrying func() int
	if cfg.Roles.Consumer {
		applying, paused = new(atomic.Bool), new(atomic.Bool)
		if runConsumer, err = startConsumer(ctx, cfg, sys, logger, reg, audit, applying, paused, &pauses, &retrying); err != nil {
			return err
		}
	}
	// `hookgate status` lists the running serves and what their /readyz
	// says: a store that stopped writing is seen only here, in memory.
	reporter := newInstanceReporter(cfg, listeners, started, ready, applying)
	reporter.paused, reporter.pauses, reporter.retrying = paused, pauses, retrying
	runAnswers := answerInstances(sys, reporter, logger)
	g.Go(func() error { runAnswers(gctx); return nil })
	var gw *gateway.Handler
	for _, l := range listeners {
		if !l.webhooks {
			l.h.set(gateway.NewAdminHandler(logger, deps))
			continue
		}
		if gw, err = gateway.NewServer(logger, cfg, deps); err != nil {
			return err
		}
		l.h.set(gw)
	}
	handedOver = true
	var servers []*http.Server
	for _, l := range listeners {
		servers = append(servers, l.srv)
	}
	if runConsumer != nil {
		// The consumer stops with ctx and finishes its current events
		// before the deferred closes run. It does not wait for the key
		// index: a long read-back does not hold up the backlog.
		g.Go(func() error { return runConsumer(gctx) })
	}
	if keys != nil {
		g.Go(func() error { return keys.run(gctx) })
		select {
		case <-keys.ready:
		case <-time.After(time.Second):
			logger.Info("key index opening: webhooks are answered 503 (and /readyz) until it is open; /healthz answers")
			select {
			case <-keys.ready:
			case <-gctx.Done():
			}
		case <-gctx.Done():
		}
	}
	if gctx.Err() == nil {
		// Webhooks are taken now (the key index is open). A consumer-only
		// serve has no connections to drain. Set before the listening
		// line: a sender that reads it, posts and stops serve at once
		// must see the drain (ci15 saw TestSecondSignalEndsTheDrain's
		// /readyz never turn 503 once, this race the likeliest cause).
		takingWebhooks.Store(cfg.Roles.Gateway)
		starting.Set(0)
		for _, l := range listeners {
			fmt.Fprintln(stdout, l.line)
		}
	}
	if watchClaim {
		// An embedded hookgate this gateway shares NATS with may start
		// keeping a key index later (its gateway role turned on, an
		// upgrade): it marks WEBHOOKS pending and narrows the window only
		// remoteGatewayGrace later; this gateway stops before that.
		g.Go(func() error {
			t := time.NewTicker(remoteGatewayCheck)
			defer t.Stop()
			for {
				select {
				case <-gctx.Done():
					return nil
				case <-t.C:
				}
				// A lookup that fails (NATS away, WEBHOOKS missing) is the
				// store's trouble, answered 503 per request; only a claim
				// stops the gateway.
				if claimed, err := jetstream.KeyIndexClaimed(gctx, sys.conn.JS); err == nil && claimed {
					logger.Error("gateway stops", slog.String("error", errClaimedWebhooks.Error()))
					return errClaimedWebhooks
				}
			}
		})
	}
	if gctx.Err() == nil {
		// A serve stopped while its key index opened never took a webhook.
		attrs := []any{slog.String("version", buildVersion()), slog.Bool("embedded", sys.embedded != nil), slog.Int("providers", len(cfg.Providers))}
		if sys.embedded != nil {
			attrs = append(attrs, slog.String("data_dir", cfg.NATS.Embedded.DataDir))
		}
		logger.Info("hookgate started", attrs...)
	}

	g.Go(func() error {
		<-gctx.Done()
		// Stop accepting, let in-flight requests finish (their publishes
		// complete), then the deferred closes stop audit and NATS.
		// Starting again in place, the next run's listeners answer only
		// once this stop is over, and every webhook in flight is answered
		// 503 anyway (the store stopped writing): a second, not the 30 s a
		// slow sender could hold /healthz for (review L).
		wait := 30 * time.Second
		if startingAgain.Load() {
			wait = time.Second
			settleAll(listeners, time.Now().Add(500*time.Millisecond))
		}
		sctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		for _, s := range servers {
			if err := s.Shutdown(sctx); err != nil {
				if startingAgain.Load() {
					_ = s.Close() // cut what is still in flight
					continue
				}
				logger.Error("http shutdown", slog.String("error", err.Error()))
			}
		}
		if gw != nil {
			gw.FlushHeld() // before the deferred stop of the AUDIT writer
		}
		return nil
	})
	err = g.Wait()
	if errors.Is(err, errStoreWritesAgain) {
		if carry.sockets == nil {
			carry.sockets = map[string]*net.TCPListener{}
		}
		for _, l := range listeners {
			carry.sockets[l.ln.addr] = l.ln.TCPListener
		}
		stopped = "hookgate stopped, to start again"
		return err
	}
	// Marked to be kept, but another error ended the run: not carried.
	closeListenerSockets(listeners)
	stopped = "hookgate stopped"
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func scheme(cfg *config.Config) string {
	if cfg.HTTP.TLS.Cert != "" {
		return "https"
	}
	return "http"
}

// loadTLS loads http.tls's certificate and key (nil without TLS) before
// anything starts: loaded by ServeTLS, a bad pair failed after the streams
// were set up and the consumer started, naming neither key (review 9). The
// files are read again when they change (certReloader).
func loadTLS(cfg *config.Config, logger *slog.Logger) (*tls.Config, error) {
	c := cfg.HTTP.TLS
	if c.Cert == "" {
		return nil, nil
	}
	r, err := newCertReloader(c.Cert, c.Key, logger)
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.getCertificate}, nil
}

// listener is one of serve's HTTP listeners: webhooks (and the admin
// routes too when http.admin_listen is empty) on http.listen, or the admin
// routes alone.
type listener struct {
	srv      *http.Server
	ln       *keptListener
	h        *handoff
	webhooks bool
	line     string // printed once webhooks are taken
}

// openListeners listens on http.listen and http.admin_listen as the
// roles need, each serving gateway.NewStartingHandler until handed the
// real handler.
func openListeners(cfg *config.Config, tlsCfg *tls.Config, logger *slog.Logger, metrics prometheus.Gatherer, carry *carried) ([]listener, error) {
	var out []listener
	add := func(addr string, webhooks bool, format string) error {
		h := &handoff{}
		h.set(gateway.NewStartingHandler(cfg, webhooks, metrics))
		srv, ln, err := listen(cfg, tlsCfg, addr, h, logger, carry)
		if err != nil {
			for _, l := range out {
				_ = l.ln.Close()
			}
			// The key to fix, as the embedded server's refusal names
			// nats.embedded.listen (an operations audit, stop 41).
			key := "http.listen"
			if !webhooks && cfg.HTTP.AdminListen != "" {
				key = "http.admin_listen"
			}
			return fmt.Errorf("%s: %w", key, err)
		}
		out = append(out, listener{srv: srv, ln: ln, h: h, webhooks: webhooks, line: fmt.Sprintf(format, scheme(cfg), ln.Addr())})
		what := "webhooks answer 503 until the event store is open"
		switch {
		case !webhooks:
			what = "/healthz and /metrics answer, /readyz 503 until the event store is open"
		case cfg.HTTP.AdminListen == "":
			what = "/healthz and /metrics answer, webhooks and /readyz 503 until the event store is open"
		}
		logger.Info("http listening while starting: "+what, slog.String("addr", ln.Addr().String()))
		return nil
	}
	webhooks, admin := listenAddrs(cfg)
	if webhooks != "" {
		if err := add(webhooks, true, "hookgate: listening on %s://%s"); err != nil {
			return nil, err
		}
	}
	if admin != "" {
		if err := add(admin, false, "hookgate: admin on %s://%s"); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// listenAddrs are the addresses serve listens on, as configured: webhooks
// (with the gateway role) and the admin listener's ("": none).
func listenAddrs(cfg *config.Config) (webhooks, admin string) {
	if cfg.Roles.Gateway {
		webhooks = cfg.HTTP.Listen
	}
	if cfg.HTTP.AdminListen != "" || !cfg.Roles.Gateway {
		admin = cfg.HTTP.AdminListen
		if admin == "" {
			admin = cfg.HTTP.Listen
		}
	}
	return webhooks, admin
}

// handoff serves a listener's starting handler until set gives it the
// real one; requests in flight finish on the handler they began on. While
// serve drains (http.shutdown_delay) every answer closes its connection,
// so keep-alive senders reconnect (elsewhere, once a load balancer took
// this instance out) instead of having an idle connection closed under a
// request they were sending.
type handoff struct {
	h        atomic.Pointer[http.Handler]
	draining *atomic.Bool
}

func (o *handoff) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o.draining != nil && o.draining.Load() {
		w.Header().Set("Connection", "close")
	}
	(*o.h.Load()).ServeHTTP(w, r)
}

// errDraining is /readyz's answer while serve drains before it stops.
var errDraining = errors.New("stopping: draining connections for http.shutdown_delay")

func (o *handoff) set(h http.Handler) { o.h.Store(&h) }

// A socket carry holds for addr (left by the run before, which started
// again) is used instead of a new one.
func listen(cfg *config.Config, tlsCfg *tls.Config, addr string, h http.Handler, logger *slog.Logger, carry *carried) (*http.Server, *keptListener, error) {
	tcp := carry.takeSocket(addr)
	if tcp != nil {
		if err := tcp.SetDeadline(time.Time{}); err != nil {
			_ = tcp.Close()
			tcp = nil
		}
	}
	if tcp == nil {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, nil, err // "listen tcp ADDR: ...", the caller names the key
		}
		tcp = l.(*net.TCPListener)
	}
	ln := newKeptListener(tcp, addr)
	t := cfg.HTTP.Timeouts
	srv := &http.Server{
		Handler:           h,
		ConnState:         ln.connState,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	// HTTP/1.1 only: Go's HTTP/2 server does not apply ReadHeaderTimeout
	// or ReadTimeout to a connection that sends nothing after its
	// preface, so with TLS (where HTTP/2 is negotiated) a silent client
	// held a connection until http.timeouts.idle (review 9). Webhook
	// senders post one request at a time; HTTP/2 buys them nothing here.
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	if tlsCfg != nil {
		srv.TLSConfig = tlsCfg.Clone()
	}
	return srv, ln, nil
}

func serveHTTP(srv *http.Server, ln net.Listener, cfg *config.Config) error {
	var err error
	if srv.TLSConfig != nil {
		err = srv.ServeTLS(ln, "", "") // the pair is in TLSConfig (loadTLS)
	} else {
		err = srv.Serve(ln)
	}
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		// net.ErrClosed: its listener settled before the Shutdown
		// (settleAll), which ends Serve without the server shutting down.
		return nil
	}
	return err
}

// settleAll settles every listener (keptListener.settle), their accept
// loops ended together.
func settleAll(listeners []listener, deadline time.Time) {
	for _, l := range listeners {
		_ = l.ln.Close()
	}
	for _, l := range listeners {
		l.ln.settle(deadline)
	}
}

// openStore opens the event store for serve. An external cluster that
// does not answer (nothing listening yet, no quorum: a cluster started
// after hookgate, or restarting) is waited for, not given up on: serve
// tries again, pausing 1 s and then up to 10 s between tries, with a
// warning each time, until it answers or serve is stopped (ctx). Its
// early listeners answer meanwhile (/healthz 200, /readyz and webhooks 503
// with Retry-After). Any other error (credentials refused, max_payload too
// small, a stream's settings refused) ends serve at once.
func openStore(ctx context.Context, cfg *config.Config, logger *slog.Logger, lock *os.File) (*system, error) {
	if cfg.NATS.URL == "" {
		return openSystemLocked(ctx, cfg, logger, "hookgate-serve", readWrite, lock)
	}
	pause := time.Second
	for {
		sys, err := openExternal(ctx, cfg, logger)
		switch {
		case err == nil || !jetstream.NotAnswering(err):
			return sys, err
		case ctx.Err() != nil && !errors.Is(err, ctx.Err()):
			// Stopped while trying: a stop, whatever the attempt said.
			return nil, fmt.Errorf("%w (last attempt: %v)", ctx.Err(), err)
		case ctx.Err() != nil:
			return nil, err
		}
		msg := "event store not answering; trying again"
		if jetstream.NoPeers(err) {
			// The cluster answered: it cannot place the streams'
			// replicas (a cluster audit, stop 39: "not answering" for
			// a nats.replicas above the cluster's size).
			msg = fmt.Sprintf("the NATS cluster has fewer JetStream servers online than nats.replicas (%d) needs for each stream; trying again: start the missing servers, or lower nats.replicas to the cluster's size", cfg.NATS.Replicas)
		}
		logger.Warn(msg, slog.String("error", err.Error()), slog.Duration("in", pause))
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (last attempt: %v)", ctx.Err(), err)
		case <-time.After(pause):
		}
		pause = min(2*pause, 10*time.Second)
	}
}

// openExternal is one attempt of openStore on an external cluster. It
// returns when ctx ends even while the attempt goes on (a connect gives
// each server of nats.url its own timeout and cannot be interrupted);
// the attempt then finishes in the background and closes what it opened.
func openExternal(ctx context.Context, cfg *config.Config, logger *slog.Logger) (*system, error) {
	type result struct {
		sys *system
		err error
	}
	done := make(chan result, 1)
	go func() {
		sys, err := openSystemLocked(ctx, cfg, logger, "hookgate-serve", readWrite, nil)
		done <- result{sys, err}
	}()
	select {
	case r := <-done:
		return r.sys, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.sys != nil {
				r.sys.Close()
			}
		}()
		return nil, fmt.Errorf("%w (while connecting to nats.url)", ctx.Err())
	}
}

// readableDuration writes a duration as Go writes it ("96h0m0s", "1.5s")
// instead of slog's JSON nanoseconds, which a reader at 3 a.m. has to
// divide in their head.
func readableDuration(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}
