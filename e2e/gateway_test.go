package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

const (
	grantsSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	portalSecret = "portal-e2e-secret"
	natsToken    = "e2e-token"
)

// env is one test's hookgate: config, data dir, NATS address.
type env struct {
	dir     string
	cfgPath string
	natsURL string
}

// newEnv writes a config with an embedded server listening on loopback, so
// the test can read the streams. extra is appended under providers: as is.
func newEnv(t testing.TB, natsURL string) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{dir: dir, cfgPath: filepath.Join(dir, "hookgate.yaml")}
	natsBlock := fmt.Sprintf("  url: %q\n", natsURL)
	if natsURL == "" {
		port := freePort(t)
		e.natsURL = fmt.Sprintf("nats://127.0.0.1:%d", port)
		natsBlock = fmt.Sprintf("  embedded:\n    data_dir: %q\n    listen: \"127.0.0.1:%d\"\n    token: %q\n", filepath.Join(dir, "data"), port, natsToken)
	} else {
		e.natsURL = natsURL
	}
	cfg := fmt.Sprintf(`http:
  listen: "127.0.0.1:0"
  max_body_bytes: 65536
  timeouts: { read_header: 2s, read: 5s, write: 10s, idle: 30s }
nats:
%s
providers:
  grants:
    signature: { scheme: standard-webhooks, secrets: [%q] }
    event_id: ["header:webhook-id"]
    subject: "json:/grant_id"
    occurred_at: "json:/occurred_at"
    type: "json:/type"
  portal:
    signature: { scheme: hmac-sha256, header: X-Portal-Signature, secrets: [%q] }
    event_id: ["json:/id"]
    fallback: digest
    subject: "json:/grant_id"
    occurred_at: "json:/occurred_at"
  strict:
    signature: { scheme: hmac-sha256, header: X-Portal-Signature, secrets: [%q] }
    event_id: ["json:/id"]
    fallback: reject
`, natsBlock, grantsSecret, portalSecret, portalSecret)
	if err := os.WriteFile(e.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

// signGrants signs body as a Standard Webhooks sender, with the reference
// library.
func signGrants(t testing.TB, id string, body []byte) http.Header {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(grantsSecret)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sig, err := wh.Sign(id, now, body)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", fmt.Sprint(now.Unix()))
	h.Set("webhook-signature", sig)
	return h
}

func signPortal(body []byte) http.Header {
	m := hmac.New(sha256.New, []byte(portalSecret))
	m.Write(body)
	h := http.Header{}
	h.Set("X-Portal-Signature", "sha256="+hex.EncodeToString(m.Sum(nil)))
	return h
}

func decode(t testing.TB, r response) map[string]string {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		t.Fatalf("answer %d %q is not JSON: %v", r.status, r.body, err)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q", ct)
	}
	return m
}

func expect(t testing.TB, r response, status int, field, want string) map[string]string {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body %s", r.status, status, r.body)
	}
	m := decode(t, r)
	if field != "" && m[field] != want {
		t.Fatalf("%s = %q, want %q; body %s", field, m[field], want, r.body)
	}
	return m
}

func TestGatewayIdempotencyChecks(t *testing.T) {
	e := newEnv(t, "")
	hg := start(t, e.cfgPath)
	j := natsClient(t, e.natsURL, natsToken)
	url := hg.baseURL + "/webhooks/grants"

	// 1. A redelivery of the same event is suppressed.
	body := []byte(`{"grant_id":"G-42","type":"application.submitted","occurred_at":"2026-11-30T10:00:00Z"}`)
	a := expect(t, post(t, url, signGrants(t, "msg_1", body), body), 200, "status", "accepted")
	if a["key"] != "grants:default:evt:msg_1" {
		t.Fatalf("key = %q", a["key"])
	}
	expect(t, post(t, url, signGrants(t, "msg_1", body), body), 200, "status", "duplicate")

	// 2. Without an event id the canonical digest still deduplicates, even
	// when the sender re-serializes the JSON differently.
	p1 := []byte(`{"grant_id":"G-7","occurred_at":"2026-11-30T10:00:00Z","amount":1.0}`)
	p2 := []byte(`{ "amount": 1.0, "occurred_at": "2026-11-30T10:00:00Z",  "grant_id": "G-7" }`)
	purl := hg.baseURL + "/webhooks/portal"
	d1 := expect(t, post(t, purl, signPortal(p1), p1), 200, "status", "accepted")
	if !strings.HasPrefix(d1["key"], "portal:default:dig:") {
		t.Fatalf("digest key = %q", d1["key"])
	}
	d2 := expect(t, post(t, purl, signPortal(p2), p2), 200, "status", "duplicate")
	if d2["key"] != d1["key"] {
		t.Fatalf("re-serialized body got key %q, want %q", d2["key"], d1["key"])
	}

	// 3. A new event on the same grant is processed.
	body3 := []byte(`{"grant_id":"G-42","type":"application.approved","occurred_at":"2026-11-30T11:00:00Z"}`)
	expect(t, post(t, url, signGrants(t, "msg_2", body3), body3), 200, "status", "accepted")

	keys := storedKeys(t, j)
	want := []string{"grants:default:evt:msg_1", d1["key"], "grants:default:evt:msg_2"}
	if strings.Join(keys, ",") != strings.Join(want, ",") {
		t.Fatalf("WEBHOOKS holds %v, want %v", keys, want)
	}
}

func TestGatewayConcurrentIdenticalDeliveries(t *testing.T) {
	e := newEnv(t, "")
	hg := start(t, e.cfgPath)
	j := natsClient(t, e.natsURL, natsToken)
	body := []byte(`{"grant_id":"G-1","type":"award.disbursed","occurred_at":"2026-11-30T10:00:00Z"}`)
	h := signGrants(t, "msg_same", body)
	const n = 200
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		results = map[string]int{}
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := post(t, hg.baseURL+"/webhooks/grants", h, body)
			var m map[string]string
			_ = json.Unmarshal([]byte(r.body), &m)
			mu.Lock()
			results[fmt.Sprintf("%d %s", r.status, m["status"])]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if results["200 accepted"] != 1 || results["200 duplicate"] != n-1 {
		t.Fatalf("answers = %v; want 1 accepted, %d duplicate", results, n-1)
	}
	if keys := storedKeys(t, j); len(keys) != 1 {
		t.Fatalf("WEBHOOKS holds %d messages, want 1", len(keys))
	}
}

func TestGatewayForgedThenGenuine(t *testing.T) {
	e := newEnv(t, "")
	hg := start(t, e.cfgPath)
	j := natsClient(t, e.natsURL, natsToken)
	url := hg.baseURL + "/webhooks/grants"
	body := []byte(`{"grant_id":"G-9","type":"x","occurred_at":"2026-11-30T10:00:00Z"}`)
	forged := signGrants(t, "msg_f", body)
	forged.Set("webhook-signature", "v1,"+strings.Repeat("A", 43)+"=")
	expect(t, post(t, url, forged, body), 401, "", "")
	// A forged body under a genuine signature of another body.
	other := []byte(`{"grant_id":"G-9","type":"y","occurred_at":"2026-11-30T10:00:00Z"}`)
	expect(t, post(t, url, signGrants(t, "msg_f", other), body), 401, "", "")
	if keys := storedKeys(t, j); len(keys) != 0 {
		t.Fatalf("forged deliveries stored %v", keys)
	}
	expect(t, post(t, url, signGrants(t, "msg_f", body), body), 200, "status", "accepted")
}

func TestGatewayDuplicateAfterKill9(t *testing.T) {
	e := newEnv(t, "")
	hg := start(t, e.cfgPath)
	url := hg.baseURL + "/webhooks/grants"
	body := []byte(`{"grant_id":"G-5","type":"x","occurred_at":"2026-11-30T10:00:00Z"}`)
	expect(t, post(t, url, signGrants(t, "msg_k", body), body), 200, "status", "accepted")
	hg.kill()

	hg = start(t, e.cfgPath)
	url = hg.baseURL + "/webhooks/grants"
	expect(t, post(t, url, signGrants(t, "msg_k", body), body), 200, "status", "duplicate")
	j := natsClient(t, e.natsURL, natsToken)
	if keys := storedKeys(t, j); len(keys) != 1 {
		t.Fatalf("WEBHOOKS holds %v, want one message", keys)
	}
	hg.stop(t)
}

func TestGatewayBadRequests(t *testing.T) {
	e := newEnv(t, "")
	hg := start(t, e.cfgPath)
	j := natsClient(t, e.natsURL, natsToken)

	big := []byte(`{"grant_id":"G","pad":"` + strings.Repeat("x", 70000) + `"}`)
	expect(t, post(t, hg.baseURL+"/webhooks/grants", signGrants(t, "msg_big", big), big), 413, "", "")

	r := post(t, hg.baseURL+"/webhooks/nosuch", nil, []byte(`{}`))
	expect(t, r, 404, "", "")

	resp, err := client.Get(hg.baseURL + "/webhooks/grants")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Fatalf("GET /webhooks/grants = %d, want 405", resp.StatusCode)
	}

	trunc := []byte(`{"grant_id":"G-1","type":`)
	m := expect(t, post(t, hg.baseURL+"/webhooks/portal", signPortal(trunc), trunc), 400, "", "")
	if !strings.Contains(strings.ToLower(m["error"]), "json") {
		t.Fatalf("400 error %q does not say the JSON is bad", m["error"])
	}
	noID := []byte(`{"grant_id":"G-1"}`)
	m = expect(t, post(t, hg.baseURL+"/webhooks/strict", signPortal(noID), noID), 400, "", "")
	if !strings.Contains(m["error"], "/id") {
		t.Fatalf("400 error %q does not name the missing id source", m["error"])
	}
	if keys := storedKeys(t, j); len(keys) != 0 {
		t.Fatalf("bad requests stored %v", keys)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := client.Get(hg.baseURL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s = %d", path, resp.StatusCode)
		}
	}
	// A stream deleted under a running hookgate makes it not ready, named.
	if err := j.DeleteStream(t.Context(), "AUDIT"); err != nil {
		t.Fatal(err)
	}
	resp, err = client.Get(hg.baseURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "AUDIT") {
		t.Fatalf("/readyz without AUDIT = %d %s, want 503 naming AUDIT", resp.StatusCode, body)
	}
}

// A body of exactly max_body_bytes (65536 here) is stored whole, with all
// the headers hookgate adds (the contract: such a body always fits a
// JetStream message); one byte more is a 413, and nothing of it is stored.
func TestGatewayBodyAtTheLimitIsStored(t *testing.T) {
	e := newEnv(t, "")
	hg := start(t, e.cfgPath)
	j := natsClient(t, e.natsURL, natsToken)
	body := func(n int) []byte {
		head := `{"grant_id":"G-1","type":"t","occurred_at":"2026-11-30T10:00:00Z","pad":"`
		return []byte(head + strings.Repeat("x", n-len(head)-2) + `"}`)
	}
	at, over := body(65536), body(65537)
	if len(at) != 65536 || len(over) != 65537 {
		t.Fatalf("bodies of %d and %d bytes", len(at), len(over))
	}
	expect(t, post(t, hg.baseURL+"/webhooks/grants", signGrants(t, "msg_at_limit", at), at), 200, "status", "accepted")
	expect(t, post(t, hg.baseURL+"/webhooks/grants", signGrants(t, "msg_over_limit", over), over), 413, "", "")
	if keys := storedKeys(t, j); !slices.Equal(keys, []string{"grants:default:evt:msg_at_limit"}) {
		t.Fatalf("stored %v, want only the body at the limit", keys)
	}
	s, err := j.Stream(t.Context(), "WEBHOOKS")
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Data, at) {
		t.Fatalf("stored body of %d bytes differs from the %d sent", len(m.Data), len(at))
	}
}
