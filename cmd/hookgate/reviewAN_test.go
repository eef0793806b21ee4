package main

// Review AN: the forward effect and what calls it.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/gateway"
)

// TestReviewANRedeliverRunsBesideServesForwardOfTheSameSubject: `hookgate
// replay --redeliver` re-runs the forward of an already-applied event by
// calling the Forward directly (cmd/hookgate/replay.go replayOne: f.Apply
// with no lease), so while serve is forwarding a newer event of the same
// subject the receiver gets the redelivered one at the same time.
//
// CONTRACT (Sequencing): "Effects for one subject never run concurrently,
// even across hookgate instances". README: a lease of a `hookgate replay`
// connected through nats.embedded.listen is waited for by serve; the
// redeliver path took none, so nothing was waited for either way. Fixed:
// the redelivery runs under the subject's lease (Processor.Redeliver).
func TestReviewANRedeliverRunsBesideServesForwardOfTheSameSubject(t *testing.T) {
	var (
		mu        sync.Mutex
		inFlight  = map[string]int{} // Hookgate-Subject -> requests in flight
		maxSeen   = map[string]int{}
		seen      = map[string]int{} // Idempotency-Key -> requests
		e2Entered = make(chan struct{})
		release   = make(chan struct{})
		once      sync.Once
		relOnce   sync.Once
	)
	free := func() { relOnce.Do(func() { close(release) }) }
	t.Cleanup(free)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		subj, key := r.Header.Get("Hookgate-Subject"), r.Header.Get("Idempotency-Key")
		mu.Lock()
		inFlight[subj]++
		maxSeen[subj] = max(maxSeen[subj], inFlight[subj])
		seen[key]++
		again := seen[key] > 1
		mu.Unlock()
		defer func() { mu.Lock(); inFlight[subj]--; mu.Unlock() }()
		switch {
		case strings.HasSuffix(key, ":evt:e2"):
			once.Do(func() { close(e2Entered) })
			// Held until the redelivery of e1 arrives (the defect) or,
			// when replay waits for the subject as it should, a bound
			// well inside forward.timeout: the bound only ends the wait.
			select {
			case <-release:
			case <-time.After(5 * time.Second):
			}
		case strings.HasSuffix(key, ":evt:e1") && again:
			free()
		}
	}))
	t.Cleanup(recv.Close)

	dataDir, natsAddr := t.TempDir(), freeAddr(t)
	cfg := reviewAConfig(t, dataDir, natsAddr, "", review6Provider+fmt.Sprintf("    effects: { forward: { url: %q, timeout: 30s } }\n", recv.URL))
	s := review7Start(t, cfg, true)
	if c := review6Post(t, s.base, `{"id":"e1","grant_id":"G-1","at":"2026-12-01T10:00:00Z"}`); c != 200 {
		t.Fatalf("post e1: %d", c)
	}
	reviewAWaitFor(t, "already-applied", 15*time.Second, "replay", "--dry-run", "--from-seq", "1", "--to-seq", "1", "--config", cfg)
	if c := review6Post(t, s.base, `{"id":"e2","grant_id":"G-1","at":"2026-12-01T10:05:00Z"}`); c != 200 {
		t.Fatalf("post e2: %d", c)
	}
	select {
	case <-e2Entered:
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not forward e2 within 20 s")
	}
	r := review9Run(t, "", "replay", "--redeliver", "--from-seq", "1", "--to-seq", "1", "--config", cfg)
	t.Logf("replay --redeliver: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	free()
	if r.code != 0 || !strings.Contains(r.stdout, "redelivered") {
		t.Errorf("replay --redeliver: exit %d, want 0 and e1 redelivered (after serve's forward of e2):\n%s%s", r.code, r.stdout, r.stderr)
	}
	// It said why it waited (before stop 40 a wait of up to the lease's
	// time passed in silence).
	if !strings.Contains(r.stderr, "hookgate: replay: event p:default:evt:e1 waits for its subject G-1, held by the lease of serve@") {
		t.Errorf("replay --redeliver waited for serve's lease on G-1 without saying so:\n%s", r.stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["p:default:evt:e1"] != 2 {
		t.Fatalf("e1 forwarded %d times, want 2 (once applied, once redelivered)", seen["p:default:evt:e1"])
	}
	if n := maxSeen["G-1"]; n > 1 {
		t.Errorf("the receiver had %d forwards of subject G-1 in flight at once: replay --redeliver POSTed e1 while serve's forward of e2 (same subject) was running", n)
	}
}

// reviewANPost is review9Post with the sender's credentials added.
func reviewANPost(t *testing.T, base, body string) int {
	t.Helper()
	sch, err := gateway.NewScheme("hmac-sha256", gateway.SchemeOptions{Header: "X-Sig"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := sch.Sign([]byte(body), config.Secret(review6Secret), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/p", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/vnd.grants+json; charset=utf-8")
	req.Header.Set("Authorization", "Bearer sender-token")
	req.Header.Set("Cookie", "session=sender-cookie")
	req.Header.Set("Proxy-Authorization", "Basic c2VuZGVy")
	req.Header.Set("Hookgate-Subject", "spoofed")
	req.Header.Set("Hookgate-Spoof", "x")
	req.Header.Set("Idempotency-Key", "sender-key")
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestReviewANServeForwardClassification (holds): through a real serve, a
// 422 and a 307 from the receiver dead-letter the event at once (one POST
// each, the redirect not followed) with the HTTP status in AUDIT; a 200
// applies; the receiver sees the original Content-Type, Idempotency-Key and
// Hookgate-* headers and none of the sender's credentials or signature.
func TestReviewANServeForwardClassification(t *testing.T) {
	var (
		mu        sync.Mutex
		hits      = map[string]int{}
		okHeader  http.Header
		elsewhere atomic.Int32
	)
	mux := http.NewServeMux()
	mux.HandleFunc("/elsewhere", func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) })
	mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		hits[key]++
		mu.Unlock()
		switch {
		case strings.HasSuffix(key, ":e1"):
			w.WriteHeader(http.StatusUnprocessableEntity)
		case strings.HasSuffix(key, ":e2"):
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
		default:
			mu.Lock()
			okHeader = r.Header.Clone()
			mu.Unlock()
		}
	})
	recv := httptest.NewServer(mux)
	t.Cleanup(recv.Close)
	dataDir, natsAddr := t.TempDir(), freeAddr(t)
	cfg := reviewAConfig(t, dataDir, natsAddr, "consumer: { max_deliver: 5, backoff: [100ms] }\n",
		review6Provider+fmt.Sprintf("    effects: { forward: { url: %q } }\n", recv.URL+"/hook"))
	s := review7Start(t, cfg, true)
	for i := 1; i <= 3; i++ {
		if c := reviewANPost(t, s.base, fmt.Sprintf(`{"id":"e%d","grant_id":"G-%d","at":"2026-12-01T10:00:00Z"}`, i, i)); c != 200 {
			t.Fatalf("post e%d: %d", i, c)
		}
	}
	reviewAWaitFor(t, "HTTP 422", 20*time.Second, "trace", "p:default:evt:e1", "--config", cfg)
	reviewAWaitFor(t, "HTTP 307", 20*time.Second, "trace", "p:default:evt:e2", "--config", cfg)
	reviewAWaitFor(t, "applied", 20*time.Second, "trace", "p:default:evt:e3", "--config", cfg)
	mu.Lock()
	defer mu.Unlock()
	if hits["p:default:evt:e1"] != 1 || hits["p:default:evt:e2"] != 1 || elsewhere.Load() != 0 {
		t.Errorf("POSTs: e1 %d, e2 %d, redirect target %d; want 1, 1, 0", hits["p:default:evt:e1"], hits["p:default:evt:e2"], elsewhere.Load())
	}
	for name, want := range map[string]string{
		"Content-Type": "application/vnd.grants+json; charset=utf-8", "Idempotency-Key": "p:default:evt:e3",
		"Hookgate-Key": "p:default:evt:e3", "Hookgate-Subject": "G-3", "Authorization": "", "Cookie": "",
		"Proxy-Authorization": "", "X-Sig": "", "Hookgate-Spoof": "",
	} {
		if got := okHeader.Get(name); got != want {
			t.Errorf("forwarded %s = %q, want %q", name, got, want)
		}
	}
	t.Logf("forwarded headers: %v", okHeader)
}

// TestReviewANServeStopWaitsForA101Receiver: serve's consumer finishes the
// event each worker runs before it returns (Processor.Run), trusting
// forward.timeout to bound the forward. A receiver answering the POST with
// "101 Switching Protocols" and then nothing holds the forward past
// forward.timeout for good (consumer's
// TestReviewANSwitchingProtocolsHoldsTheWorker), so SIGTERM never ends
// serve: the gateway stops answering, the process stays until killed.
func TestReviewANServeStopWaitsForA101Receiver(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		held []net.Conn
	)
	got := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			go func() {
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n")
				got <- struct{}{}
			}()
		}
	}()
	dataDir, natsAddr := t.TempDir(), freeAddr(t)
	cfg := reviewAConfig(t, dataDir, natsAddr, "", review6Provider+fmt.Sprintf("    effects: { forward: { url: %q, timeout: 1s } }\n", "http://"+ln.Addr().String()+"/hook"))
	s := review7Start(t, cfg, true)
	// Registered after serve's own cleanup, so it runs first: it frees the
	// stuck forward and lets serve stop.
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	if c := review6Post(t, s.base, `{"id":"e1","grant_id":"G-1","at":"2026-12-01T10:00:00Z"}`); c != 200 {
		t.Fatalf("post: %d", c)
	}
	select {
	case <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the receiver got no forward within 20 s")
	}
	s.cancel()
	select {
	case err := <-s.done:
		s.done <- err
	case <-time.After(15 * time.Second):
		t.Fatalf("serve (forward.timeout 1s) has not stopped 15 s after it was told to: its forward to a receiver that answered 101 and went quiet never returns\n%s", tail(s.stderr.String(), 600))
	}
}
