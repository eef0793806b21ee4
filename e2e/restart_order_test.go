package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// A SIGTERM while the consumer is busy, a restart, and the next event of
// every subject: each subject's older event still applies (its forward
// runs), none is overtaken and judged stale. The stop hands back what the
// consumer had fetched and not started, and the restarted embedded server
// redelivers it before the newer events. (Before, the fetched deliveries
// were dropped and came back after the ack wait, behind the newer events:
// 17 of 100 older events were never forwarded in the operator review.)
func TestSigtermRestartKeepsEachSubjectsOrder(t *testing.T) {
	var (
		mu  sync.Mutex
		got []string
	)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(200 * time.Millisecond) // a slow receiver: the consumer falls behind
		mu.Lock()
		got = append(got, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(target.Close)
	delivered := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}

	dir := t.TempDir()
	port := freePort(t)
	cfg := filepath.Join(dir, "hookgate.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `http: { listen: "127.0.0.1:0" }
nats: { embedded: { data_dir: %q, listen: "127.0.0.1:%d", token: %q } }
consumer: { workers: 4 }
providers:
  grants:
    signature: { scheme: standard-webhooks, secrets: [%q] }
    subject: "json:/grant_id"
    occurred_at: "json:/occurred_at"
    type: "json:/type"
    effects:
      forward: { url: %q, timeout: 2s }
`, filepath.Join(dir, "data"), port, natsToken, grantsSecret, target.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	const subjects = 40
	send := func(hg *instance, round int, at string) {
		for i := range subjects {
			body := fmt.Appendf(nil, `{"grant_id":"G-%d","type":"grant.updated","occurred_at":%q}`, i, at)
			expect(t, post(t, hg.baseURL+"/webhooks/grants", signGrants(t, fmt.Sprintf("r%d-%d", round, i), body), body), 200, "status", "accepted")
		}
	}

	hg := start(t, cfg)
	send(hg, 0, "2026-11-30T10:00:00Z")
	waitFor(t, "the consumer under way", 30*time.Second, func() bool { return len(delivered()) >= 4 })
	hg.stop(t)
	if n := len(delivered()); n >= subjects {
		t.Fatalf("all %d older events were forwarded before the stop: the stop did not come while the consumer was busy", n)
	}

	hg = start(t, cfg)
	send(hg, 1, "2026-11-30T10:05:00Z")
	// The ack wait is 32 s (forward timeout + 30 s): a delivery left to it
	// would not make this deadline.
	waitFor(t, "every older and newer event forwarded", 25*time.Second, func() bool {
		d := delivered()
		for round := range 2 {
			for i := range subjects {
				if !slices.Contains(d, fmt.Sprintf("grants:default:evt:r%d-%d", round, i)) {
					return false
				}
			}
		}
		return true
	})
}
