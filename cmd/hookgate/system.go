package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/jetstream"
)

// system is a JetStream connection with the streams provisioned, over an
// embedded server or an external cluster.
type system struct {
	cfg      *config.Config
	embedded *jetstream.Embedded
	conn     *jetstream.Conn
	opts     jetstream.ConnectOptions

	mu    sync.Mutex        // guards extra: /metrics reads it while serve starts
	extra []*jetstream.Conn // more connections (extraConn), closed with the system
}

func streamsConfig(cfg *config.Config) jetstream.StreamsConfig {
	lim := func(l config.Limits) jetstream.Limits {
		return jetstream.Limits{MaxAge: l.MaxAge, MaxBytes: l.MaxBytes}
	}
	return jetstream.StreamsConfig{
		Replicas: cfg.NATS.Replicas,
		Horizon:  cfg.Dedup.Horizon,
		// The embedded serve's gateway keeps the keys.
		KeyIndex:     cfg.NATS.URL == "" && cfg.Roles.Gateway,
		GrantsWindow: grantsWindow(cfg),
		DedupWindow:  cfg.Dedup.Window,
		MaxMsgSize:   int32(cfg.HTTP.MaxBodyBytes + headerRoom),
		KeyRecipes:   keyRecipes(cfg),
		Webhooks:     lim(cfg.Retention.Webhooks),
		Grants:       lim(cfg.Retention.Grants),
		DLQ:          lim(cfg.Retention.DLQ),
		Audit:        lim(cfg.Retention.Audit),
	}
}

// keyRecipes are the gateway's key recipes by provider; nil without a
// gateway, whose config does not build keys.
func keyRecipes(cfg *config.Config) map[string]string {
	if !cfg.Roles.Gateway {
		return nil
	}
	r := make(map[string]string, len(cfg.Providers))
	for name, p := range cfg.Providers {
		r[name] = p.KeyRecipe()
	}
	return r
}

// openSystem starts the embedded server when nats.url is empty, connects,
// checks the max payload and provisions the streams.
// access says whether a command may create or update streams.
type access int

const (
	// readWrite: serve, which provisions the streams and buckets from
	// its config.
	readWrite access = iota
	// readOnly: every operator command (status, trace, replay, dlq). It
	// may write messages (a replay's GRANTS and AUDIT records) but never
	// creates or changes a stream or bucket: its config may not be the
	// one serve runs with (a copy edited for the next rollout), and
	// applying its limits would discard stored events or AUDIT records,
	// also on a dry run (review 9).
	readOnly
)

func openSystem(ctx context.Context, cfg *config.Config, logger *slog.Logger, name string, acc access) (*system, error) {
	return openSystemLocked(ctx, cfg, logger, name, acc, nil)
}

// openSystemLocked is openSystem with data_dir's lock already taken (serve,
// which takes it before it listens); it owns lock from then on, also when
// it fails. lock is nil with nats.url set.
func openSystemLocked(ctx context.Context, cfg *config.Config, logger *slog.Logger, name string, acc access, lock *os.File) (*system, error) {
	s := &system{cfg: cfg}
	need := cfg.HTTP.MaxBodyBytes + headerRoom
	opts := jetstream.ConnectOptions{Name: name, Log: logger, Lost: connectionLost(name, cfg.Roles.Gateway)}
	if cfg.NATS.URL == "" {
		// At least 8 MiB whatever max_body_bytes says now: events stored
		// under a larger limit earlier must still reach GRANTS and DLQ
		// (review AH). The gateway holds bodies to max_body_bytes itself.
		payload := int32(max(need, 8<<20))
		listen := cfg.NATS.Embedded.Listen
		if acc == readOnly {
			// An operator command that opens data_dir itself (nothing
			// answered at listen) keeps its server in-process: bound to
			// listen, it took the next command's connection, which then
			// failed when this one exited, where it should have met the
			// lock (audit 42: 3 to 5 of 8 concurrent `status` runs); and a
			// downstream service could connect to it. restore did already.
			listen = ""
		}
		e, err := jetstream.StartEmbedded(jetstream.EmbeddedOptions{
			DataDir:    cfg.NATS.Embedded.DataDir,
			Listen:     listen,
			Token:      cfg.NATS.Embedded.Token.Reveal(),
			SyncAlways: cfg.NATS.Embedded.Sync == config.SyncAlways,
			MaxPayload: payload,
			Limits:     cfg.Retention.TotalMaxBytes(),
			Log:        logger,
			Lock:       lock,
		})
		if err != nil {
			return nil, err
		}
		s.embedded = e
		opts.Embedded = e
		if e.ClientURL() != "" {
			logger.Info("embedded nats listening", slog.String("url", e.ClientURL()))
		}
	} else {
		opts.URL = cfg.NATS.URL
		opts.Credentials = cfg.NATS.Credentials
		t := cfg.NATS.TLS
		opts.CAFile, opts.CertFile, opts.KeyFile = t.CA, t.Cert, t.Key
	}
	c, err := jetstream.Connect(opts)
	if err != nil {
		s.Close()
		if cfg.NATS.URL != "" && errors.Is(err, jetstream.ErrNoServer) {
			// The key to look at, not the URL (it may hold credentials):
			// "no nats server answered" named neither (an operator tools
			// audit, stop 40).
			err = fmt.Errorf("%w (nothing answered at nats.url: check it, and that the NATS servers run)", err)
		}
		return nil, err
	}
	s.conn, s.opts = c, opts
	if mp := c.NC.MaxPayload(); mp < need {
		s.Close()
		fix := "raise max_payload on the NATS servers or lower http.max_body_bytes"
		if mp <= headerRoom {
			// No body limit fits: the headers' room alone fills it (the
			// advice to lower the limit could not work: audit 42).
			fix = fmt.Sprintf("raise max_payload on the NATS servers above %d (no http.max_body_bytes fits below it)", headerRoom)
		}
		return nil, fmt.Errorf("nats max_payload is %d bytes; http.max_body_bytes %d plus %d for headers needs %d: %s", mp, cfg.HTTP.MaxBodyBytes, headerRoom, need, fix)
	}
	if acc == readOnly {
		// Provision looks for it too; an operator command must not read
		// or write a store a restore left part way either. Any other
		// failure is the command's to meet and say its own way (status
		// still lists the serves when JetStream does not answer).
		if err := jetstream.UnfinishedRestore(ctx, c.JS); errors.Is(err, jetstream.ErrUnfinishedRestore) {
			s.Close()
			return nil, err
		}
		return s, nil
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sc := streamsConfig(cfg)
	told := map[string]bool{} // Provision retries; one warning a provider
	sc.RecipeChanged = func(provider, was, now string) {
		if told[provider] {
			return
		}
		told[provider] = true
		logger.Warn("provider's key recipe changed since the last start: a sender's retry of an event accepted before now gets a new key and applies again (see the README's \"Renaming or removing a provider\")",
			slog.String("provider", provider), slog.String("was", was), slog.String("now", now))
	}
	if err := jetstream.Provision(pctx, c.JS, sc); err != nil {
		if r := c.Refusal(); r != nil {
			// The requests timed out because the server refused them.
			err = fmt.Errorf("%w (%v)", r, err)
		}
		s.Close()
		return nil, err
	}
	return s, nil
}

// Ready reports whether JetStream answers and every stream and bucket
// this instance's roles write to exists (one deleted at runtime is named).
// The buckets belong to the consumer, which provisions them: a
// gateway-only instance does not wait for them.
func (s *system) Ready(ctx context.Context) error {
	if err := s.conn.StoreFailure(); err != nil {
		return err
	}
	if err := s.conn.Connected(); err != nil {
		return err
	}
	names := []string{jetstream.StreamWebhooks, jetstream.StreamGrants, jetstream.StreamDLQ, jetstream.StreamAudit}
	if s.cfg.Roles.Consumer {
		names = append(names, "KV_"+jetstream.BucketMarks, "KV_"+jetstream.BucketApplied)
	}
	for _, name := range names {
		st, err := s.conn.JS.Stream(ctx, name)
		if err != nil {
			if cerr := s.conn.Connected(); cerr != nil {
				// The connection dropped during the check: say so, not
				// nats.go's "outbound buffer limit exceeded" (a CI run).
				return cerr
			}
			return fmt.Errorf("jetstream %s: %w", name, err)
		}
		if name == jetstream.StreamWebhooks && s.cfg.Roles.Gateway {
			// What this instance takes webhooks into must take writes.
			if err := jetstream.NoQuorum(st.CachedInfo()); err != nil {
				return err
			}
		}
	}
	return nil
}

// extraConn opens another connection to the same NATS, closed by Close. The
// consumer gets its own so that its many small requests and the gateway's
// publishes do not queue behind each other in one connection's read loop
// and reply dispatcher (measured in the README's "Performance").
func (s *system) extraConn(name string) (*jetstream.Conn, error) {
	o := s.opts
	o.Name, o.Lost = name, connectionLost(name, s.cfg.Roles.Gateway)
	c, err := jetstream.Connect(o)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.extra = append(s.extra, c)
	s.mu.Unlock()
	return c, nil
}

// connections returns the system's connections to NATS: the main one,
// then extraConn's.
func (s *system) connections() []*jetstream.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*jetstream.Conn{s.conn}, s.extra...)
}

// Close closes the connections, then the embedded server.
func (s *system) Close() {
	s.mu.Lock()
	extra := s.extra
	s.mu.Unlock()
	for _, c := range extra {
		c.Close()
	}
	if s.conn != nil {
		s.conn.Close()
	}
	if s.embedded != nil {
		s.embedded.Shutdown()
	}
}

// connectionLost says what losing one of serve's NATS connections stops,
// for its disconnect warning: the consumer's said webhooks were answered
// 503, which only the gateway's loss does (review BI: every webhook sent
// during a consumer connection's drop got 200).
func connectionLost(name string, gateway bool) string {
	switch name {
	case "hookgate-serve":
		if !gateway {
			// roles: { gateway: false } takes no webhooks (a security
			// audit, stop 38, read the 503 wording on such a serve).
			return ""
		}
		return "webhooks this serve takes are answered 503 meanwhile"
	case "hookgate-consumer":
		return "this serve applies no event meanwhile; webhooks are not affected"
	}
	return ""
}
