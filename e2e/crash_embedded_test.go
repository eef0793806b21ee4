package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestEmbeddedKill9UnderLoadLosesNothingAcked kills hookgate (embedded
// NATS, default sync: interval) with SIGKILL while senders are posting,
// restarts it, and checks every acknowledged event is stored, once. The
// senders then retry what failed, as a portal would, and every event ends
// stored exactly once.
func TestEmbeddedKill9UnderLoadLosesNothingAcked(t *testing.T) {
	e := newEnv(t, "")
	hg := start(t, e.cfgPath)
	base := &atomic.Value{}
	base.Store(hg.baseURL)

	const senders = 6
	const perSender = 150
	var (
		mu        sync.Mutex
		acked     = map[string]bool{} // key -> acknowledged with 200
		failed    = map[string][]byte{}
		sent      atomic.Int64
		afterKill atomic.Int64
		killed    atomic.Bool
		wg        sync.WaitGroup
	)
	quick := &http.Client{Timeout: 5 * time.Second}
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perSender {
				id := fmt.Sprintf("msg_%d_%d", s, i)
				body := []byte(fmt.Sprintf(`{"grant_id":"G-%d","type":"t","occurred_at":"2026-11-30T10:%02d:%02dZ"}`, s, i/60, i%60))
				sent.Add(1)
				code, key := postOnce(quick, base.Load().(string)+"/webhooks/grants", signGrants(t, id, body), body)
				mu.Lock()
				if code == 200 {
					acked[key] = true
				} else {
					failed[id] = body
					if killed.Load() {
						afterKill.Add(1)
					}
				}
				mu.Unlock()
				if killed.Load() && afterKill.Load() > 20 {
					return // the server is down; stop hammering
				}
			}
		}()
	}
	waitFor(t, "100 acknowledged events before the kill", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 100
	})
	hg.kill()
	killed.Store(true)
	wg.Wait()
	mu.Lock()
	ackedBefore := len(acked)
	mu.Unlock()
	if afterKill.Load() == 0 {
		t.Fatal("no request failed after the kill: the fault did not hit while the load was running")
	}

	hg = start(t, e.cfgPath)
	j := natsClient(t, e.natsURL, natsToken)
	stored := storedKeys(t, j)
	seen := map[string]int{}
	for _, k := range stored {
		seen[k]++
	}
	for k := range acked {
		if seen[k] != 1 {
			t.Errorf("acknowledged key %s stored %d times after kill -9", k, seen[k])
		}
	}
	// The senders retry what failed; afterwards every event is stored once.
	retried := 0
	for id, body := range failed {
		var code int
		var key string
		waitFor(t, "a retry of "+id+" to be answered 200", 30*time.Second, func() bool {
			code, key = postOnce(quick, hg.baseURL+"/webhooks/grants", signGrants(t, id, body), body)
			return code == 200
		})
		acked[key] = true
		retried++
	}
	stored = storedKeys(t, j)
	seen = map[string]int{}
	for _, k := range stored {
		seen[k]++
	}
	dups := 0
	for _, n := range seen {
		if n > 1 {
			dups++
		}
	}
	t.Logf("reconciliation (embedded kill -9):\n  sent %d requests\n  acknowledged before kill %d\n  failed during/after kill %d (retried: %d)\n  acknowledged in the end %d distinct keys\n  stored %d messages, %d distinct keys, %d stored twice",
		sent.Load(), ackedBefore, len(failed), retried, len(acked), len(stored), len(seen), dups)
	if len(seen) != len(acked) || len(stored) != len(seen) || dups != 0 {
		t.Fatalf("stored %d messages / %d keys, acknowledged %d keys: want equal, no duplicates", len(stored), len(seen), len(acked))
	}
	for k := range acked {
		if seen[k] != 1 {
			t.Fatalf("key %s stored %d times", k, seen[k])
		}
	}
}

// postOnce posts and returns the status and the answered key (0 and "" on a
// transport error).
func postOnce(c *http.Client, url string, h http.Header, body []byte) (int, string) {
	req, err := http.NewRequest(http.MethodPost, url, bytesReader(body))
	if err != nil {
		return 0, ""
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	var a struct{ Key string }
	_ = json.NewDecoder(resp.Body).Decode(&a)
	return resp.StatusCode, a.Key
}

// kill -9 of a single hookgate (embedded NATS) while each subject's events
// are sent in order, then a restart on the same data_dir while the senders
// go on: every event answered 200 ends applied, each subject's in order.
// Here the consumer keeps up, so the kill usually finds no delivery
// fetched and unacknowledged (review AG: with the restart's redelivery of
// those disabled this still passed); that they run before the newer
// events of their subjects is proved by TestKill9RestartKeepsEachSubjectsOrder,
// whose consumer is far behind a slow receiver.
func TestEmbeddedKill9RestartKeepsEachSubjectsOrder(t *testing.T) {
	e := newEnv(t, "")
	hg := start(t, e.cfgPath)
	s := startInOrderSender(t, []string{hg.baseURL}, 40)
	s.waitAcked(t, 300)
	failed := s.failures.Load()
	hg.kill() // while the load runs
	waitFor(t, "requests in flight at the kill to fail", 10*time.Second, func() bool { return s.failures.Load() > failed })
	s.mu.Lock()
	before := len(s.acked)
	s.mu.Unlock()
	hg = start(t, e.cfgPath)
	s.mu.Lock()
	s.gateways = []string{hg.baseURL}
	s.mu.Unlock()
	s.waitAcked(t, before+500)
	s.stopAndWait()
	j := natsClient(t, e.natsURL, natsToken)
	requireAllApplied(t, j, s.acked)
}
