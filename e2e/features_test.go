package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/testpki"
	"github.com/nats-io/nats.go"
)

// writeConfig writes a config from a template with %[1]s = data dir.
func writeConfig(t testing.TB, body string) (cfgPath, dir string) {
	t.Helper()
	dir = t.TempDir()
	cfgPath = filepath.Join(dir, "hookgate.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(body, filepath.Join(dir, "data"))), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfgPath, dir
}

// `hookgate sign` prints headers that the gateway accepts, for every
// scheme (read back through curl-style "Name: value" lines).
func TestSignCommandHeadersAreAccepted(t *testing.T) {
	cfg, _ := writeConfig(t, `http: { listen: "127.0.0.1:0" }
nats: { embedded: { data_dir: %q } }
roles: { consumer: false }
providers:
  sw:     { signature: { scheme: standard-webhooks, secrets: ["whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ="] } }
  stripe: { signature: { scheme: stripe, secrets: ["whsec_stripe_test"] } }
  gh:     { signature: { scheme: github, secrets: ["gh-secret"] } }
  shop:   { signature: { scheme: shopify, secrets: ["shop-secret"] } }
  mac:    { signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["mac-secret"] } }
`)
	hg := start(t, cfg)
	body := []byte(`{"id":"evt_1","type":"x"}`)
	for _, p := range []string{"sw", "stripe", "gh", "shop", "mac"} {
		t.Run(p, func(t *testing.T) {
			cmd := exec.Command(binary, "sign", "--config", cfg, "--provider", p, "--id", "id-"+p)
			cmd.Stdin = strings.NewReader(string(body))
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("sign: %v", err)
			}
			h := http.Header{}
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				name, value, ok := strings.Cut(line, ": ")
				if !ok {
					t.Fatalf("sign printed %q, not Name: value", line)
				}
				h.Add(name, value)
			}
			expect(t, post(t, hg.baseURL+"/webhooks/"+p, h, body), 200, "status", "accepted")
			// The same headers over another body are refused.
			expect(t, post(t, hg.baseURL+"/webhooks/"+p, h, []byte(`{"id":"evt_1","type":"y"}`)), 401, "", "")
		})
	}
	if _, errOut, code := cli(t, "sign", "--config", cfg, "--provider", "nosuch"); code != 1 || !strings.Contains(errOut, `"nosuch"`) {
		t.Fatalf("sign unknown provider: exit %d, %q", code, errOut)
	}
}

// admin_listen moves /healthz, /readyz and /metrics off the webhook port.
func TestAdminListenSeparatesAdminEndpoints(t *testing.T) {
	admin := freePort(t)
	cfg, _ := writeConfig(t, `http: { listen: "127.0.0.1:0", admin_listen: "127.0.0.1:`+fmt.Sprint(admin)+`" }
nats: { embedded: { data_dir: %q } }
providers:
  mac: { signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["mac-secret"] } }
`)
	hg := start(t, cfg)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d%s", admin, path))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("admin %s = %d", path, resp.StatusCode)
		}
		resp, err = client.Get(hg.baseURL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Fatalf("webhook port %s = %d, want 404", path, resp.StatusCode)
		}
	}
}

// With tls set, the gateway serves HTTPS only.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	pki := testpki.Write(t, dir, "")
	certPath, keyPath := pki.ServerCert, pki.ServerKey
	cfg, _ := writeConfig(t, `http: { listen: "127.0.0.1:0", tls: { cert: "`+certPath+`", key: "`+keyPath+`" } }
nats: { embedded: { data_dir: %q } }
providers:
  mac: { signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["mac-secret"] } }
`)
	hg := start(t, cfg)
	if !strings.HasPrefix(hg.baseURL, "https://") {
		t.Fatalf("listening on %s, want https", hg.baseURL)
	}
	pem, err := os.ReadFile(pki.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := c.Get(hg.baseURL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("https /healthz = %d", resp.StatusCode)
	}
	plain, err := client.Get("http://" + strings.TrimPrefix(hg.baseURL, "https://") + "/healthz")
	if err == nil {
		plain.Body.Close()
		if plain.StatusCode == 200 {
			t.Fatal("plain HTTP answered 200 on the TLS port")
		}
	}
}

// The generated NATS token is kept in data_dir with mode 0600, and the
// CLI with the wrong token is refused.
func TestTokenFileIsPrivate(t *testing.T) {
	port := freePort(t)
	cfg, dir := writeConfig(t, `http: { listen: "127.0.0.1:0" }
nats: { embedded: { data_dir: %q, listen: "127.0.0.1:`+fmt.Sprint(port)+`" } }
providers:
  mac: { signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["mac-secret"] } }
`)
	start(t, cfg)
	st, err := os.Stat(filepath.Join(dir, "data", "nats.token"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("nats.token mode %v, want 0600", st.Mode().Perm())
	}
	// A NATS client without the token, or with a wrong one, is refused.
	for _, opts := range [][]nats.Option{nil, {nats.Token("wrong")}} {
		nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", port), append(opts, nats.Timeout(5*time.Second))...)
		if err == nil {
			nc.Close()
			t.Fatal("NATS accepted a client without the right token")
		}
	}
	if _, errOut, code := cli(t, "status", "--config", cfg); code != 0 {
		t.Fatalf("status with the generated token: exit %d %s", code, errOut)
	}
}

// TestLogLevel: by default routine decisions stay out of the log (AUDIT has
// them) while a dead letter is a warning; log.level: debug adds a line per
// gateway and consumer decision.
func TestLogLevel(t *testing.T) {
	applied := []byte(`{"grant_id":"G-1","type":"award.made","occurred_at":"2026-11-30T10:00:00Z"}`)
	noTime := []byte(`{"grant_id":"G-2","type":"award.made"}`) // dead-lettered at once: no occurred_at
	for _, level := range []string{"", "debug"} {
		t.Run("level="+level, func(t *testing.T) {
			e := newEnv(t, "")
			if level != "" {
				f, err := os.OpenFile(e.cfgPath, os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				_, err = fmt.Fprintf(f, "log: { level: %s }\n", level)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			hg := start(t, e.cfgPath)
			j := natsClient(t, e.natsURL, natsToken)
			url := hg.baseURL + "/webhooks/grants"
			expect(t, post(t, url, signGrants(t, "msg_a", applied), applied), 200, "status", "accepted")
			expect(t, post(t, url, signGrants(t, "msg_b", noTime), noTime), 200, "status", "accepted")
			waitFor(t, "the dead letter's warning", 30*time.Second, func() bool {
				return strings.Contains(hg.stderr.String(), `"level":"WARN","msg":"event dead-lettered: 'hookgate dlq show LETTER' shows it`) &&
					strings.Contains(hg.stderr.String(), `"decision":"dead-lettered"`)
			})
			// The consumer logs each decision before it acks: once both
			// events are acked, every line there will be is written.
			waitFor(t, "msg_a applied (AUDIT)", 30*time.Second, func() bool {
				return auditHas(t, j, "applied", "grants:default:evt:msg_a")
			})
			waitFor(t, "both deliveries acked", 30*time.Second, func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				c, err := j.Consumer(ctx, "WEBHOOKS", "hookgate-apply")
				if err != nil {
					return false
				}
				info, err := c.Info(ctx)
				return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream == 2
			})
			logs := hg.stderr.String()
			gatewayLines := strings.Count(logs, `"msg":"webhook"`)
			appliedLines := strings.Count(logs, `"decision":"applied"`)
			if level == "" && (gatewayLines != 0 || appliedLines != 0) {
				t.Fatalf("default level logged %d gateway and %d applied lines:\n%s", gatewayLines, appliedLines, logs)
			}
			if level == "debug" && (gatewayLines != 2 || appliedLines != 1) {
				t.Fatalf("debug logged %d gateway lines (want 2) and %d applied (want 1):\n%s", gatewayLines, appliedLines, logs)
			}
		})
	}
}

// A full WEBHOOKS (retention.webhooks.max_bytes reached; DiscardNew)
// answers 503 with Retry-After and stores nothing; a retry of an event
// already stored is still its 200 duplicate.
func TestFullWebhooksAnswers503(t *testing.T) {
	cfg, _ := writeConfig(t, `http: { listen: "127.0.0.1:0", max_body_bytes: 4096 }
nats: { embedded: { data_dir: %q } }
dedup: { horizon: 1h }
retention: { webhooks: { max_age: 1h, max_bytes: 20000 } }
roles: { consumer: false }
providers:
  mac: { signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["mac-secret"] } }
`)
	hg := start(t, cfg)
	send := func(id string) response {
		body := []byte(`{"id":"` + id + `","pad":"` + strings.Repeat("x", 3000) + `"}`)
		mac := hmac.New(sha256.New, []byte("mac-secret"))
		mac.Write(body)
		return post(t, hg.baseURL+"/webhooks/mac", http.Header{"X-Sig": {"sha256=" + hex.EncodeToString(mac.Sum(nil))}}, body)
	}
	stored := 0
	for i := 0; ; i++ {
		if i == 20 {
			t.Fatal("20 events of 3 KB all stored in a 20000-byte stream")
		}
		r := send(fmt.Sprint("e", i))
		if r.status == http.StatusOK {
			stored++
			expect(t, r, 200, "status", "accepted")
			continue
		}
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, "error") {
			t.Fatalf("event %d into a full stream: %d %s, Retry-After %q; want 503 with an error and Retry-After", i, r.status, r.body, r.header.Get("Retry-After"))
		}
		break
	}
	if stored == 0 {
		t.Fatal("nothing stored before the stream was full")
	}
	expect(t, send("e0"), 200, "status", "duplicate")
	// The refused event was not stored: sent again it is refused again,
	// not a duplicate.
	if r := send(fmt.Sprint("e", stored)); r.status != http.StatusServiceUnavailable {
		t.Fatalf("the refused event sent again: %d %s, want 503 (nothing of it stored)", r.status, r.body)
	}
}
