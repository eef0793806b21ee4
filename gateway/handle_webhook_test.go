package gateway_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/gateway"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/prometheus/client_golang/prometheus"
)

// auditRecorder keeps records in memory.
// auditRecorder keeps the records; locked, since the limiter's late
// writes come from a timer's goroutine. Tests read recs once their
// requests are answered.
type auditRecorder struct {
	mu   sync.Mutex
	recs []event.AuditRecord
}

func (a *auditRecorder) Record(r event.AuditRecord) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recs = append(a.recs, r)
}

const testSecret = "gateway-test-secret"

// newGateway serves one hmac-sha256 provider "p" over a real embedded
// JetStream. extra is appended to the provider's YAML block; opts adjust
// the deps (a clock, say).
func newGateway(t *testing.T, extra string, opts ...func(*gateway.Deps)) (*httptest.Server, *jstest.Env, *auditRecorder) {
	t.Helper()
	return newGatewayLog(t, extra, slog.New(slog.NewTextHandler(io.Discard, nil)), opts...)
}

// newGatewayLog is newGateway logging to logger.
func newGatewayLog(t *testing.T, extra string, logger *slog.Logger, opts ...func(*gateway.Deps)) (*httptest.Server, *jstest.Env, *auditRecorder) {
	t.Helper()
	env := jstest.Start(t, "")
	yaml := `
providers:
  p:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["` + testSecret + `"] }
    event_id: ["json:/id"]
    subject: "json:/grant_id"
    occurred_at: "json:/at"
` + extra
	cfg := mustConfig(t, yaml)
	audit := &auditRecorder{}
	reg := prometheus.NewRegistry()
	deps := gateway.Deps{
		Publisher: jetstream.NewPublisher(env.Conn, 5*time.Second),
		Audit:     audit,
		Ready:     func(context.Context) error { return nil },
		Registry:  reg,
		Gatherer:  reg,
	}
	for _, o := range opts {
		o(&deps)
	}
	if deps.Now != nil && deps.AfterFunc == nil {
		// A test with its own clock: the limiter's end-of-second write
		// must not run on wall time and add a record the test does not
		// expect (its window is the test's clock, its timer would not be).
		deps.AfterFunc = func(time.Duration, func()) *time.Timer { return time.NewTimer(time.Hour) }
	}
	h, err := gateway.NewServer(logger, cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, env, audit
}

func signed(t *testing.T, body string) http.Header {
	t.Helper()
	sch, err := gateway.NewScheme("hmac-sha256", gateway.SchemeOptions{Header: "X-Sig"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := sch.Sign([]byte(body), config.Secret(testSecret), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func do(t *testing.T, srv *httptest.Server, h http.Header, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/p", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestRateLimitAfterAuthentication(t *testing.T) {
	// The gateway's clock stands still, then moves a second: the limits
	// are exact, whatever the machine's speed.
	var clock atomic.Int64
	clock.Store(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC).UnixNano())
	srv, _, audit := newGateway(t, "    rate_limit: { per_second: 1, burst: 2 }\n",
		func(d *gateway.Deps) { d.Now = func() time.Time { return time.Unix(0, clock.Load()) } })
	// Forged requests do not spend the provider's budget.
	for range 5 {
		if r := do(t, srv, http.Header{"X-Sig": {"sha256=00"}}, `{"id":"f"}`); r.StatusCode != 401 {
			t.Fatalf("forged: %d, want 401", r.StatusCode)
		}
	}
	var statuses []int
	var retryAfter string
	for i := range 4 {
		body := `{"id":"e` + string(rune('a'+i)) + `","grant_id":"G","at":"2026-11-30T10:00:00Z"}`
		r := do(t, srv, signed(t, body), body)
		statuses = append(statuses, r.StatusCode)
		if r.StatusCode == 429 {
			retryAfter = r.Header.Get("Retry-After")
		}
	}
	if want := []int{200, 200, 429, 429}; !slices.Equal(statuses, want) {
		t.Fatalf("statuses = %v; want %v (burst 2 at 1/s)", statuses, want)
	}
	if retryAfter != "1" {
		t.Fatalf("429 with Retry-After %q, want 1", retryAfter)
	}
	// The forged requests used this second's audit budget for rejections
	// (5); the 429s have one of their own (review Z), so each is recorded,
	// and the next second's rejection stands for no other.
	var limited int
	for _, r := range audit.recs {
		if r.Status == http.StatusTooManyRequests && r.Suppressed == 0 {
			limited++
		}
	}
	if limited != 2 {
		t.Fatalf("%d records of 429s, want 2 (their own budget): %+v", limited, audit.recs)
	}
	clock.Add(int64(time.Second))
	do(t, srv, http.Header{"X-Sig": {"sha256=00"}}, `{"id":"f"}`)
	if last := audit.recs[len(audit.recs)-1]; last.Decision != event.DecisionRejected || last.Status != 401 || last.Suppressed != 0 {
		t.Fatalf("the next second's record %+v, want a 401 standing for no other", last)
	}
}

func TestStoredHeadersDropCredentialsAndSteering(t *testing.T) {
	srv, env, _ := newGateway(t, "")
	body := `{"id":"h1","grant_id":"G-1","at":"2026-11-30T10:00:00Z"}`
	h := signed(t, body)
	h.Set("Authorization", "Bearer hunter2")
	h.Set("Cookie", "session=abc")
	h.Set("Proxy-Authorization", "Basic eA==")
	h.Set("Nats-Msg-Id", "attacker-chosen")
	h.Set("Nats-Expected-Stream", "OTHER")
	h.Set("Hookgate-Key", "forged-key")
	h.Set("X-Portal-Trace", "kept")
	if r := do(t, srv, h, body); r.StatusCode != 200 {
		t.Fatalf("status %d", r.StatusCode)
	}
	m, err := jetstream.GetMsg(t.Context(), env.Conn, jetstream.StreamWebhooks, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Authorization", "Cookie", "Proxy-Authorization", "Nats-Expected-Stream"} {
		if v := m.Header.Get(name); v != "" {
			t.Errorf("stored %s: %q", name, v)
		}
	}
	if got := m.Header.Get("Nats-Msg-Id"); got != "p:default:evt:h1" {
		t.Errorf("Nats-Msg-Id = %q, want the derived key", got)
	}
	if got := m.Header.Get(event.HeaderKey); got != "p:default:evt:h1" {
		t.Errorf("Hookgate-Key = %q, want the derived key", got)
	}
	if got := m.Header.Get("X-Portal-Trace"); got != "kept" {
		t.Errorf("X-Portal-Trace = %q, want kept", got)
	}
	want := map[string]string{event.HeaderProvider: "p", event.HeaderAccount: "default", event.HeaderSubject: "G-1", event.HeaderOccurredAt: "2026-11-30T10:00:00Z"}
	for k, v := range want {
		if got := m.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if !bytes.Equal(m.Body, []byte(body)) {
		t.Errorf("body changed: %q", m.Body)
	}
	if _, err := time.Parse(time.RFC3339Nano, m.Header.Get(event.HeaderReceivedAt)); err != nil {
		t.Errorf("Received-At: %v", err)
	}
	if m.Subject != "webhooks.p.default" {
		t.Errorf("subject = %q", m.Subject)
	}
}

func TestRejectedFloodIsAuditedSparingly(t *testing.T) {
	// The gateway's clock stands still for the flood, then moves a second:
	// 5 records a second per provider, the next one says how many it
	// stands for.
	var clock atomic.Int64
	clock.Store(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC).UnixNano())
	var log lockedBuffer
	srv, _, audit := newGatewayLog(t, "", slog.New(slog.NewJSONHandler(&log, nil)),
		func(d *gateway.Deps) { d.Now = func() time.Time { return time.Unix(0, clock.Load()) } })
	for range 50 {
		do(t, srv, http.Header{"X-Sig": {"sha256=00"}}, `{"id":"x"}`)
	}
	clock.Add(int64(time.Second))
	do(t, srv, http.Header{"X-Sig": {"sha256=00"}}, `{"id":"x"}`)
	var got []int // suppressed, per rejected record
	for _, r := range audit.recs {
		if r.Decision == event.DecisionRejected {
			if r.Status != 401 || r.Reason == "" {
				t.Fatalf("record %+v", r)
			}
			got = append(got, r.Suppressed)
		}
	}
	if want := []int{0, 0, 0, 0, 0, 45}; !slices.Equal(got, want) {
		t.Fatalf("rejected records' suppressed counts %v for 51 forged requests, want %v", got, want)
	}
	// The log is held to the same limit (a flood must not fill the disk
	// through it either).
	if n := strings.Count(log.String(), `"msg":"webhook rejected"`); n != 6 {
		t.Fatalf("%d 'webhook rejected' log lines for 51 forged requests, want 6", n)
	}
}

// lockedBuffer is a bytes.Buffer for a logger written from the server's
// goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestMetricsCountDecisions reads /metrics after one request of each kind:
// the per-provider series are resolved once at start, so check they are the
// right ones.
func TestMetricsCountDecisions(t *testing.T) {
	srv, _, _ := newGateway(t, "")
	body := `{"id":"m1","grant_id":"G-1","at":"2026-11-30T10:00:00Z"}`
	for i, want := range []int{200, 200} {
		if r := do(t, srv, signed(t, body), body); r.StatusCode != want {
			t.Fatalf("request %d: %d", i, r.StatusCode)
		}
	}
	if r := do(t, srv, http.Header{"X-Sig": {"sha256=00"}}, body); r.StatusCode != 401 {
		t.Fatalf("forged: %d", r.StatusCode)
	}
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		`hookgate_gateway_requests_total{decision="accepted",provider="p",status="200"} 1`,
		`hookgate_gateway_requests_total{decision="duplicate",provider="p",status="200"} 1`,
		`hookgate_gateway_requests_total{decision="rejected",provider="p",status="401"} 1`,
		`hookgate_gateway_publish_seconds_count{outcome="stored",provider="p"} 1`,
		`hookgate_gateway_publish_seconds_count{outcome="duplicate",provider="p"} 1`,
		`hookgate_gateway_request_seconds_count{provider="p"} 3`,
	} {
		if !strings.Contains(string(text), line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}
}

// Every account makes a key (the contract: "deterministic, never an
// error"): one over 1 KiB is stored as the acct# form the key carries; an
// extracted subject over 1 KiB is a 400 naming its source (our limit).
func TestLongExtractedValues(t *testing.T) {
	srv, env, _ := newGateway(t, "    account: { header: X-Account }\n")
	body := `{"id":"long-1","grant_id":"G-1","at":"2026-11-30T10:00:00Z"}`
	h := signed(t, body)
	h.Set("X-Account", strings.Repeat("a", 1025))
	if r := do(t, srv, h, body); r.StatusCode != http.StatusOK {
		t.Fatalf("account of 1025 bytes: status %d, want 200", r.StatusCode)
	}
	m, err := jetstream.GetMsg(t.Context(), env.Conn, jetstream.StreamWebhooks, 1)
	if err != nil {
		t.Fatal(err)
	}
	acct := m.Header.Get(event.HeaderAccount)
	if !strings.HasPrefix(acct, "acct#") || !strings.Contains(m.Header.Get(event.HeaderKey), ":"+acct+":") {
		t.Fatalf("stored account %q, key %q; want the key's acct# form", acct, m.Header.Get(event.HeaderKey))
	}
	body = `{"id":"long-2","grant_id":"` + strings.Repeat("g", 1025) + `","at":"2026-11-30T10:00:00Z"}`
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/p", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = signed(t, body)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg), "/grant_id") {
		t.Fatalf("subject of 1025 bytes: %d %s, want 400 naming json:/grant_id", resp.StatusCode, msg)
	}
}

// Distinct subjects stay distinct through the stored headers (NATS header
// values lose CR, LF and white space at either end; the old escaping made
// "G\n1" and `G\n1` one subject, so one watermark).
func TestDistinctSubjectsStayDistinct(t *testing.T) {
	srv, env, _ := newGateway(t, "")
	subjects := []string{`G\n1`, "G\n1", "G-2 ", "G-2", " G-2", `"G-2"`, "G\t3"}
	for i, subj := range subjects {
		js, err := json.Marshal(subj)
		if err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf(`{"id":"s%d","grant_id":%s,"at":"2026-11-30T10:00:00Z"}`, i, js)
		if r := do(t, srv, signed(t, body), body); r.StatusCode != http.StatusOK {
			t.Fatalf("subject %q: status %d", subj, r.StatusCode)
		}
		m, err := jetstream.GetMsg(t.Context(), env.Conn, jetstream.StreamWebhooks, uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if got := jetstream.EventFromMsg(m.Header, m.Body, m.Seq).Subject; got != subj {
			t.Errorf("subject %q read back from WEBHOOKS as %q", subj, got)
		}
	}
}

// A compressed body is refused with 415 naming the encoding, and nothing
// is stored: kept as sent, it would reach GRANTS and forward receivers as
// gzip bytes without their Content-Encoding (and a provider needing JSON
// answered a misleading "invalid UTF-8"). Found by review.
func TestCompressedBodyRefused(t *testing.T) {
	srv, env, audit := newGateway(t, "")
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = zw.Write([]byte(`{"id":"z1","grant_id":"G-1","at":"2026-11-30T10:00:00Z"}`))
	_ = zw.Close()
	for _, tc := range []struct {
		encoding string
		want     int
	}{
		{"gzip", http.StatusUnsupportedMediaType},
		{"identity, br", http.StatusUnsupportedMediaType},
		{"identity", http.StatusOK},
	} {
		body := zipped.String()
		if tc.want == http.StatusOK {
			body = `{"id":"z2","grant_id":"G-1","at":"2026-11-30T10:00:00Z"}`
		}
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/p", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = signed(t, body)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", tc.encoding)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Fatalf("Content-Encoding %q: %d %s, want %d", tc.encoding, resp.StatusCode, answer, tc.want)
		}
		if tc.want != http.StatusOK && !strings.Contains(string(answer), "uncompressed") {
			t.Errorf("Content-Encoding %q: answer %s does not say what to do", tc.encoding, answer)
		}
	}
	info, err := env.Conn.JS.Stream(t.Context(), jetstream.StreamWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != 1 {
		t.Fatalf("WEBHOOKS holds %d messages, want only the identity-encoded one", n)
	}
	if got := audit.recs[0]; got.Decision != event.DecisionRejected || got.Status != http.StatusUnsupportedMediaType || !strings.Contains(got.Reason, `"gzip"`) {
		t.Fatalf("first audit record %+v, want a 415 rejection naming gzip", got)
	}
}

// mustConfig parses and validates a config for a test.
func mustConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A request's Status and Description headers are not stored with an empty
// body: NATS gives a message without payload and with those headers as a
// status, and nats.go's pull took such an event for a pull timeout (or a
// deleted consumer) and never handed it over (review F). With a body they
// are stored like any other header.
func TestStoredHeadersNoStatusWithEmptyBody(t *testing.T) {
	srv, env, _ := newGateway(t, `
  r:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["`+testSecret+`"] }
    event_id: ["header:X-Event-Id"]
`)
	for i, body := range []string{"", "a=1"} {
		h := signed(t, body)
		h.Set("X-Event-Id", fmt.Sprint("e", i))
		h.Set("Content-Type", "text/plain")
		h.Set("Status", "408")
		h.Set("Description", "Consumer Deleted")
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/r", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = h
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("body %q: status %d", body, resp.StatusCode)
		}
		m, err := jetstream.GetMsg(t.Context(), env.Conn, jetstream.StreamWebhooks, uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		wantStatus := ""
		if body != "" {
			wantStatus = "408"
		}
		if got := m.Header.Get("Status"); got != wantStatus || m.Header.Get("X-Event-Id") != fmt.Sprint("e", i) {
			t.Errorf("body %q: stored Status %q (want %q), X-Event-Id %q", body, got, wantStatus, m.Header.Get("X-Event-Id"))
		}
		if got := m.Header.Get("Description"); (got != "") != (body != "") {
			t.Errorf("body %q: stored Description %q", body, got)
		}
	}
}
