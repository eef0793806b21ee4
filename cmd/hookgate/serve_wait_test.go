package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
)

// serve started before its external NATS (a compose file or a cluster
// restart bringing hookgate up first) waits for it instead of exiting:
// meanwhile /healthz 200, /readyz and webhooks 503 with Retry-After, and
// a warning for each failed try; once a server listens there, serve takes
// webhooks on the same address.
func TestServeWaitsForExternalNATS(t *testing.T) {
	natsAddr := freeAddr(t)
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nroles: { consumer: false }\nnats: { url: \"nats://tok@%s\" }\n%s", natsAddr, review6Provider)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	s := review7Start(t, path, false)
	base := review10aStartingBase(t, s)

	// Two failed tries (the pause after the first is a second): serve is
	// still there, waiting, not exited.
	tries := regexp.MustCompile(`"msg":"event store not answering; trying again"`)
	serveWaitFor(t, s, "a second try while nothing listened at nats.url", func() bool {
		return len(tries.FindAllString(s.stderr.String(), -1)) >= 2
	})
	if log := s.stderr.String(); !strings.Contains(log, "no nats server answered") || !strings.Contains(log, "(nothing answered at nats.url: check it") || strings.Contains(log, "tok@") {
		t.Fatalf("the warning should say nothing answered at nats.url, without the token:\n%s", tail(log, 2000))
	}
	c := &http.Client{Timeout: 5 * time.Second}
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := c.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := map[string]int{"/healthz": http.StatusOK, "/readyz": http.StatusServiceUnavailable}[p]
		if resp.StatusCode != want || (want == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "") {
			t.Fatalf("GET %s while waiting: %d (Retry-After %q), want %d", p, resp.StatusCode, resp.Header.Get("Retry-After"), want)
		}
	}
	if code := review6Post(t, base, `{"id":"early","grant_id":"G-1","at":"2026-12-02T10:00:00Z"}`); code != http.StatusServiceUnavailable {
		t.Fatalf("webhook while waiting: %d, want 503", code)
	}

	e, err := jetstream.StartEmbedded(jetstream.EmbeddedOptions{DataDir: t.TempDir(), Listen: natsAddr, Token: "tok", MaxPayload: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	listening := regexp.MustCompile(`listening on (http://[0-9.:]+)`)
	var m []string
	serveWaitFor(t, s, "serve ready after NATS came up", func() bool {
		m = listening.FindStringSubmatch(s.stdout.String())
		return m != nil
	})
	if m[1] != base {
		t.Fatalf("ready on %s, started on %s", m[1], base)
	}
	// The sender's retry of the refused event is stored now.
	if code := review6Post(t, base, `{"id":"early","grant_id":"G-1","at":"2026-12-02T10:00:00Z"}`); code != http.StatusOK {
		t.Fatalf("webhook once ready: %d, want 200", code)
	}
	if err := s.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// Credentials the server refuses are not waited out: serve ends at once
// with the reason.
func TestServeDoesNotWaitOutRefusedCredentials(t *testing.T) {
	natsAddr := freeAddr(t)
	e, err := jetstream.StartEmbedded(jetstream.EmbeddedOptions{DataDir: t.TempDir(), Listen: natsAddr, Token: "right", MaxPayload: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nroles: { consumer: false }\nnats: { url: \"nats://wrong@%s\" }\n%s", natsAddr, review6Provider)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	s := review7Start(t, path, false)
	select {
	case err := <-s.done:
		s.done <- err
		if err == nil || !strings.Contains(err.Error(), "credentials") {
			t.Fatalf("serve with a refused token: %v, want an error about the credentials", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve still running 30 s after its token was refused\n%s", tail(s.stderr.String(), 2000))
	}
}

// serveWaitFor polls cond until it holds (30 s at most); serve exiting
// meanwhile fails the test.
func serveWaitFor(t *testing.T, s *review7Serve, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-s.done:
			s.done <- err
			t.Fatalf("serve exited before %s: %v\n%s", what, err, tail(s.stderr.String(), 2000))
		default:
		}
		if time.Now().After(end) {
			t.Fatalf("not within 30 s: %s\n%s", what, tail(s.stderr.String(), 2000))
		}
	}
}
