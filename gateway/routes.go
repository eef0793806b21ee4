package gateway

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/gorilla/mux"
	"github.com/hookgate/hookgate/config"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// router is the only place that knows gorilla/mux: webhook serves POST
// /webhooks/{provider} (nil: no webhook route), and with admin the
// /healthz, /readyz and /metrics routes, metrics serving the last.
func (s *server) router(webhook http.Handler, admin bool, metrics http.Handler) *mux.Router {
	r := mux.NewRouter()
	// A path that needs cleaning (/webhooks//p, /webhooks/a/../p) is no
	// route (404), not mux's 301 to the cleaned one: senders rarely
	// repeat a POST after a redirect, and every answer is JSON.
	r.SkipClean(true)
	if webhook != nil {
		// /webhooks/{provider}, matched without a regexp or a vars map:
		// it is every request's route (see providerName).
		r.MatcherFunc(isWebhookPath).Methods(http.MethodPost).Handler(webhook)
	}
	if admin {
		r.Handle("/healthz", s.handleHealthz()).Methods(http.MethodGet, http.MethodHead)
		r.Handle("/readyz", s.handleReadyz()).Methods(http.MethodGet, http.MethodHead)
		r.Handle("/metrics", metrics).Methods(http.MethodGet, http.MethodHead)
	}
	r.NotFoundHandler = s.handleNotFound(webhook != nil)
	r.MethodNotAllowedHandler = s.handleMethodNotAllowed()
	return r
}

// routes is NewServer's handler.
func (s *server) routes(withAdmin bool) http.Handler {
	webhook := s.handleWebhook()
	r := s.router(webhook, withAdmin, s.handleMetrics())
	// Every request's route is taken before the router, which would match
	// it the same way but copy the request twice (its route and vars in
	// the context: about 1 KB per request, which nothing here reads).
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost && isWebhookPath(req, nil) {
			webhook.ServeHTTP(w, req)
			return
		}
		r.ServeHTTP(w, req)
	})
}

func (s *server) adminRoutes() http.Handler { return s.router(nil, true, s.handleMetrics()) }

func (s *server) handleMetrics() http.Handler {
	var g prometheus.Gatherer = prometheus.NewRegistry()
	if s.deps.Gatherer != nil {
		g = s.deps.Gatherer
	}
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

// NewStartingHandler answers on a listener while serve opens the event
// store: the embedded server's recovery after a kill -9 (about a second
// per GB stored), an external cluster's connect retries, the streams'
// provisioning. /healthz answers 200, so a liveness probe does not kill a
// process that is recovering (and make it start over); /metrics serves
// metrics (what is registered so far: a scrape sees the process starting
// instead of failing); /readyz and webhooks to a configured provider
// answer 503 with Retry-After, and nothing is stored, so senders retry;
// an unknown provider is 404 as ever. webhooks says which routes the
// listener serves: NewServer's (webhooks, and the admin routes when
// http.admin_listen is empty), or else NewAdminHandler's. A nil metrics
// serves an empty registry. Safe for concurrent use.
func NewStartingHandler(cfg *config.Config, webhooks bool, metrics prometheus.Gatherer) http.Handler {
	s := &server{deps: Deps{Ready: func(context.Context) error { return errStarting }, Gatherer: metrics}}
	unavailable := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, answer{Error: errStarting.Error() + "; retry later"})
	})
	var webhook http.Handler
	if webhooks {
		webhook = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if name := providerName(req); !hasProvider(cfg, name) {
				writeUnknownProvider(w, name)
				return
			}
			unavailable.ServeHTTP(w, req)
		})
	}
	return s.router(webhook, !webhooks || cfg.HTTP.AdminListen == "", s.handleMetrics())
}

// errStarting is what NewStartingHandler's 503s say.
var errStarting = errors.New("starting: the event store is being opened")

const webhookPrefix = "/webhooks/"

// isWebhookPath matches what the template /webhooks/{provider} would: one
// non-empty path segment after the prefix (mux has cleaned the path).
func isWebhookPath(r *http.Request, _ *mux.RouteMatch) bool {
	name, ok := strings.CutPrefix(r.URL.Path, webhookPrefix)
	return ok && name != "" && !strings.Contains(name, "/")
}

// providerName is the {provider} segment of a path isWebhookPath matched.
func providerName(r *http.Request) string { return strings.TrimPrefix(r.URL.Path, webhookPrefix) }

func hasProvider(cfg *config.Config, name string) bool {
	_, ok := cfg.Providers[name]
	return ok
}
