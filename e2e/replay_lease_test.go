package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// A `hookgate replay` connected to a running serve through
// nats.embedded.listen outlives a restart of serve (its connection
// reconnects): its lease is a live one, and the restarted serve waits for
// it instead of taking the subject over as a dead serve's (which it may do:
// consumer.Options.Gone), so one subject's effects never run at once.
// (Found by review: taking every lease claimed before the start for dead,
// the restarted serve forwarded k1 while the CLI still did.)
func TestReplayCLILeaseSurvivesServeRestart(t *testing.T) {
	const key = "grants:default:evt:k1"
	var (
		mu       sync.Mutex
		n        int
		inFlight int
		maxIn    int
		cliIn    = make(chan struct{})
	)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Idempotency-Key") != key {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		mu.Lock()
		n++
		i := n
		inFlight++
		maxIn = max(maxIn, inFlight)
		mu.Unlock()
		defer func() { mu.Lock(); inFlight--; mu.Unlock() }()
		switch i {
		case 1: // serve's first attempt: retried after consumer.backoff (10m)
			w.WriteHeader(http.StatusServiceUnavailable)
		case 2: // the CLI's replay: a slow receiver
			close(cliIn)
			time.Sleep(8 * time.Second)
			w.WriteHeader(http.StatusNoContent)
		default:
			time.Sleep(500 * time.Millisecond)
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(target.Close)
	cfg := forwardingConfig(t, "{ workers: 2, backoff: [10m] }", target.URL, "15s")
	hg := start(t, cfg)
	body := []byte(`{"grant_id":"G-1","type":"t","occurred_at":"2026-11-30T10:00:00Z"}`)
	expect(t, post(t, hg.baseURL+"/webhooks/grants", signGrants(t, "k1", body), body), 200, "status", "accepted")
	waitFor(t, "serve's first forward (503)", 30*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return n >= 1 })

	// The operator replays the subject while serve waits out the backoff.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli := exec.CommandContext(ctx, binary, "replay", "--config", cfg, "--subject", "G-1")
	var out, errb syncBuffer
	cli.Stdout, cli.Stderr = &out, &errb
	if err := cli.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cliIn:
	case <-time.After(30 * time.Second):
		t.Fatalf("the CLI did not forward k1:\n%s%s", out.String(), errb.String())
	}
	// serve is restarted (a deploy) while the CLI applies k1.
	hg.stop(t)
	start(t, cfg)
	_ = cli.Wait()
	t.Logf("replay CLI output:\n%s%s", out.String(), errb.String())
	mu.Lock()
	defer mu.Unlock()
	t.Logf("k1 forwarded %d times, at most %d at once", n, maxIn)
	if maxIn > 1 {
		t.Fatalf("k1's forward ran %d at once (the CLI's and the restarted serve's): effects of subject G-1 ran concurrently", maxIn)
	}
}
