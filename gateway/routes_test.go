package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
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
	}
}
