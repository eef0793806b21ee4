package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestReviewAReplayAfterServeKill9DoesNotWaitOutTheDeadLease: serve is
// killed (kill -9, OOM) while it forwards k1 to a slow receiver, and the
// operator runs `hookgate replay` before restarting it. Nothing answers on
// nats.embedded.listen, so the CLI opens data_dir itself: holding data_dir's
// lock, it knows no serve runs, and the README says the embedded server's
// restarted serve "knows a dead serve's leases for what they are and does
// not wait". So must the CLI's processor (cliProcessorOptions). Before,
// consumer.Options.Gone was set only for serve: the replay sat silent,
// printing nothing, until the dead serve's lease expired (forward.timeout
// + 30 s, here 45 s), then applied k1 (review A).
func TestReviewAReplayAfterServeKill9DoesNotWaitOutTheDeadLease(t *testing.T) {
	const key = "grants:default:evt:k1"
	var (
		mu      sync.Mutex
		n       int
		first   = make(chan struct{})
		release = make(chan struct{})
	)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Idempotency-Key") != key {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		if i == 1 { // serve's forward: in flight when serve dies
			close(first)
			select {
			case <-release:
			case <-req.Context().Done():
			}
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(func() { close(release); target.Close() })
	cfg := forwardingConfig(t, "{ workers: 2 }", target.URL, "15s")
	hg := start(t, cfg)
	body := []byte(`{"grant_id":"G-1","type":"t","occurred_at":"2026-11-30T10:00:00Z"}`)
	expect(t, post(t, hg.baseURL+"/webhooks/grants", signGrants(t, "k1", body), body), 200, "status", "accepted")
	select {
	case <-first:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not forward k1")
	}
	hg.kill()

	// The dead serve's lease runs 45 s (forward.timeout + 30 s): a replay
	// that does not know it for a dead one's waits it out, so 20 s is the
	// deadline for its answer (the command is killed at it).
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cli := exec.CommandContext(ctx, binary, "replay", "--config", cfg, "--subject", "G-1")
	var out, errb syncBuffer
	cli.Stdout, cli.Stderr = &out, &errb
	began := time.Now()
	if err := cli.Run(); err != nil {
		t.Logf("replay: %v", err)
	}
	took := time.Since(began)
	t.Logf("replay took %s:\n%s%s", took.Round(time.Millisecond), out.String(), errb.String())
	if ctx.Err() != nil {
		t.Fatalf("replay with no serve running still waited after %s (the dead serve's lease, forward.timeout + 30 s) to decide k1", took.Round(time.Second))
	}
	if !strings.Contains(out.String(), key) {
		t.Errorf("replay did not decide %s:\n%s", key, out.String())
	}
}
