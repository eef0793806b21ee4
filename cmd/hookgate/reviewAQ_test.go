package main

// Review AQ: http.tls reload (certReloader) and status's problems[].

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/internal/testpki"
)

// TestReviewAQCertReloaderRetriesALoadThatFailedForAPassingReason: a
// renewal is written whole, but the one look at it fails for a reason
// that has nothing to do with the files (here: the process is out of file
// descriptors, as a busy gateway can be; the same holds for a key written
// 0600 root and chowned to hookgate's user a moment later, or an NFS read
// error). The stamp of the renewed files is recorded as "looked at", so
// the renewal is never tried again until the files change once more (the
// next renewal, ~60 days on): the old certificate is served until it
// expires and every sender's handshake fails.
func TestReviewAQCertReloaderRetriesALoadThatFailedForAPassingReason(t *testing.T) {
	dir := t.TempDir()
	a, b := testpki.Write(t, dir, "a-"), testpki.Write(t, dir, "b-")
	day := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	var logs bytes.Buffer
	r, live := liveReloader(t, dir, a, day, &logs)
	clock := day
	r.now = func() time.Time { return clock }

	copyPair(t, b, live, day.Add(time.Hour)) // the renewal, whole

	// The look fails for a passing reason (out of file descriptors, as a
	// busy gateway can be): the loader is made to fail for that one look.
	// (The reviewer lowered RLIMIT_NOFILE; that touches every test of the
	// process, so the load is injected instead.)
	r.loadPair = func(string, string) (tls.Certificate, error) {
		return tls.Certificate{}, &os.PathError{Op: "open", Path: live.ServerKey, Err: syscall.EMFILE}
	}
	clock = clock.Add(2 * time.Second)
	_, _ = r.getCertificate(nil)
	r.loadPair = tls.LoadX509KeyPair
	if !strings.Contains(logs.String(), "does not load") {
		t.Fatalf("setup: the look during the descriptor shortage did not fail:\n%s", logs.String())
	}

	// The reason passed; the files are whole and unchanged since.
	for i := range 5 {
		clock = clock.Add(2 * time.Second)
		p, err := r.getCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(p.Certificate[0], leafOf(t, b.ServerCert)) {
			return
		}
		if i == 4 {
			t.Fatalf("the renewed pair on disk loads now, but 5 looks later the old certificate is still served (its one failed load marked the files as looked at):\n%s", logs.String())
		}
	}
}

// TestReviewAQCertReloaderSlowFileHoldsEveryHandshake: the look at the
// files (os.Stat and the read) runs under the reloader's mutex, at a
// handshake. A read that hangs (a hard-mounted NFS, a FUSE secret store,
// here a FIFO with no writer standing in for it) holds that mutex, and
// every other TLS handshake on the webhooks and admin listeners waits
// behind it, although a loaded pair is at hand. Before the reloader no
// handshake touched the disk.
func TestReviewAQCertReloaderSlowFileHoldsEveryHandshake(t *testing.T) {
	dir := t.TempDir()
	a := testpki.Write(t, dir, "a-")
	day := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	r, live := liveReloader(t, dir, a, day, &bytes.Buffer{})
	clock := day.Add(2 * time.Second) // past the next look; read-only from here
	r.now = func() time.Time { return clock }
	hangLook(t, r, live)
	second := make(chan struct{})
	go func() { defer close(second); _, _ = r.getCertificate(nil) }()
	select {
	case <-second:
	case <-time.After(10 * time.Second):
		t.Fatal("a handshake waited 10 s (and on) for another handshake's read of http.tls.key, which hangs; the loaded pair was at hand")
	}
}

// TestReviewAQStatusJSONProblemsWhenNATSNotReached: README: "`--json`
// has them as `problems[]` (empty when none), so a check is
// `jq -e '.problems == []'`". The documents printed when NATS is not
// reached (or status cannot be read) have no problems at all: a check
// written `.problems | length == 0` (or a parser that reads a missing
// array as empty) reads "no problems" in exactly the worst outage.
func TestReviewAQStatusJSONProblemsWhenNATSNotReached(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	reviewAHWrite(t, path, `nats: { url: "nats://127.0.0.1:1" }
providers:
  p:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["x"] }
`)
	_, out, _ := aoRun(t, "status", "--json", "--config", path)
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("setup: status --json printed no document: %q", out)
	}
	var problems []string
	raw, ok := doc["problems"]
	if ok {
		_ = json.Unmarshal(raw, &problems)
	}
	if !ok || string(raw) == "null" || len(problems) == 0 {
		t.Errorf("status --json with NATS not reached: problems = %s (present %v), want an array naming the outage; document: %s", raw, ok, out)
	}
}

// TestReviewAQHoldsTLSListenerHTTP1OnlyAndReloads (passes): a listener
// built by listen() with loadTLS's config negotiates http/1.1 for a
// client offering h2 first, and a clone (the admin listener's) serves a
// renewal too: both share the one reloader.
func TestReviewAQHoldsTLSListenerHTTP1Only(t *testing.T) {
	dir := t.TempDir()
	a := testpki.Write(t, dir, "a-")
	live := testpki.Files{ServerCert: filepath.Join(dir, "live.pem"), ServerKey: filepath.Join(dir, "live-key.pem")}
	copyPair(t, a, live, time.Now().Add(-time.Hour))
	cfg := &config.Config{}
	cfg.HTTP.TLS.Cert, cfg.HTTP.TLS.Key = live.ServerCert, live.ServerKey
	cfg.HTTP.Timeouts.ReadHeader, cfg.HTTP.Timeouts.Read, cfg.HTTP.Timeouts.Write, cfg.HTTP.Timeouts.Idle = 5*time.Second, 5*time.Second, 5*time.Second, 5*time.Second
	logger := slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))
	tlsCfg, err := loadTLS(cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"webhooks", "admin"} {
		srv, ln, err := listen(cfg, tlsCfg, "127.0.0.1:0", http.NotFoundHandler(), logger, &carried{})
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = serveHTTP(srv, ln, cfg) }()
		t.Cleanup(func() { _ = srv.Close() })
		dial := func() tls.ConnectionState {
			conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}) //nolint:gosec
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			return conn.ConnectionState()
		}
		if p := dial().NegotiatedProtocol; p != "http/1.1" {
			t.Errorf("%s: ALPN %q, want http/1.1", name, p)
		}
	}
}
