// Package gateway is hookgate's HTTP edge: it verifies a webhook's
// signature, derives its idempotency key, stores it in JetStream and
// answers the sender (see CONTRACT.md, HTTP).
package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Publisher stores an event exactly once per key (jetstream.Publisher).
type Publisher interface {
	Publish(ctx context.Context, m jetstream.Message) (jetstream.PublishResult, error)
}

// KeyLookup is a Publisher that tells a stored key without a write (the
// key index): the rate limit lets such a redelivery through. Known must
// be safe for concurrent use; false says only that it cannot tell.
type KeyLookup interface {
	Known(key string) bool
}

// Auditor appends a decision to AUDIT without delaying the caller.
type Auditor interface {
	Record(r event.AuditRecord)
}

var (
	_ Publisher = (*jetstream.Publisher)(nil)
	_ Publisher = (*jetstream.KeyIndexPublisher)(nil)
	_ KeyLookup = (*jetstream.KeyIndexPublisher)(nil)
	_ Auditor   = (*jetstream.AuditWriter)(nil)
)

// Deps are the gateway's collaborators.
type Deps struct {
	Publisher Publisher
	Audit     Auditor
	// Ready reports whether webhooks can be taken: JetStream answers, the
	// streams exist (and, embedded, the key index is open).
	Ready func(ctx context.Context) error
	// Registry receives the gateway's metrics; Gatherer serves /metrics.
	Registry prometheus.Registerer
	Gatherer prometheus.Gatherer
	// Now is the clock (signature tolerance, Received-At); nil = time.Now.
	Now func() time.Time
	// AfterFunc runs the rejection limiter's end-of-second write of a
	// held-back record; nil = time.AfterFunc. A test with its own Now
	// sets one too, so that wall time cannot add records.
	AfterFunc func(d time.Duration, f func()) *time.Timer
}

// provider is one configured sender, compiled once at start.
type provider struct {
	name       string
	scheme     Scheme
	secrets    []config.Secret
	rule       KeyRule
	subject    *Source
	occurredAt *Source
	typ        *Source
	// skim is every JSON pointer the handler reads (account, event ids,
	// subject, occurred_at, type): skimmed without ParseJSON's tree while
	// an event id is configured (Payload.skimFor).
	skim []Pointer
	// limiter caps authenticated requests; nil when rate_limit is off.
	limiter *rate.Limiter
	metrics providerMetrics
}

// server holds what the handlers share. It is read-only after NewServer.
type server struct {
	log       *slog.Logger
	providers map[string]*provider
	deps      Deps
	metrics   *metrics
	rejects   *rejectLimiter
	// unstored limits the "webhook not stored" log lines (per provider).
	unstored     *rejectLimiter
	maxBody      int64
	publishLimit time.Duration
	// writeTimeout is http.timeouts.write, which runs from the end of
	// the request's headers: an answer must be written before it.
	writeTimeout time.Duration
}

// NewServer returns the gateway's handler: POST /webhooks/{provider}, and
// unless adminSeparate, /healthz, /readyz and /metrics. cfg must have
// passed Validate.
func NewServer(logger *slog.Logger, cfg *config.Config, deps Deps) (*Handler, error) {
	s, err := newServer(logger, cfg, deps)
	if err != nil {
		return nil, err
	}
	return &Handler{Handler: s.routes(cfg.HTTP.AdminListen == ""), s: s}, nil
}

// Handler is the gateway's HTTP handler (NewServer).
type Handler struct {
	http.Handler
	s *server
}

// FlushHeld writes now the rejection records (and "not stored" log lines)
// the per-provider limits hold back for the rest of their second, which
// carry the count of the others held back. Call it once no request is in
// flight (after the HTTP server's Shutdown) and before the AUDIT writer
// stops: a stop lost those counts (review 9). Safe for concurrent use.
func (h *Handler) FlushHeld() {
	h.s.rejects.flush()
	h.s.unstored.flush()
}

// NewAdminHandler serves /healthz, /readyz and /metrics alone, for
// http.admin_listen.
func NewAdminHandler(logger *slog.Logger, deps Deps) http.Handler {
	s := &server{log: logger, deps: deps}
	return s.adminRoutes()
}

func newServer(logger *slog.Logger, cfg *config.Config, deps Deps) (*server, error) {
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Registry == nil {
		deps.Registry = prometheus.NewRegistry()
	}
	s := &server{
		log:       logger,
		providers: map[string]*provider{},
		deps:      deps,
		metrics:   newMetrics(deps.Registry),
		rejects:   newRejectLimiter(5, deps.AfterFunc),
		unstored:  newRejectLimiter(5, deps.AfterFunc),
		maxBody:   cfg.HTTP.MaxBodyBytes,
		// Answer before the sender's own timeout; a slow store is a 503
		// it retries, never a hung request.
		publishLimit: publishLimit(cfg.HTTP.Timeouts.Write),
		writeTimeout: cfg.HTTP.Timeouts.Write,
	}
	names := make([]string, 0, len(cfg.Providers))
	for name := range cfg.Providers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p, err := compileProvider(name, cfg.Providers[name])
		if err != nil {
			return nil, fmt.Errorf("providers.%s: %w", name, err)
		}
		p.metrics = s.metrics.forProvider(name)
		s.providers[name] = p
	}
	return s, nil
}

func publishLimit(write time.Duration) time.Duration {
	limit := 10 * time.Second
	if write > 0 && write-time.Second < limit {
		limit = write - time.Second
	}
	if limit < time.Second {
		limit = time.Second
	}
	return limit
}

func compileProvider(name string, pc config.Provider) (*provider, error) {
	sch, err := NewScheme(pc.Signature.Scheme, SchemeOptions{Tolerance: pc.Signature.Tolerance, Header: pc.Signature.Header})
	if err != nil {
		return nil, err
	}
	p := &provider{name: name, scheme: sch, secrets: pc.Signature.Secrets}
	if rl := pc.RateLimit; rl.PerSecond > 0 {
		burst := rl.Burst
		if burst <= 0 {
			burst = rl.PerSecond
		}
		p.limiter = rate.NewLimiter(rate.Limit(rl.PerSecond), burst)
	}
	rule := KeyRule{
		Provider:      name,
		AccountHeader: http.CanonicalHeaderKey(pc.Account.Header),
		AccountValue:  pc.Account.Value,
		Fallback:      Fallback(pc.Fallback),
	}
	if pc.Account.JSON != "" {
		ptr, err := ParsePointer(pc.Account.JSON)
		if err != nil {
			return nil, fmt.Errorf("account.json %q: %w", pc.Account.JSON, err)
		}
		rule.AccountJSON = &ptr
	}
	for _, f := range pc.KeyFields {
		ptr, err := ParsePointer(f)
		if err != nil {
			return nil, fmt.Errorf("key_fields %q: %w", f, err)
		}
		rule.KeyFields = append(rule.KeyFields, ptr)
	}
	for _, raw := range pc.EventID {
		src, err := ParseSource(raw)
		if err != nil {
			return nil, fmt.Errorf("event_id: %w", err)
		}
		rule.EventID = append(rule.EventID, src)
		if src.IsJSON() {
			rule.NeedsJSON = true
		}
	}
	for _, f := range []struct {
		raw string
		dst **Source
	}{{pc.Subject, &p.subject}, {pc.OccurredAt, &p.occurredAt}, {pc.Type, &p.typ}} {
		if f.raw == "" {
			continue
		}
		src, err := ParseSource(f.raw)
		if err != nil {
			return nil, err
		}
		*f.dst = &src
		if src.IsJSON() {
			rule.NeedsJSON = true
		}
	}
	p.rule = rule
	if len(rule.EventID) > 0 {
		// Without an event id every key is a digest of the tree: skimming
		// first would only add to it.
		if rule.AccountJSON != nil {
			p.skim = append(p.skim, *rule.AccountJSON)
		}
		for _, src := range rule.EventID {
			if src.IsJSON() {
				p.skim = append(p.skim, src.ptr)
			}
		}
		for _, src := range []*Source{p.subject, p.occurredAt, p.typ} {
			if src != nil && src.IsJSON() {
				p.skim = append(p.skim, src.ptr)
			}
		}
	}
	return p, nil
}
