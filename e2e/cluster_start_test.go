package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestClusterConcurrentStart starts three hookgate instances at the same
// moment against a fresh cluster, as a deployment of several replicas
// does: each provisions the same streams, buckets and durable consumer,
// and every one must come up (none exits on a provisioning race), then
// serve.
func TestClusterConcurrentStart(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	j := c.client()
	cfg := writeClusterConfig(t, clusterConfig{natsURL: c.URL()})

	procs := make([]*hgProc, 3)
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() { procs[i], errs[i] = launchServe(t, fmt.Sprintf("hg%d", i+1), cfg) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Each instance stores and applies.
	l := newLoad(t, "start", nil)
	for i, p := range procs {
		l.setURLs([]string{p.baseURL})
		l.deliver(0, l.newEvent(fmt.Sprintf("G-%d", i+1)), false)
	}
	reconcile(t, j, l, reconcileOptions{procs: procs, settleWithin: 30 * time.Second})

	// One instance applies (holds the consumer lock), and its /metrics says
	// so; the others stand by.
	var applying []string
	waitFor(t, "exactly one instance with hookgate_consumer_applying 1", 30*time.Second, func() bool {
		applying = applying[:0]
		for _, p := range procs {
			if v, ok := metric(t, p.baseURL, "hookgate_consumer_applying"); ok && v == 1 {
				applying = append(applying, p.name)
			}
		}
		return len(applying) == 1
	})
	t.Logf("applying: %v", applying)

	// `hookgate status` lists the three, each ready, the same one applying.
	var st statusJSON
	waitFor(t, "status listing three ready instances, one applying", 30*time.Second, func() bool {
		r := runHG(t, "status", "--json", "--config", cfg)
		if r.code != 0 {
			t.Fatalf("status --json: exit %d\n%s", r.code, r.stderr)
		}
		st = statusJSON{}
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatalf("status --json: %v\n%s", err, r.stdout)
		}
		ready, on := 0, 0
		for _, in := range st.Instances {
			if in.Ready {
				ready++
			}
			if in.Applying {
				on++
			}
		}
		return len(st.Instances) == 3 && ready == 3 && on == 1
	})
	for _, in := range st.Instances {
		var p *hgProc
		for _, q := range procs {
			if strings.HasSuffix(in.Instance, fmt.Sprintf("/%d", q.cmd.Process.Pid)) {
				p = q
			}
		}
		if p == nil || len(in.Listen) != 1 || in.Listen[0] != p.baseURL || in.Applying != (p.name == applying[0]) {
			t.Errorf("status instance %+v: not one of the three as they are (applying by the metric: %s)", in, applying[0])
		}
	}
}
