package gateway

import (
	"context"
	"net/http"
	"strings"
	"time"
)

func (s *server) handleHealthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, answer{Status: "ok"})
	})
}

// handleReadyz is 200 once deps.Ready passes: JetStream answers, the
// streams exist and (embedded serve) the key index is open.
func (s *server) handleReadyz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.deps.Ready == nil {
			writeJSON(w, http.StatusServiceUnavailable, answer{Error: "not ready"})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.deps.Ready(ctx); err != nil {
			w.Header().Set("Retry-After", "5")
			writeJSON(w, http.StatusServiceUnavailable, answer{Error: "not ready: " + err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, answer{Status: "ready"})
	})
}

// handleNotFound answers 404; webhooks says whether this listener takes
// webhooks.
func (s *server) handleNotFound(webhooks bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !webhooks {
			// A listener without the webhook route: http.admin_listen, or
			// http.listen of a serve with roles.gateway off. A webhook
			// posted here was told to use the very path it had used (an
			// edge audit, stop 38).
			writeJSON(w, http.StatusNotFound, answer{Error: "no such endpoint: this listener serves /healthz, /readyz and /metrics only (http.admin_listen, or a serve with roles.gateway off); webhooks go to POST /webhooks/{provider} on a gateway's http.listen"})
			return
		}
		if r.URL.Path == "/webhooks" || strings.HasPrefix(r.URL.Path, webhookPrefix) {
			// A sender posting to a wrong URL under /webhooks (a trailing
			// slash, a doubled one): the same alert as an unknown
			// provider's (review Z: counted nowhere before).
			if s.metrics != nil {
				s.metrics.unknownProvider.Inc()
			}
			writeJSON(w, http.StatusNotFound, answer{Error: "no such endpoint; webhooks go to POST /webhooks/{provider}: one path segment, no trailing or doubled slash"})
			return
		}
		writeJSON(w, http.StatusNotFound, answer{Error: "no such endpoint; webhooks go to POST /webhooks/{provider}"})
	})
}

func (s *server) handleMethodNotAllowed() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The admin endpoints are read with GET (or HEAD); every other
		// route is a webhook's.
		allow := http.MethodPost
		switch r.URL.Path {
		case "/healthz", "/readyz", "/metrics":
			allow = http.MethodGet + ", " + http.MethodHead
		}
		w.Header().Set("Allow", allow)
		writeJSON(w, http.StatusMethodNotAllowed, answer{Error: "method " + r.Method + " not allowed; use " + strings.ReplaceAll(allow, ", ", " or ")})
	})
}
