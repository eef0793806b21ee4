package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/gateway"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/prometheus/client_golang/prometheus"
)

// review9Server serves the providers of yaml over a real embedded
// JetStream, with the gateway's clock at now (nil: time.Now).
func review9Server(t *testing.T, yaml string, now func() time.Time) *httptest.Server {
	t.Helper()
	env := jstest.Start(t, "")
	cfg := mustConfig(t, yaml)
	reg := prometheus.NewRegistry()
	deps := gateway.Deps{
		Publisher: jetstream.NewPublisher(env.Conn, 5*time.Second),
		Audit:     &auditRecorder{},
		Ready:     func(context.Context) error { return nil },
		Registry:  reg, Gatherer: reg, Now: now,
	}
	h, err := gateway.NewServer(slog.New(slog.NewTextHandler(io.Discard, nil)), cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// review9Post posts body to path with h (and Host, when not empty) and
// returns the status and the decoded JSON answer.
func review9Post(t *testing.T, srv *httptest.Server, path, host string, h http.Header, body string) (int, map[string]string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	if host != "" {
		req.Host = host
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("answer %d %q is not JSON: %v", resp.StatusCode, b, err)
	}
	return resp.StatusCode, m
}

// A sender whose clock or code is off (the classic: milliseconds in
// webhook-timestamp) gets a 401 whose reason says how far ahead the
// timestamp is. Beyond ~292 years time.Time.Sub saturates to the minimum
// Duration, and fmtSchemeAge(-d) negates it back to itself: the answer
// reads "too new: -2562047h47m16.854775808s after now".
func TestReview9FarFutureTimestampMessage(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	now := time.Unix(1614265330, 0)
	srv := review9Server(t, `
providers:
  sw:
    signature: { scheme: standard-webhooks, secrets: ["`+secret+`"] }
  st:
    signature: { scheme: stripe, secrets: ["whsec_stripe"] }
`, func() time.Time { return now })
	body := `{"id":"evt_1","test":2432232314}`
	ms := now.UnixMilli() // milliseconds where seconds belong
	for _, tc := range []struct {
		path string
		sign func() http.Header
	}{
		{"/webhooks/sw", func() http.Header {
			sch, _ := gateway.NewScheme(gateway.SchemeStandardWebhooks, gateway.SchemeOptions{})
			h, err := sch.Sign([]byte(body), config.Secret(secret), "msg_ms", time.Unix(ms, 0))
			if err != nil {
				t.Fatal(err)
			}
			return h
		}},
		{"/webhooks/st", func() http.Header {
			sch, _ := gateway.NewScheme(gateway.SchemeStripe, gateway.SchemeOptions{})
			h, err := sch.Sign([]byte(body), config.Secret("whsec_stripe"), "", time.Unix(ms, 0))
			if err != nil {
				t.Fatal(err)
			}
			return h
		}},
	} {
		status, ans := review9Post(t, srv, tc.path, "", tc.sign(), body)
		if status != http.StatusUnauthorized {
			t.Fatalf("%s: status %d, want 401", tc.path, status)
		}
		if msg := ans["error"]; !strings.Contains(msg, "too new") || strings.Contains(msg, "new: -") {
			t.Errorf("%s: 401 reason %q; want a non-negative distance (e.g. \"more than 1000h after now\")", tc.path, msg)
		}
	}
}

// account.header: Host partitions a multi-tenant sender by the host name
// it posts to. net/http moves Host out of r.Header into r.Host, so the
// source never finds it: every tenant silently gets account "default",
// and tenants that reuse an event id (per-tenant counters) are answered
// "duplicate" and their events are never stored.
func TestReview9AccountFromHostHeader(t *testing.T) {
	srv := review9Server(t, `
providers:
  p:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["`+testSecret+`"] }
    event_id: ["json:/id"]
    account: { header: Host }
`, nil)
	body := `{"id":"1"}`
	for _, tenant := range []string{"alpha.example.com", "beta.example.com"} {
		status, ans := review9Post(t, srv, "/webhooks/p", tenant, signed(t, body), body)
		want := "p:" + tenant + ":evt:1"
		if status != http.StatusOK || ans["key"] != want || ans["status"] != "accepted" {
			t.Errorf("Host %s: %d %v; want 200 accepted with key %s", tenant, status, ans, want)
		}
	}
}

// With fallback: fields the README says "empty counts as absent
// everywhere" and "when every key field is missing the key falls back to
// the digest (else all such events would be duplicates of the first)".
// fieldsDigest counts only null as absent: two different events whose key
// fields are all "" get the same fld: key, and the second is answered
// "duplicate" and never stored.
func TestReview9FieldsAllEmptyFallBackToDigest(t *testing.T) {
	srv := review9Server(t, `
providers:
  f:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["`+testSecret+`"] }
    event_id: []
    fallback: fields
    key_fields: ["/grant_id", "/status"]
`, nil)
	first := `{"grant_id":"","status":"","amount":100}`
	second := `{"grant_id":"","status":"","amount":250}`
	s1, a1 := review9Post(t, srv, "/webhooks/f", "", signed(t, first), first)
	s2, a2 := review9Post(t, srv, "/webhooks/f", "", signed(t, second), second)
	if s1 != 200 || s2 != 200 {
		t.Fatalf("statuses %d, %d; want 200, 200", s1, s2)
	}
	if a2["status"] != "accepted" || a1["key"] == a2["key"] {
		t.Fatalf("two different events with all key fields empty: first %v, second %v; want the second accepted under its own dig: key", a1, a2)
	}
	if !strings.HasPrefix(a1["key"], "f:default:dig:") {
		t.Errorf("key %q; want a dig: key (every key field is empty, i.e. absent)", a1["key"])
	}
}

// A timestamp just past the tolerance is refused with a distance that is
// past it too: rounded to the second it read "5m0s after now, tolerance
// 5m0s" (a security audit, stop 41).
func TestToleranceEdgeSaysHowFarPast(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	signed := time.Unix(1614265330, 0)
	for _, tc := range []struct {
		now  time.Time
		want string
	}{
		{signed.Add(5*time.Minute + 300*time.Millisecond), "webhook-timestamp too old: 5m0.3s before now, tolerance 5m0s"},
		{signed.Add(-5*time.Minute - 2*time.Millisecond), "webhook-timestamp too new: 5m0.002s after now, tolerance 5m0s"},
		{signed.Add(-5*time.Minute - 1500*time.Millisecond), "webhook-timestamp too new: 5m2s after now, tolerance 5m0s"},
	} {
		srv := review9Server(t, `
providers:
  sw:
    signature: { scheme: standard-webhooks, secrets: ["`+secret+`"] }
`, func() time.Time { return tc.now })
		sch, _ := gateway.NewScheme(gateway.SchemeStandardWebhooks, gateway.SchemeOptions{})
		h, err := sch.Sign([]byte(`{"id":"e"}`), config.Secret(secret), "msg_edge", signed)
		if err != nil {
			t.Fatal(err)
		}
		status, ans := review9Post(t, srv, "/webhooks/sw", "", h, `{"id":"e"}`)
		if status != http.StatusUnauthorized || !strings.Contains(ans["error"], tc.want) {
			t.Errorf("now %s: %d %q, want 401 saying %q", tc.now.Sub(signed), status, ans["error"], tc.want)
		}
	}
}
