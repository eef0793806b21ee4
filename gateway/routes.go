package gateway

import (
	"net/http"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// routes is the only place that knows gorilla/mux.
func (s *server) routes(withAdmin bool) http.Handler {
	r := mux.NewRouter()
	r.Handle("/webhooks/{provider}", s.handleWebhook()).Methods(http.MethodPost)
	if withAdmin {
		s.addAdmin(r)
	}
	r.NotFoundHandler = s.handleNotFound()
	r.MethodNotAllowedHandler = s.handleMethodNotAllowed()
	return r
}

func (s *server) adminRoutes() http.Handler {
	r := mux.NewRouter()
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
	r.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{})).Methods(http.MethodGet)
}

func providerName(r *http.Request) string { return mux.Vars(r)["provider"] }
