package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// runNATS starts a standalone JetStream server on a fixed loopback port
// and store dir, as an external cluster of one.
func runNATS(t testing.TB, port int, storeDir string) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: storeDir,
		MaxPayload: 4 << 20, NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(20 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	return s
}

func TestGatewayNATSOutageAnswers503ThenRecovers(t *testing.T) {
	port := freePort(t)
	store := t.TempDir()
	ns := runNATS(t, port, store)
	e := newEnv(t, fmt.Sprintf("nats://127.0.0.1:%d", port))
	hg := start(t, e.cfgPath)
	url := hg.baseURL + "/webhooks/grants"

	body := []byte(`{"grant_id":"G-1","type":"x","occurred_at":"2026-11-30T10:00:00Z"}`)
	expect(t, post(t, url, signGrants(t, "msg_before", body), body), 200, "status", "accepted")

	ns.Shutdown()
	ns.WaitForShutdown()
	for i := range 5 {
		id := fmt.Sprintf("msg_during_%d", i)
		r := post(t, url, signGrants(t, id, body), body)
		if r.status != 503 || r.header.Get("Retry-After") == "" {
			t.Fatalf("during outage: status %d, Retry-After %q, body %s; want 503 with Retry-After", r.status, r.header.Get("Retry-After"), r.body)
		}
	}
	resp, err := client.Get(hg.baseURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Fatalf("/readyz during outage = %d, want 503", resp.StatusCode)
	}

	ns = runNATS(t, port, store)
	defer ns.Shutdown()
	// The sender retries; hookgate reconnects by itself, no restart.
	var last response
	waitFor(t, "an accepted delivery after NATS came back", 30*time.Second, func() bool {
		last = post(t, url, signGrants(t, "msg_during_0", body), body)
		return last.status == 200
	})
	expect(t, last, 200, "status", "accepted")
	expect(t, post(t, url, signGrants(t, "msg_before", body), body), 200, "status", "duplicate")
	j := natsClient(t, e.natsURL, "")
	if keys := storedKeys(t, j); len(keys) != 2 {
		t.Fatalf("WEBHOOKS holds %v, want msg_before and msg_during_0", keys)
	}
}

// In external mode, serve refuses a cluster whose max payload cannot carry
// a max_body_bytes body plus its headers, and says what to change.
func TestServeRefusesSmallMaxPayload(t *testing.T) {
	port := freePort(t)
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: t.TempDir(), MaxPayload: 512 << 10, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	defer s.Shutdown()
	if !s.ReadyForConnections(20 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	cfg, _ := writeConfig(t, `http: { listen: "127.0.0.1:0", max_body_bytes: 1048576 }
nats: { url: "nats://127.0.0.1:`+fmt.Sprint(port)+`" }
dedup: { horizon: 1h }
providers:
  mac: { signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["mac-secret"] }%.0s }
`)
	_, errOut, code := cli(t, "serve", "--config", cfg)
	if code != 1 || !strings.Contains(errOut, "max_payload") || !strings.Contains(errOut, "max_body_bytes") {
		t.Fatalf("serve against a 512 KiB max payload: exit %d, %q", code, errOut)
	}
}
