package e2e

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// The failure tests of a replicated deployment: a real 3-node nats-server
// cluster (subprocesses, so a node can be killed with SIGKILL), hookgate
// with every stream R3, and a portal-like sender that retries on 503 and
// connection errors. Each checks that the fault hit while the load ran,
// then reconciles what the sender saw with what the streams hold.

// TestClusterConsumerCrashLoop is failure test 5: a gateway-only hookgate
// takes the load while a consumer-only hookgate is killed with SIGKILL at
// random every few seconds and restarted; then the last consumer settles
// everything. No double effect (each key at most once in GRANTS, every
// forward of an event carries its one Idempotency-Key), no loss.
func TestClusterConsumerCrashLoop(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	j := c.client()
	recv := newForwardReceiver(t)
	gw := startServe(t, "gateway", writeClusterConfig(t, clusterConfig{
		natsURL: c.URL(), roles: "{ gateway: true, consumer: false }", forwardURL: recv.srv.URL,
	}))
	consCfg := writeClusterConfig(t, clusterConfig{
		natsURL: c.URL(), roles: "{ gateway: false, consumer: true }", forwardURL: recv.srv.URL,
	})
	procs := []*hgProc{gw}
	cons := startServe(t, "consumer-1", consCfg)
	procs = append(procs, cons)
	// A consumer-only instance serves the admin endpoints, no webhooks.
	if resp, err := client.Get(cons.baseURL + "/readyz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("consumer-only instance: GET /readyz = %v, %v; want 200", resp, err)
	} else {
		resp.Body.Close()
	}
	body := []byte(`{"grant_id":"G-1"}`)
	if r := post(t, cons.baseURL+"/webhooks/grants", signGrants(t, "not-here", body), body); r.status != http.StatusNotFound {
		t.Fatalf("consumer-only instance: POST /webhooks/grants = %d, want 404", r.status)
	}

	l := newLoad(t, "crash", []string{gw.baseURL})
	l.pace = 30 * time.Millisecond
	l.run(3)
	defer l.stop()
	l.waitPosts(t, 100, 30*time.Second)

	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 5))
	t.Logf("kill schedule seed %d", seed)
	loopEnd := time.Now().Add(30 * time.Second)
	var lines []string
	busyKills := 0
	firstKill := time.Time{}
	for time.Now().Before(loopEnd) {
		time.Sleep(time.Duration(1500+rng.IntN(2500)) * time.Millisecond)
		decided := strings.Count(cons.stderr.String(), `"msg":"event"`) + strings.Count(cons.stderr.String(), `"msg":"event dead-lettered`)
		forwarded := recv.count()
		if firstKill.IsZero() {
			firstKill = time.Now()
		}
		cons.kill()
		lines = append(lines, fmt.Sprintf("%s killed after %d decisions (receiver at %d deliveries)", cons.name, decided, forwarded))
		if decided > 0 {
			busyKills++
		}
		cons = startServe(t, fmt.Sprintf("consumer-%d", len(procs)), consCfg)
		procs = append(procs, cons)
	}
	lastKill := time.Now()
	l.waitPosts(t, 50, 30*time.Second)
	l.stop()
	t.Logf("crash loop, %d kills:\n  %s", len(lines), strings.Join(lines, "\n  "))
	before, during := l.stats(time.Time{}, firstKill), l.stats(firstKill, lastKill)
	t.Logf("before the first kill: %s", before)
	t.Logf("during the crash loop: %s", during)
	if len(lines) < 5 || busyKills == 0 || during.ok == 0 {
		t.Fatalf("the crash loop did not hit a working consumer under load: %d kills, %d after decisions, %d 200s during", len(lines), busyKills, during.ok)
	}
	r := reconcile(t, j, l, reconcileOptions{procs: procs, consumersKilled: true, forward: recv, settleWithin: 75 * time.Second})
	t.Logf("forward deliveries beyond one per key (effects re-run after a crash, deduplicated by Idempotency-Key): %d", r.forwarded-r.forwardedKeys)
}

// TestClusterHookgateKill9Failover is failure test 2: two hookgate
// instances (both roles) share the cluster and the load; one is killed
// with SIGKILL mid-load and the sender fails over to the survivor.
func TestClusterHookgateKill9Failover(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	j := c.client()
	cfg := writeClusterConfig(t, clusterConfig{natsURL: c.URL()})
	a := startServe(t, "a", cfg)
	b := startServe(t, "b", cfg)

	l := newLoad(t, "failover", []string{a.baseURL, b.baseURL})
	l.run(4)
	defer l.stop()
	l.waitPosts(t, 300, 30*time.Second)
	a.kill()
	// After the process is gone: a request started between the signal and
	// the death could still be answered by a (the test read that as a
	// dead instance answering, once in a CI run).
	killed := time.Now()
	l.waitPosts(t, 300, 30*time.Second)
	l.stop()

	before, after := l.stats(time.Time{}, killed), l.stats(killed, time.Time{})
	t.Logf("before killing a: %s", before)
	t.Logf("after:            %s", after)
	perTarget := func(from, to time.Time) (oks [2]int, errs [2]int) {
		for _, at := range l.within(from, to) {
			switch at.status {
			case http.StatusOK:
				oks[at.target]++
			case 0:
				errs[at.target]++
			}
		}
		return oks, errs
	}
	oksBefore, _ := perTarget(time.Time{}, killed)
	oksAfter, errsAfter := perTarget(killed, time.Now())
	t.Logf("200s before the kill: a %d, b %d; after: a %d, b %d (connection errors on a: %d)",
		oksBefore[0], oksBefore[1], oksAfter[0], oksAfter[1], errsAfter[0])
	if oksBefore[0] == 0 || oksBefore[1] == 0 {
		t.Fatalf("the load was not spread over both instances before the kill: 200s %v", oksBefore)
	}
	if oksAfter[0] != 0 {
		t.Fatalf("%d requests answered 200 by the killed instance", oksAfter[0])
	}
	if oksAfter[1] == 0 || errsAfter[0] == 0 {
		t.Fatalf("no failover observed: survivor 200s %d, connection errors on the killed instance %d", oksAfter[1], errsAfter[0])
	}
	// The standby takes the consumer lock of a killed holder only after
	// its lease lapses (about 40 s of the settle here, measured alone):
	// room for a loaded machine on top.
	reconcile(t, j, l, reconcileOptions{procs: []*hgProc{a, b}, consumersKilled: true, settleWithin: 120 * time.Second})
}

// TestClusterWholeOutage is failure test 3: all three nodes die; every
// request answers 503 with Retry-After, none 200; when they are back,
// ingestion resumes within seconds without restarting hookgate.
func TestClusterWholeOutage(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	j := c.client()
	hg := startServe(t, "hg", writeClusterConfig(t, clusterConfig{natsURL: c.URL()}))

	l := newLoad(t, "outage", []string{hg.baseURL})
	l.run(4)
	defer l.stop()
	l.waitPosts(t, 200, 30*time.Second)

	down := time.Now()
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(func() { c.kill9(n) })
	}
	wg.Wait()
	allDown := time.Now()
	// Requests in flight at the kill wait out their publish timeout; keep
	// the cluster down until a few requests made after it have answered.
	waitFor(t, "requests answered during the outage", 45*time.Second, func() bool {
		return len(l.within(allDown, time.Now())) >= 8 && time.Since(allDown) >= 2*time.Second
	})
	restart := time.Now()
	for _, n := range c.nodes {
		c.spawn(n)
	}

	// During the outage: only 503 with Retry-After.
	outage := l.within(allDown, restart)
	if len(outage) < 4 {
		t.Fatalf("only %d requests were made during the outage", len(outage))
	}
	counts := map[string]int{}
	for _, a := range outage {
		switch {
		case a.status == http.StatusServiceUnavailable && a.retryAfter != "":
			counts["503 with Retry-After"]++
		default:
			counts[fmt.Sprintf("status %d, Retry-After %q", a.status, a.retryAfter)]++
		}
	}
	t.Logf("%d requests made during the %s outage: %v", len(outage), restart.Sub(allDown).Round(time.Millisecond), counts)
	if counts["503 with Retry-After"] != len(outage) {
		t.Errorf("during the outage every request must answer 503 with Retry-After; got %v", counts)
	}

	// Recovery: the first event accepted after the restart, hookgate
	// untouched.
	var firstOK time.Time
	waitFor(t, "an acknowledged request after the cluster came back", 45*time.Second, func() bool {
		for _, a := range l.within(restart, time.Now().Add(time.Hour)) {
			if a.status == http.StatusOK && (firstOK.IsZero() || a.end.Before(firstOK)) {
				firstOK = a.end
			}
		}
		return !firstOK.IsZero()
	})
	c.waitHealthy(60*time.Second, c.nodes...)
	healthy := time.Now()
	t.Logf("outage: killed at %s, nodes restarted after %s; first 200 %s after the restart (cluster healthy after %s)",
		down.Format("15:04:05.000"), restart.Sub(down).Round(time.Millisecond),
		firstOK.Sub(restart).Round(time.Millisecond), healthy.Sub(restart).Round(time.Millisecond))
	l.waitPosts(t, 200, 30*time.Second)
	l.stop()
	before, after := l.stats(time.Time{}, down), l.stats(restart, time.Time{})
	t.Logf("before the outage: %s", before)
	t.Logf("after the restart: %s", after)
	if before.ok == 0 || after.ok == 0 {
		t.Fatalf("the outage did not hit a running load: %d 200s before, %d after", before.ok, after.ok)
	}
	select {
	case <-hg.done:
		t.Fatalf("hookgate exited during the outage:\n%s", tailString(hg.stderr.String(), 20))
	default:
	}
	reconcile(t, j, l, reconcileOptions{procs: []*hgProc{hg}})
}

// TestClusterLeaderKill9UnderLoad is failure test 1: kill -9 the WEBHOOKS
// stream leader under load, restart it.
func TestClusterLeaderKill9UnderLoad(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	j := c.client()
	hg := startServe(t, "hg", writeClusterConfig(t, clusterConfig{natsURL: c.URL()}))

	l := newLoad(t, "leader", []string{hg.baseURL})
	l.run(4)
	defer l.stop()
	l.waitPosts(t, 200, 30*time.Second)

	leader := c.streamLeader(j, "WEBHOOKS", nil, 10*time.Second)
	killed := time.Now()
	c.kill9(leader)
	// An election takes seconds alone; on a loaded machine missed
	// heartbeats can force several rounds.
	next := c.streamLeader(j, "WEBHOOKS", leader, 90*time.Second)
	elected := time.Now()
	l.waitPosts(t, 100, 30*time.Second)
	restarted := time.Now()
	c.restart(leader)
	rejoined := time.Now()
	l.waitPosts(t, 200, 30*time.Second)
	l.stop()

	before, during, after := l.stats(time.Time{}, killed), l.stats(killed, rejoined), l.stats(rejoined, time.Time{})
	t.Logf("killed WEBHOOKS leader %s; stream info named %s its leader %s later; %s rejoined %s after its restart",
		leader.name, next.name, elected.Sub(killed).Round(time.Millisecond), leader.name, rejoined.Sub(restarted).Round(time.Millisecond))
	t.Logf("before the kill: %s", before)
	t.Logf("kill to rejoin:  %s", during)
	t.Logf("after rejoin:    %s", after)
	requireFaultUnderLoad(t, before, during, after, l.inFlightAt(killed))

	c.waitReplicasCurrent(j, "WEBHOOKS", 30*time.Second)
	reconcile(t, j, l, reconcileOptions{procs: []*hgProc{hg}})
}

// requireFaultUnderLoad checks that requests succeeded before the fault
// and after it, that the load kept sending while the fault lasted, and
// that the fault met the load: requests in flight when it hit, or a 503,
// a connection error or a request slowed past a second in its window.
func requireFaultUnderLoad(t testing.TB, before, during, after loadStats, inFlight int) {
	t.Helper()
	t.Logf("requests in flight at the fault: %d", inFlight)
	if before.ok == 0 {
		t.Fatalf("no request succeeded before the fault: %s", before)
	}
	if during.posts == 0 {
		t.Fatalf("no request started while the fault lasted: the load had stopped before it")
	}
	if inFlight+during.unavailable+during.connErrors+during.slow == 0 {
		t.Fatalf("the fault was not felt by the sender: nothing in flight at the fault; %s", during)
	}
	if after.ok == 0 {
		t.Fatalf("no request succeeded after the fault: %s", after)
	}
}
