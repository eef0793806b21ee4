package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// The webhook route is /webhooks/{provider}: one non-empty segment, POST
// only; everything else is 404 (or mux's 301 to the cleaned path).
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
		{http.MethodPost, "/webhooks//p", http.StatusMovedPermanently, ""},
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
	}
}
