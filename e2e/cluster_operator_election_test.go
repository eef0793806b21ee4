package e2e

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestClusterOperatorReadsStartedDuringAnElection starts `hookgate dlq
// list` and `hookgate replay --dry-run` right after a kill -9 of the node
// leading every stream they read (DLQ, WEBHOOKS, GRANTS, the KV buckets;
// the CLIs connected to the other nodes). Their first requests (a
// stream's or bucket's info) reach no leader; each must be asked again
// once the new leaders are elected (seconds), and both commands finish.
// Before, `dlq list` waited for the CLI's 10 minutes on the first
// unanswered request and replay failed after 5 s ("stream WEBHOOKS:
// jetstream unavailable: context deadline exceeded"; an audit, against
// the README's promise that these ride out a leader's failover).
func TestClusterOperatorReadsStartedDuringAnElection(t *testing.T) {
	t.Parallel()
	// Every event is dead-lettered at once: a 400 is permanent.
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such grant", http.StatusBadRequest)
	}))
	t.Cleanup(refuse.Close)
	c := startCluster(t)
	j := c.client()
	victim, home := c.victimAndHome(j)
	hg := startServe(t, "hg", writeClusterConfig(t, clusterConfig{natsURL: c.URL(), forwardURL: refuse.URL}))
	l := newLoad(t, "elect", []string{hg.baseURL})
	l.pace, l.maxSent = 0, 3
	l.run(1)
	l.wg.Wait()
	if l.gaveUp != nil || l.problems != nil {
		t.Fatalf("storing: gave up %v, problems %v", l.gaveUp, l.problems)
	}
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s, err := j.Stream(ctx, "DLQ")
		cancel()
		if err == nil && s.CachedInfo().State.Msgs == 3 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("DLQ does not hold the 3 letters after 30 s (%v)", err)
		}
	}
	// Nothing else asks the streams anything while the CLIs start.
	hg.stop(t)
	on := map[string]string{}
	for _, s := range []string{"WEBHOOKS", "GRANTS", "DLQ", "KV_WATERMARKS", "KV_APPLIED"} {
		on[s] = victim.name
	}
	c.placeAllBut(j, home.name, on)
	for s := range on {
		c.waitReplicasCurrent(j, s, 30*time.Second)
	}
	cfg := writeClusterConfig(t, clusterConfig{natsURL: c.urlWithout(victim), forwardURL: refuse.URL})

	c.kill9(victim)
	killed := time.Now()
	type result struct {
		out, errOut string
		code        int
		took        time.Duration
	}
	commands := map[string][]string{
		"dlq list":         {"dlq", "list", "--config", cfg},
		"replay --dry-run": {"replay", "--dry-run", "--config", cfg},
	}
	results := map[string]result{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, args := range commands {
		wg.Go(func() {
			// Well past an election (4-9 s) and a retry, well short of
			// the CLI's 10 minutes.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, args...)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			r := result{out: out.String(), errOut: errb.String(), took: time.Since(killed)}
			if err != nil {
				r.code = -1
				if ee, ok := err.(*exec.ExitError); ok {
					r.code = ee.ExitCode()
				}
			}
			mu.Lock()
			results[name] = r
			mu.Unlock()
		})
	}
	wg.Wait()
	for name, want := range map[string]string{"dlq list": "\n3 letters\n", "replay --dry-run": "dry run, nothing changed: 3 events"} {
		r := results[name]
		t.Logf("%s: exit %d, %s after the kill", name, r.code, r.took.Round(time.Millisecond))
		if r.code != 0 || !strings.Contains(r.out, want) {
			t.Errorf("%s started right after the kill of its streams' leader: exit %d after %s (want 0 and %q)\nstdout:\n%s\nstderr:\n%s",
				name, r.code, r.took.Round(time.Millisecond), want, r.out, r.errOut)
		}
	}
}
