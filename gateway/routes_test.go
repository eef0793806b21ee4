package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/gateway"
	"github.com/prometheus/client_golang/prometheus"
)

// The webhook route is /webhooks/{provider}: one non-empty segment, POST
// only; everything else is a JSON 404, a path that needs cleaning too (it
// was mux's 301 with an HTML body, which senders do not follow with a
// POST). A 405 names the methods the path takes.
func TestWebhookRoute(t *testing.T) {
	srv, _, _ := newGateway(t, "")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	const noRoute = "no such endpoint"
	body := `{"id":"evt_route","grant_id":"G-1","at":"2026-11-30T10:00:00Z"}`
	for _, tc := range []struct {
		method, path string
		want         int
		answer       string // part of the body
	}{
		{http.MethodPost, "/webhooks/p", http.StatusOK, `"status":"accepted"`},
		{http.MethodPost, "/webhooks/nope", http.StatusNotFound, `unknown provider \"nope\"`},
		{http.MethodGet, "/webhooks/p", http.StatusMethodNotAllowed, "POST"},
		{http.MethodPost, "/webhooks/", http.StatusNotFound, noRoute},
		{http.MethodPost, "/webhooks", http.StatusNotFound, noRoute},
		{http.MethodPost, "/webhooks/p/extra", http.StatusNotFound, noRoute},
		{http.MethodPost, "/webhooks/p/", http.StatusNotFound, noRoute},
		{http.MethodPost, "/webhooks/p%2Fextra", http.StatusNotFound, noRoute},
		{http.MethodPost, "/webhooksp", http.StatusNotFound, noRoute},
		{http.MethodPost, "/webhooks//p", http.StatusNotFound, noRoute},
		{http.MethodPost, "/webhooks/x/../p", http.StatusNotFound, noRoute},
		{http.MethodPost, "/healthz", http.StatusMethodNotAllowed, "use GET or HEAD"},
		{http.MethodDelete, "/metrics", http.StatusMethodNotAllowed, "use GET or HEAD"},
		{http.MethodHead, "/metrics", http.StatusOK, ""},
		{http.MethodGet, "/readyz", http.StatusOK, "ready"},
	} {
		req, err := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = signed(t, body)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want || !strings.Contains(string(b), tc.answer) {
			t.Errorf("%s %s = %d %s; want %d with %s", tc.method, tc.path, resp.StatusCode, b, tc.want, tc.answer)
		}
		if ct := resp.Header.Get("Content-Type"); tc.method != http.MethodHead && tc.path != "/metrics" && ct != "application/json" {
			t.Errorf("%s %s: Content-Type %q, want application/json", tc.method, tc.path, ct)
		}
		wantAllow := map[bool]string{true: "POST", false: "GET, HEAD"}[strings.HasPrefix(tc.path, "/webhooks")]
		if allow := resp.Header.Get("Allow"); tc.want == http.StatusMethodNotAllowed && allow != wantAllow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, allow, wantAllow)
		}
		if tc.want == http.StatusNotFound && strings.HasPrefix(tc.path, "/webhooks/") && tc.answer == noRoute && !strings.Contains(string(b), "no trailing or doubled slash") {
			t.Errorf("%s %s: %s; want it to say what a webhook path looks like", tc.method, tc.path, b)
		}
	}
	// Every 404 under /webhooks is a sender posting to a wrong URL, the
	// unknown provider's alert (a trailing slash was counted nowhere):
	// /webhooks/nope and the seven no-route paths under /webhooks.
	resp, err := client.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "hookgate_gateway_unknown_provider_total 8\n"; !strings.Contains(string(m), want) {
		t.Errorf("/metrics lacks %q:\n%s", want, grepLines(string(m), "unknown_provider"))
	}
}

// grepLines is text's lines containing s.
func grepLines(text, s string) string {
	var out []string
	for l := range strings.Lines(text) {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

// While serve opens the event store its listeners answer: /healthz 200
// (a liveness probe must not kill a recovering process), /metrics 200
// with what is registered so far, /readyz and webhooks to a configured
// provider 503 with Retry-After, an unknown
// provider 404 (review 10), every other route as NewServer's do. A
// webhook listener with http.admin_listen set has no admin routes, the
// admin listener no webhooks.
func TestStartingHandler(t *testing.T) {
	cfg := func(adminListen string) *config.Config {
		c, err := config.Parse([]byte(`
http: { admin_listen: "`+adminListen+`" }
providers:
  p:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["s3cret-s3cret-s3cret"] }
`), t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// What serve registers before the store opens (cmd/hookgate).
	reg := prometheus.NewRegistry()
	starting := prometheus.NewGauge(prometheus.GaugeOpts{Name: "hookgate_starting", Help: "test"})
	starting.Set(1)
	reg.MustRegister(starting)
	for _, tc := range []struct {
		webhooks     bool
		adminListen  string
		method, path string
		want         int
		answer       string
	}{
		{true, "", http.MethodGet, "/healthz", http.StatusOK, `"status":"ok"`},
		{true, "", http.MethodHead, "/healthz", http.StatusOK, ""},
		{true, "", http.MethodGet, "/readyz", http.StatusServiceUnavailable, "not ready: starting"},
		{true, "", http.MethodGet, "/metrics", http.StatusOK, "hookgate_starting 1"},
		{false, "127.0.0.1:0", http.MethodGet, "/metrics", http.StatusOK, "hookgate_starting 1"},
		{true, "127.0.0.1:0", http.MethodGet, "/metrics", http.StatusNotFound, "no such endpoint"},
		{true, "", http.MethodPost, "/webhooks/p", http.StatusServiceUnavailable, "starting: the event store is being opened; retry later"},
		{true, "", http.MethodPost, "/webhooks/any-name", http.StatusNotFound, `unknown provider \"any-name\"`},
		{true, "", http.MethodGet, "/webhooks/p", http.StatusMethodNotAllowed, "POST"},
		{true, "", http.MethodPost, "/webhooks//p", http.StatusNotFound, "no such endpoint"},
		{true, "", http.MethodPost, "/healthz", http.StatusMethodNotAllowed, "use GET or HEAD"},
		{true, "127.0.0.1:0", http.MethodGet, "/healthz", http.StatusNotFound, "no such endpoint"},
		{true, "127.0.0.1:0", http.MethodPost, "/webhooks/p", http.StatusServiceUnavailable, "retry later"},
		{false, "127.0.0.1:0", http.MethodGet, "/healthz", http.StatusOK, `"status":"ok"`},
		{false, "127.0.0.1:0", http.MethodPost, "/webhooks/p", http.StatusNotFound, "no such endpoint"},
		{false, "", http.MethodGet, "/readyz", http.StatusServiceUnavailable, "not ready: starting"},
	} {
		h := gateway.NewStartingHandler(cfg(tc.adminListen), tc.webhooks, reg)
		req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(`{"id":"x"}`))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		name := fmt.Sprintf("webhooks=%v admin_listen=%q %s %s", tc.webhooks, tc.adminListen, tc.method, tc.path)
		if w.Code != tc.want || !strings.Contains(w.Body.String(), tc.answer) {
			t.Errorf("%s = %d %s; want %d with %q", name, w.Code, w.Body, tc.want, tc.answer)
		}
		if ra := w.Header().Get("Retry-After"); (w.Code == http.StatusServiceUnavailable) != (ra != "") {
			t.Errorf("%s: status %d with Retry-After %q", name, w.Code, ra)
		}
		if ct := w.Header().Get("Content-Type"); tc.method != http.MethodHead && ct != "application/json" && !(tc.path == "/metrics" && strings.HasPrefix(ct, "text/plain")) {
			t.Errorf("%s: Content-Type %q", name, ct)
		}
	}
}

// A listener without the webhook route (http.admin_listen, or a serve
// with the gateway role off) tells a webhook posted there where they go,
// not the very path it used (an edge audit, stop 38).
func TestAdminListenerSendsWebhooksToTheMainOne(t *testing.T) {
	h := gateway.NewAdminHandler(slog.New(slog.DiscardHandler), gateway.Deps{Ready: func(context.Context) error { return nil }})
	for _, path := range []string{"/webhooks/p", "/other"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader("{}")))
		if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "webhooks go to POST /webhooks/{provider} on a gateway's http.listen") {
			t.Errorf("POST %s on the admin listener: %d %s; want 404 pointing to a gateway's http.listen", path, rec.Code, rec.Body.String())
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("GET /healthz on the admin listener: %d, want 200", rec.Code)
	}
}
