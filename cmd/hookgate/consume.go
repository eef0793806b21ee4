package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/nats-io/nuid"
	"github.com/prometheus/client_golang/prometheus"
)

// consumerRules builds each provider's apply rule from the config: forward
// first (when configured), then publish to GRANTS (unless turned off).
func consumerRules(cfg *config.Config, grants consumer.Grants, fm *consumer.ForwardMetrics) (map[string]consumer.Rule, error) {
	rules := map[string]consumer.Rule{}
	for name, pc := range cfg.Providers {
		var effects []consumer.Effect
		if pc.Effects.Forward.URL != "" {
			f, err := consumer.NewForward(consumer.ForwardOptions{
				URL:     pc.Effects.Forward.URL,
				Timeout: pc.Effects.Forward.Timeout,
				Secrets: pc.Effects.Forward.SigningSecrets(),
				// Events of one provider, up to every worker, forward at once.
				Concurrency: cfg.Consumer.Workers,
			})
			if err != nil {
				return nil, fmt.Errorf("providers.%s.effects.forward: %w", name, err)
			}
			var eff consumer.Effect = f
			if fm != nil {
				eff = fm.Wrap(name, f)
			}
			effects = append(effects, eff)
		}
		if tmpl, on := pc.Effects.PublishTemplate(); on {
			effects = append(effects, consumer.GrantsEffect{Template: tmpl, Grants: grants})
		}
		rules[name] = consumer.Rule{Watermark: pc.Ordering == config.OrderingWatermark, OneAccount: oneAccount(pc.Account), Effects: effects}
	}
	return rules, nil
}

// leaseTTL outlasts the slowest effect run: the longest forward timeout
// plus room for the publish and the KV writes.
func leaseTTL(cfg *config.Config) time.Duration {
	longest := time.Duration(0)
	for _, pc := range cfg.Providers {
		if pc.Effects.Forward.URL != "" { // a forward that is off runs no effect (review Y)
			longest = max(longest, pc.Effects.Forward.Timeout)
		}
	}
	return longest + 30*time.Second
}

// grantsWindow is GRANTS's duplicate window: dedup.window when every
// provider that publishes does so the sequenced way (consumer's
// sequenced.go: a repeat publish, however late, is refused by the
// subject's expected sequence), else 0, the whole horizon (Nats-Msg-Id is
// then what keeps a late repeat out). Every key a horizon-long window
// holds costs memory on every replica and time at every restart.
func grantsWindow(cfg *config.Config) time.Duration {
	for _, pc := range cfg.Providers {
		tmpl, on := pc.Effects.PublishTemplate()
		if on && !consumer.SequencedTemplate(pc.Ordering == config.OrderingWatermark, oneAccount(pc.Account), tmpl) {
			return 0
		}
	}
	return cfg.Dedup.Window
}

// oneAccount: the provider takes its account from no header and no JSON
// field, so every event has account.value.
func oneAccount(a config.Account) bool { return a.Header == "" && a.JSON == "" }

// servePrefix starts the lease owners of serve's consumer (a CLI's have
// none): on the embedded server another serve's lease is a dead one's.
const servePrefix = "serve@"

// deadServe is consumer.Options.Gone for a process holding the embedded
// data_dir's lock (serve, or an operator command that opened data_dir
// itself): no serve runs beside it, so a serve's lease is a dead one's. A
// CLI's is not: another operator command may be connected through
// nats.embedded.listen.
func deadServe(owner string) bool { return strings.HasPrefix(owner, servePrefix) }

// embeddedLockOwner is the consumer lock's owner for an embedded server's
// serve whose lease owner is owner; isEmbeddedLockOwner tells one, which
// no other embedded serve can be while this one holds data_dir's lock.
func embeddedLockOwner(owner string) string { return owner + embeddedLockSuffix }

func isEmbeddedLockOwner(owner string) bool { return strings.HasSuffix(owner, embeddedLockSuffix) }

const embeddedLockSuffix = " (embedded)"

// cliProcessorOptions is processorOptions for an operator command on sys.
// One that opened data_dir itself holds its lock, so it knows a serve's
// leases for dead ones, as serve does after a restart; before, a replay run
// after a kill -9 of serve waited out the dead serve's lease on each
// subject it held (forward.timeout + 30 s), silent (review A).
func cliProcessorOptions(cfg *config.Config, sys *system) consumer.Options {
	o := processorOptions(cfg)
	// What an operator's command applies, finds stale or dead-letters is
	// the operator's decision in AUDIT, as its replayed and dlq-* records
	// are (review V: they said consumer).
	o.Actor = event.ActorOperator
	if sys.embedded != nil {
		o.Gone = deadServe
	}
	return o
}

// leaseWaitNote is consumer.Options.LeaseWait for operator command cmd:
// one line through say when an event waits for another process's lease,
// so that a wait of up to the lease's time is not taken for a hang (a
// replay run again after a kill -9 of the one before sat silent ~30 s).
func leaseWaitNote(cmd string, say func(string)) func(consumer.Event, consumer.Lease) {
	return func(ev consumer.Event, l consumer.Lease) {
		say(fmt.Sprintf("hookgate: %s: event %s waits for its subject %s, held by the lease of %s until %s (in %.0f s): a serve or operator command applies an event of it, or one killed left it",
			cmd, printable(ev.Key), printable(ev.Subject), printable(l.Owner), l.Until.UTC().Format(time.TimeOnly+" UTC"), max(time.Until(l.Until).Seconds(), 0)))
	}
}

// processorOptions are the consumer options from the config.
func processorOptions(cfg *config.Config) consumer.Options {
	host, _ := os.Hostname()
	ttl := leaseTTL(cfg)
	return consumer.Options{
		Owner:      fmt.Sprintf("%s/%d/%s", host, os.Getpid(), nuid.Next()),
		MaxDeliver: cfg.Consumer.MaxDeliver,
		Backoff:    cfg.Consumer.Backoff,
		LeaseTTL:   ttl,
		// Longer than the consumer's AckWait (= LeaseTTL): a crashed
		// holder's event is redelivered within it and settles its subject.
		InDoubtWait: 2 * ttl,
		Horizon:     cfg.Dedup.Horizon,
	}
}

// buildProcessor wires a processor over conn: serve's (acc readWrite)
// provisions the KV buckets, an operator command's uses them as they are
// (jetstream.OpenKV).
// dlq may wrap the DLQ writer (dlq replay records the new letters).
func buildProcessor(ctx context.Context, cfg *config.Config, conn *jetstream.Conn, acc access, logger *slog.Logger, metrics *consumer.Metrics, fm *consumer.ForwardMetrics, audit consumer.Auditor, o consumer.Options, dlq func(consumer.DeadLetters) consumer.DeadLetters) (*consumer.Processor, error) {
	open := jetstream.OpenKV
	if acc == readWrite {
		open = jetstream.ProvisionKV
	}
	marks, applied, err := open(ctx, conn.JS, jetstream.KVConfig{Replicas: cfg.NATS.Replicas, Horizon: cfg.Dedup.Horizon})
	if err != nil {
		return nil, err
	}
	fx := jetstream.NewEffects(conn)
	rules, err := consumerRules(cfg, fx, fm)
	if err != nil {
		return nil, err
	}
	var letters consumer.DeadLetters = fx
	if dlq != nil {
		letters = dlq(fx)
	}
	o.GrantsIndex = fx
	return consumer.NewProcessor(rules, marks, applied, letters, audit, logger, metrics, o), nil
}

// startConsumer provisions the KV buckets and the durable consumer and
// returns the function that runs it until ctx ends.
// applying is true while this instance runs the consumer (on a cluster:
// holds the consumer lock); paused while a backup pauses it (pauseGate);
// pauses is set to what tells the forward receivers' pauses.
func startConsumer(ctx context.Context, cfg *config.Config, sys *system, logger *slog.Logger, reg prometheus.Registerer, audit consumer.Auditor, applying, paused *atomic.Bool, pauses *func() map[string]time.Time, retrying *func() int) (func(context.Context) error, error) {
	metrics := consumer.NewMetrics(reg)
	o := processorOptions(cfg)
	// A small window: deliveries a killed instance had fetched come back
	// only after AckWait, overtaken by newer events (stale). (A stop hands
	// them back at once: consumer.Unreader.) The durable consumer's limit
	// is wider by retryRoom, for events waiting out a retry's backoff: with
	// the window alone, 128 events of one provider whose forward target is
	// down stopped every provider until their backoff ran out (review 9).
	window := max(cfg.Consumer.Workers*16, 128)
	external := cfg.NATS.URL != ""
	// On a cluster the server outlives this instance, and a standby takes
	// over: what a stop hands back must be queued for redelivery at once.
	o.PlainStopHandBack = external
	o.Owner = servePrefix + o.Owner
	if !external {
		// data_dir's lock: only one serve at a time; another's lease is a
		// dead one's (its own is never waited for).
		o.Gone = deadServe
	}
	lettered := &letteredBefore{}
	o.Lettered = lettered.of
	conn, err := sys.extraConn("hookgate-consumer")
	if err != nil {
		return nil, err
	}
	proc, err := buildProcessor(ctx, cfg, conn, readWrite, logger, metrics, consumer.NewForwardMetrics(reg), audit, o, nil)
	if err != nil {
		return nil, err
	}
	*pauses = proc.EffectPauses
	var current atomic.Pointer[jetstream.Source] // the source pulling now
	*retrying = func() int {
		if src := current.Load(); src != nil {
			return src.Retrying()
		}
		return 0
	}
	opts := jetstream.SourceOptions{
		MaxAckPending: window + retryRoom,
		Prefetch:      max(window/4, 16),
		AckWait:       o.LeaseTTL,
		Log:           logger,
		OnLost: func(first, last uint64) {
			n := last - first + 1
			metrics.Expired.Add(float64(n))
			logger.Error("stored events left WEBHOOKS at retention.webhooks.max_age before they were applied: they are lost",
				slog.Uint64("first_seq", first), slog.Uint64("last_seq", last), slog.Uint64("events", n))
			audit.Record(event.AuditRecord{Time: time.Now().UTC(), Decision: event.DecisionExpiredUnapplied, Seq: first, Actor: event.ActorConsumer,
				Reason: event.ExpiredReason(first, last)})
		},
	}
	runSource := func(ctx context.Context, src *jetstream.Source) error {
		metrics.Applying.Set(1)
		applying.Store(true)
		defer func() {
			metrics.Applying.Set(0)
			applying.Store(false)
		}()
		go func() {
			t := time.NewTicker(5 * time.Second)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					// Not applying any more (stopped, or a standby now):
					// this instance's lag gauge must not count twice.
					metrics.Pending.Set(0)
					return
				case <-t.C:
					if n, err := src.Pending(ctx); err == nil {
						metrics.Pending.Set(float64(n))
					}
				}
			}
		}()
		defer src.Stop()
		current.Store(src)
		defer current.Store(nil)
		return proc.Run(ctx, src, cfg.Consumer.Workers)
	}
	// A backup pauses the consumer while it reads the streams (see
	// pauseGate); open gives the source of each run. The gate answers for
	// the whole life of serve, a standby's too: it keeps a pause for when
	// it takes the consumer lock (review BB: answering only under the lock,
	// a standby never answered, and one taking over mid-backup applied).
	gate := newPauseGate(instanceName(), paused)
	answerPauses := func(run func(context.Context) error) func(context.Context) error {
		return func(ctx context.Context) error {
			stop, err := jetstream.AnswerPauses(conn, gate.handle)
			if err != nil {
				return err
			}
			defer stop()
			// A backup that began before this serve subscribed asked
			// without it: take its pause now, before applying anything
			// (its next renewal would come only after pauseRenew).
			backups, err := jetstream.Running[jetstream.PauseRequest](ctx, conn, jetstream.SubjectBackupRunning)
			if err != nil && ctx.Err() == nil {
				logger.Warn("could not ask whether a hookgate backup runs: a running one pauses this consumer with its next renewal", slog.String("error", err.Error()))
			}
			for _, b := range backups {
				if b.ID != "" && !b.Resume {
					gate.handle(b)
					logger.Info("a hookgate backup is reading the streams: the consumer applies events once it ends", slog.String("backup", b.ID))
				}
			}
			return run(ctx)
		}
	}
	runGated := func(ctx context.Context, open func(context.Context) (*jetstream.Source, error)) error {
		for {
			if !gate.wait(ctx) {
				return nil
			}
			runCtx, done, ok := gate.start(ctx)
			if !ok {
				continue
			}
			src, err := open(runCtx)
			if err != nil {
				if done() && ctx.Err() == nil {
					continue // a pause cut the opening short (review BB)
				}
				return err
			}
			err = runSource(runCtx, src)
			if !done() || ctx.Err() != nil {
				return err
			}
			logger.Info("consumer paused for a backup: stopped applying events until it ends")
			if gate.wait(ctx) {
				logger.Info("backup over: applying events again")
			}
		}
	}
	if !external {
		// The embedded server has one serve of its own (data_dir's lock),
		// but a consumer-only serve may reach it through nats.url: both
		// pulled side by side, and this one's start reset the consumer
		// under the other's deliveries (audit 42). So it takes the
		// consumer lock too, at once from a dead embedded serve's
		// (embeddedLockOwner), and waits for a live other's.
		lock, err := jetstream.ProvisionConsumerLock(ctx, conn.JS, 1, embeddedLockOwner(o.Owner), opts.AckWait, logger)
		if err != nil {
			return nil, err
		}
		lock.Dead = isEmbeddedLockOwner
		// The durable consumer is made now, so one that cannot be made
		// stops serve before it listens.
		if err := jetstream.ProvisionSource(ctx, conn, opts); err != nil {
			return nil, err
		}
		return answerPauses(func(ctx context.Context) error {
			return lock.Hold(ctx, func(ctx context.Context, handedOver bool) error {
				if handedOver {
					// Deliveries still outstanding were fetched by a
					// process that is gone: run them first.
					redeliverOutstanding(ctx, conn, window, cfg.Dedup.Horizon, lettered, logger)
				}
				return runGated(ctx, func(ctx context.Context) (*jetstream.Source, error) {
					return jetstream.OpenSource(ctx, conn, opts)
				})
			})
		}), nil
	}
	// Several instances may run the consumer role on a cluster: one at a
	// time applies events (jetstream.ConsumerLock), and only it pulls.
	lock, err := jetstream.ProvisionConsumerLock(ctx, conn.JS, cfg.NATS.Replicas, o.Owner, opts.AckWait, logger)
	if err != nil {
		return nil, err
	}
	return answerPauses(func(ctx context.Context) error {
		return lock.Hold(ctx, func(ctx context.Context, handedOver bool) error {
			if handedOver {
				// The last holder stopped and handed back what it had
				// fetched; a delivery that was on its way to it when it
				// stopped pulling is still outstanding, and would come back
				// only after the ack wait, behind newer events.
				redeliverOutstanding(ctx, conn, window, cfg.Dedup.Horizon, lettered, logger)
			}
			return runGated(ctx, func(ctx context.Context) (*jetstream.Source, error) {
				return jetstream.OpenSource(ctx, conn, opts)
			})
		})
	}), nil
}

// redeliverOutstanding makes the deliveries a previous process fetched and
// did not settle due at once (jetstream.RedeliverOutstanding), and tells
// lettered (may be nil) which events above the floor were dead-lettered
// before, unless more
// than four windows (maxAckPending each) of settled deliveries would run
// again, or
// events stored more than half the horizon ago (settled ones must still be
// remembered as applied when they come again). A failure is logged: the
// deliveries still come back after the ack wait. It waits up to about
// 30 s for a store that does not answer yet (jetstream.RedeliverOutstanding).
func redeliverOutstanding(ctx context.Context, conn *jetstream.Conn, maxAckPending int, horizon time.Duration, lettered *letteredBefore, logger *slog.Logger) {
	n, from, through, err := jetstream.RedeliverOutstanding(ctx, conn, 4*uint64(maxAckPending), time.Now().Add(-horizon/2))
	if err != nil {
		var attrs []any
		if n > 0 {
			// 0 with an error: the consumer's info never came, so how
			// many there are is not known ("outstanding":0 read as none
			// after a whole-cluster restart).
			attrs = append(attrs, slog.Int("outstanding", n))
		}
		attrs = append(attrs, slog.String("error", err.Error()))
		logger.Warn("deliveries a stopped process had fetched come back after the ack wait", attrs...)
		return
	}
	if n > 0 {
		logger.Info("redelivering first what a stopped process had fetched and not settled, from the consumer's ack floor",
			slog.Int("outstanding", n), slog.Uint64("seq", from))
	}
	if from > 0 && lettered != nil {
		// The reset brings back every event settled above the floor: the
		// applied ones are found applied, the dead-lettered ones only so.
		lettered.load(ctx, conn, from, through, logger)
	}
}

// retryRoom is how many more unacknowledged deliveries the durable
// consumer allows beyond the window, for events waiting out a retry's
// backoff (negatively acknowledged with a delay: the server holds them,
// not this process). Under the default backoff an event is retried for
// about 33 minutes (1 s + 5 s + 30 s + 2 m + 3 x 10 m), so a downstream
// refusing 2 events a second can stay down for good before the limit is
// reached. The price: deliveries queued in memory behind a slow event of
// their subject are bounded by window + retryRoom too, not the window
// alone. A bound on what Run holds in memory was tried and taken back: it
// stopped taking the redelivery a subject in doubt waits for, and let
// fetched deliveries outlive their ack wait (review 9's second round).
const retryRoom = 4096
