package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/gateway"
	"github.com/hookgate/hookgate/jetstream"
)

// keyIndexFile is the key index's snapshot in the embedded data_dir.
const keyIndexFile = "webhooks-keys.idx"

// A gateway on nats.url looks every remoteGatewayCheck whether an embedded
// hookgate's key index claimed WEBHOOKS, and stops; the embedded one
// narrows WEBHOOKS's window no sooner than remoteGatewayGrace after it
// marked it pending.
const (
	remoteGatewayCheck = 2 * time.Second
	remoteGatewayGrace = 3 * remoteGatewayCheck
)

// refuseClaimedWebhooks returns an error naming the way out when WEBHOOKS
// is kept by an embedded hookgate's key index, or one being built: a
// gateway elsewhere (nats.url) would not know its keys. Lookup errors are
// returned as they are (ErrUnavailable when NATS does not answer).
func refuseClaimedWebhooks(ctx context.Context, sys *system) error {
	claimed, err := jetstream.KeyIndexClaimed(ctx, sys.conn.JS)
	if err != nil {
		return err
	}
	if claimed {
		return errClaimedWebhooks
	}
	return nil
}

var errClaimedWebhooks = errors.New("nats.url: WEBHOOKS there is kept by an embedded hookgate's key index (or one being built), so its own duplicate window is, or soon will be, only dedup.window: a gateway here would store repeats of older events again; run this instance with roles: { gateway: false }, or move to a NATS cluster of your own")

// keyIndexGateway is the embedded gateway's key index and the publisher in
// front of it. On a WEBHOOKS already kept by a key index, run opens the
// index (from its snapshot, or by reading the horizon back) and new
// webhooks are answered 503 until it is open: serve listens at once, so
// /healthz answers while a long read-back runs, /readyz says 503, and the
// "listening" line is printed once webhooks are taken (ready). On an
// upgrade (WEBHOOKS unmarked, its window still the horizon, which the
// server just read in) serve takes webhooks at once through the plain
// publisher while run reads the keys back; once the index has caught up,
// the publisher switches to it and WEBHOOKS's window is narrowed to
// dedup.window.
type keyIndexGateway struct {
	cfg   *config.Config
	sys   *system
	log   *slog.Logger
	opts  jetstream.KeyIndexOptions
	plain *jetstream.Publisher
	keys  atomic.Pointer[jetstream.KeyIndex]
	to    atomic.Pointer[jetstream.KeyIndexPublisher]
	// plainInFlight counts publishes through the plain publisher; the
	// window is narrowed only once those begun before the switch ended
	// (their same-id retries rely on the horizon-long window).
	plainInFlight atomic.Int64
	// pendingSince: when this upgrade found WEBHOOKS marked pending.
	pendingSince time.Time
	// kept: WEBHOOKS is kept by a key index already (not an upgrade):
	// nothing is published before the index is open.
	kept bool
	// ready is closed once webhooks are taken: at once on an upgrade, once
	// the index is open on a kept WEBHOOKS.
	ready chan struct{}
}

// errKeyIndexOpening answers webhooks (503) while the index is opened.
var errKeyIndexOpening = fmt.Errorf("%w: the key index is still reading WEBHOOKS's keys back", jetstream.ErrUnavailable)

func openKeyIndexGateway(ctx context.Context, cfg *config.Config, sys *system, logger *slog.Logger, plain *jetstream.Publisher) (*keyIndexGateway, error) {
	g := &keyIndexGateway{cfg: cfg, sys: sys, log: logger, plain: plain, ready: make(chan struct{}), opts: jetstream.KeyIndexOptions{
		Path:    filepath.Join(cfg.NATS.Embedded.DataDir, keyIndexFile),
		Horizon: cfg.Dedup.Horizon,
		Window:  cfg.Dedup.Window,
		Log:     logger,
	}}
	kept, last, err := jetstream.KeyIndexKept(ctx, sys.conn.JS)
	if err != nil {
		return nil, err
	}
	// Before anything is published here: a snapshot knowing more events
	// than WEBHOOKS held then is not used, also once the upgrade's
	// publishes filled those sequences again.
	g.opts.StreamLastSeq = &last
	g.kept = kept
	if !kept {
		g.pendingSince = time.Now()
		close(g.ready)
		logger.Info("WEBHOOKS is not kept by a key index yet (an upgrade): taking webhooks with its horizon-long duplicate window while the key index reads the horizon's keys back")
	}
	return g, nil
}

// Ready fails while webhooks are answered 503 (the index being opened).
func (g *keyIndexGateway) Ready() error {
	select {
	case <-g.ready:
		return nil
	default:
		return errKeyIndexOpening
	}
}

// Known reports whether the key index, once in front, knows key as
// stored (gateway.KeyLookup); false before.
func (g *keyIndexGateway) Known(key string) bool {
	p := g.to.Load()
	return p != nil && p.Known(key)
}

// Publish goes through the key index once it is in front, else straight
// to WEBHOOKS (whose window then spans the horizon).
func (g *keyIndexGateway) Publish(ctx context.Context, m jetstream.Message) (jetstream.PublishResult, error) {
	// Counted before the switch is looked at: run waits for every plain
	// publish that could have missed it.
	g.plainInFlight.Add(1)
	if p := g.to.Load(); p != nil {
		g.plainInFlight.Add(-1)
		return p.Publish(ctx, m)
	}
	defer g.plainInFlight.Add(-1)
	if g.kept {
		return jetstream.PublishResult{}, errKeyIndexOpening
	}
	return g.plain.Publish(ctx, m)
}

// run opens the index and keeps it in step until ctx ends.
func (g *keyIndexGateway) run(ctx context.Context) error {
	k, err := jetstream.OpenKeyIndex(ctx, g.sys.conn, g.opts)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("key index: %w", err)
	}
	g.keys.Store(k)
	if g.kept {
		g.to.Store(k.Publisher(g.plain))
		close(g.ready)
		return k.Run(ctx)
	}
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	// Events stored while it read are read back by Run: switch once
	// every event older than a quarter window is known.
	for k.Stats().Behind > g.opts.Window/4 {
		select {
		case <-ctx.Done():
			return <-done
		case err := <-done:
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
	g.to.Store(k.Publisher(g.plain))
	// Wait for the plain publishes begun before the switch, and give a
	// gateway elsewhere on this server time to see the pending mark and
	// stop.
	for g.plainInFlight.Load() > 0 || time.Since(g.pendingSince) < remoteGatewayGrace {
		select {
		case <-ctx.Done():
			return <-done
		case err := <-done:
			return err
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := jetstream.NarrowWebhooks(ctx, g.sys.conn.JS, streamsConfig(g.cfg)); err != nil {
		// The window stays the horizon: safe, it costs the memory the
		// index saves. The next start narrows it.
		g.log.Error("key index: narrowing WEBHOOKS's duplicate window", slog.String("error", err.Error()))
	} else {
		g.log.Info("key index in front of the gateway; WEBHOOKS's duplicate window narrowed", slog.Duration("window", g.opts.Window))
	}
	return <-done
}

// close writes the index's last snapshot (once the gateway stopped).
func (g *keyIndexGateway) close() {
	if k := g.keys.Load(); k != nil {
		if err := k.Close(); err != nil {
			g.log.Warn("key index snapshot", slog.String("error", err.Error()))
		}
	}
}

var (
	_ gateway.Publisher = (*keyIndexGateway)(nil)
	_ gateway.KeyLookup = (*keyIndexGateway)(nil)
)
