package gateway

import (
	"net/http"
	"strings"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// routes is the only place that knows gorilla/mux.
func (s *server) routes(withAdmin bool) http.Handler {
	r := mux.NewRouter()
	// A path that needs cleaning (/webhooks//p, /webhooks/a/../p) is no
	// route (404), not mux's 301 to the cleaned one: senders rarely
	// repeat a POST after a redirect, and every answer is JSON.
	r.SkipClean(true)
	// /webhooks/{provider}, matched without a regexp or a vars map: it is
	// every request's route (see providerName).
	r.MatcherFunc(isWebhookPath).Methods(http.MethodPost).Handler(s.handleWebhook())
	if withAdmin {
		s.addAdmin(r)
	}
	r.NotFoundHandler = s.handleNotFound()
	r.MethodNotAllowedHandler = s.handleMethodNotAllowed()
	return r
}

func (s *server) adminRoutes() http.Handler {
	r := mux.NewRouter()
	r.SkipClean(true)
	s.addAdmin(r)
	r.NotFoundHandler = s.handleNotFound()
	r.MethodNotAllowedHandler = s.handleMethodNotAllowed()
	return r
}

func (s *server) addAdmin(r *mux.Router) {
	r.Handle("/healthz", s.handleHealthz()).Methods(http.MethodGet, http.MethodHead)
	r.Handle("/readyz", s.handleReadyz()).Methods(http.MethodGet, http.MethodHead)
	var g prometheus.Gatherer = prometheus.NewRegistry()
	if s.deps.Gatherer != nil {
		g = s.deps.Gatherer
	}
	r.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{})).Methods(http.MethodGet, http.MethodHead)
}

const webhookPrefix = "/webhooks/"

// isWebhookPath matches what the template /webhooks/{provider} would: one
// non-empty path segment after the prefix (mux has cleaned the path).
func isWebhookPath(r *http.Request, _ *mux.RouteMatch) bool {
	name, ok := strings.CutPrefix(r.URL.Path, webhookPrefix)
	return ok && name != "" && !strings.Contains(name, "/")
}

// providerName is the {provider} segment of a path isWebhookPath matched.
func providerName(r *http.Request) string { return strings.TrimPrefix(r.URL.Path, webhookPrefix) }
