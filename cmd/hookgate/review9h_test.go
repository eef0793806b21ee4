package main

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
)

// A burst of forged requests right before a stop (SIGTERM): the limiter
// holds the last rejection back for about a second to write it with the
// count, but serve stops the AUDIT writer first, so the timer's write
// finds it stopped and the burst's suppressed count is lost. Contract:
// the rejections beyond a few records a second are "counted in
// suppressed".
func TestReview9HSuppressedCountLostAtStop(t *testing.T) {
	dataDir := t.TempDir()
	cfg := review7Config(t, dataDir, "", "", "")
	s := review7Start(t, cfg, true)
	const n = 30
	c := &http.Client{Timeout: 10 * time.Second}
	for i := range n {
		req, _ := http.NewRequest(http.MethodPost, s.base+"/webhooks/p", bytes.NewReader([]byte(`{"id":"x"}`)))
		req.Header.Set("X-Sig", "sha256="+strings.Repeat("0", 64))
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("forged request %d: %d", i, resp.StatusCode)
		}
	}
	if err := s.stop(t); err != nil {
		t.Fatalf("serve: %v", err)
	}
	// No wait for the limiter's timer: serve has returned, so what the
	// stop did not write is lost whenever the timer fires.

	sys := review9Open(t, cfg)
	defer sys.Close()
	st, err := sys.conn.JS.Stream(t.Context(), jetstream.StreamAudit)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := event.AuditRecords(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Decision == event.DecisionRejected {
				total += 1 + r.Suppressed
			}
		}
	}
	if total != n {
		t.Errorf("AUDIT accounts for %d of %d rejected requests after a stop; stderr tail:\n%s", total, n, tail(s.stderr.String(), 600))
	}
}

// With http.tls and admin_listen, the admin port serves TLS with the same
// pair over HTTP/1.1, and the webhook port too.
func TestReview9HAdminListenWithTLS(t *testing.T) {
	cert, key := review9gServerCert(t)
	admin := review9gFreeAddr(t)
	cfg := review9gConfig(t, t.TempDir(), "", fmt.Sprintf(`listen: "127.0.0.1:0", admin_listen: %q, tls: { cert: %q, key: %q }`, admin, cert, key))
	s := review7Start(t, cfg, false)
	re := regexp.MustCompile(`admin on https://([0-9.:]+)`)
	var addr string
	for end := time.Now().Add(25 * time.Second); addr == ""; time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(s.stdout.String()); m != nil {
			addr = m[1]
		}
		if time.Now().After(end) {
			t.Fatalf("no admin line: %q\n%s", s.stdout.String(), tail(s.stderr.String(), 1000))
		}
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Get("https://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 1 {
		t.Errorf("admin /healthz over TLS: %d %s, want 200 HTTP/1.1", resp.StatusCode, resp.Proto)
	}
	if !strings.Contains(s.stdout.String(), "listening on https://") {
		t.Errorf("webhook port not https: %q", s.stdout.String())
	}
}
