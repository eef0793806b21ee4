package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/testpki"
)

// Review L: the lifecycle of serve's start again in place
// (cmd/hookgate/store_recovery.go, serve.go's carried lock and sockets).

// reviewLEditConfig replaces old with new in e's config file (once).
func reviewLEditConfig(t *testing.T, e *env, old, new string) {
	t.Helper()
	b, err := os.ReadFile(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("config has no %q", old)
	}
	if err := os.WriteFile(e.cfgPath, []byte(strings.Replace(string(b), old, new, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// README: "the config file is read again, as at a restart". An operator
// who edits http.listen to the same port written another way (127.0.0.1
// -> localhost, or 0.0.0.0 to expose it) would have a restart by hand
// work: the old process let the port go. In place, the carried socket is
// looked up by the configured string, not found, and closed only after
// the new listen: the new one's bind collides with serve's own socket,
// and serve exits 1 after the full disk it was meant to ride out.
func TestReviewLStartAgainSamePortSpelledOtherwise(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	port := reviewRFixedPort(t, e)
	hg, addr := reviewRServe(t, e.cfgPath, 1024)
	hg.baseURL = reviewRAddr(t, hg, addr, "at first")
	reviewRFillUntil503(t, hg.baseURL, "sp0", map[string]bool{})
	reviewLEditConfig(t, e, fmt.Sprintf(`listen: "127.0.0.1:%d"`, port), fmt.Sprintf(`listen: "localhost:%d"`, port))
	reviewRFsize(t, hg, "unlimited")
	select {
	case a := <-addr:
		t.Logf("started again, listening on %s", a)
	case <-hg.done:
		t.Fatalf("serve exited (code %d) at the start again after http.listen 127.0.0.1:%d was written localhost:%d (a restart by hand takes it):\n%s",
			hg.cmd.ProcessState.ExitCode(), port, port, tailString(hg.stderr.String(), 3))
	case <-time.After(90 * time.Second):
		t.Fatalf("no start again within 90s:\n%s", tailString(hg.stderr.String(), 20))
	}
}

// README: "/healthz answers throughout" a start again. The stop of the
// run before waits for its in-flight requests (http.Server.Shutdown, up
// to 30 s) before the next run accepts: one sender slow to send its body
// (http.timeouts.read, 30 s by default) holds every new connection in
// the kernel's queue that long, while every webhook is answered 503
// anyway (the store stopped writing). A liveness probe with a 2 s
// timeout fails for the whole wait.
func TestReviewLSlowRequestHoldsHealthzThroughStartAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	reviewLEditConfig(t, e, "read: 5s", "read: 30s")
	port := reviewRFixedPort(t, e)
	hg, addr := reviewRServe(t, e.cfgPath, 1024)
	hg.baseURL = reviewRAddr(t, hg, addr, "at first")
	reviewRFillUntil503(t, hg.baseURL, "sl0", map[string]bool{})

	// A sender whose body comes slowly (a slow link): headers sent, 1 of
	// 100 body bytes, then nothing.
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "POST /webhooks/grants HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}

	stop := reviewRProbeHealthz(hg.baseURL, 50*time.Millisecond)
	lifted := time.Now()
	reviewRFsize(t, hg, "unlimited")
	reviewRAddr(t, hg, addr, "after the start again")
	waitFor(t, "/readyz 200", 30*time.Second, func() bool { return readyz(hg.baseURL) == http.StatusOK })
	failed := stop()
	t.Logf("start again %s after the limit was lifted", time.Since(lifted).Round(time.Millisecond))
	if failed != "" {
		t.Errorf("/healthz failed %s while serve started again in place with one slow sender connected", failed)
	}
}

// A start again with http.tls and http.admin_listen set: both kept
// sockets are served again (ServeTLS wraps the kept listener), webhooks
// are taken on https and the admin routes answer on the admin port.
func TestReviewLStartAgainTLSAndAdminListen(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	pki := testpki.Write(t, t.TempDir(), "")
	admin := freePort(t)
	reviewLEditConfig(t, e, `listen: "127.0.0.1:0"`, fmt.Sprintf(`listen: "127.0.0.1:0"
  admin_listen: "127.0.0.1:%d"
  tls: { cert: %q, key: %q }`, admin, pki.ServerCert, pki.ServerKey))
	pem, err := os.ReadFile(pki.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	adminURL := fmt.Sprintf("https://127.0.0.1:%d", admin)
	get := func(url string) int {
		resp, err := c.Get(url)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	hg, addr := reviewRServe(t, e.cfgPath, 1024)
	hg.baseURL = reviewRAddr(t, hg, addr, "at first")
	if !strings.HasPrefix(hg.baseURL, "https://") {
		t.Fatalf("listening on %s, want https", hg.baseURL)
	}
	pad := strings.Repeat("x", 1000)
	refused := 0
	for i := 0; i < 20000 && refused < 2; i++ {
		body := []byte(fmt.Sprintf(`{"grant_id":"G-tl-%d","type":"t","occurred_at":"2026-11-30T10:00:00Z","pad":%q}`, i, pad))
		switch code, _ := postOnce(c, hg.baseURL+"/webhooks/grants", signGrants(t, fmt.Sprintf("tl_%d", i), body), body); code {
		case http.StatusOK:
		case http.StatusServiceUnavailable:
			refused++
		default:
			t.Fatalf("event %d: %d", i, code)
		}
	}
	if refused == 0 {
		t.Fatal("the store never refused a write")
	}
	reviewRFsize(t, hg, "unlimited")
	a := reviewRAddr(t, hg, addr, "after the start again")
	if a != hg.baseURL {
		t.Errorf("listening on %s after the start again, %s before", a, hg.baseURL)
	}
	waitFor(t, "admin /readyz 200 over https", 30*time.Second, func() bool { return get(adminURL+"/readyz") == http.StatusOK })
	if code := get(adminURL + "/healthz"); code != http.StatusOK {
		t.Errorf("admin /healthz after the start again: %d", code)
	}
	body := []byte(`{"grant_id":"G-tl-after","type":"t","occurred_at":"2026-11-30T10:00:00Z"}`)
	if code, _ := postOnce(c, hg.baseURL+"/webhooks/grants", signGrants(t, "tl_after", body), body); code != http.StatusOK {
		t.Errorf("webhook over https after the start again: %d", code)
	}
}
