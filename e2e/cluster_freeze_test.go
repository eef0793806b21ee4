package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// TestClusterFrozenNodeFailsOver freezes (SIGSTOP) the node holding
// hookgate's gateway connection under load: a host that hangs, or a
// network partition, where nothing closes the TCP connection. hookgate
// must notice the silent connection and move to another node by itself
// within seconds; nats.go's default ping (every 2 minutes, stale after
// two unanswered) took minutes, answering 503 all along. A kill -9 of a
// node (the other failover tests) does not show this: its socket closes.
func TestClusterFrozenNodeFailsOver(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	j := c.client()
	hg := startServe(t, "hg", writeClusterConfig(t, clusterConfig{natsURL: c.URL()}))

	l := newLoad(t, "freeze", []string{hg.baseURL})
	l.run(4)
	defer l.stop()
	l.waitPosts(t, 100, 30*time.Second)

	frozen := c.nodeWithConnection("hookgate-serve")
	frozen.mu.Lock()
	proc := frozen.cmd.Process
	frozen.mu.Unlock()
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			_ = proc.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(thaw) // a stopped process still dies of SIGKILL, but its peers' logs read better

	// Answers 200 again, for events sent after the freeze, while the node is
	// still frozen: hookgate left it.
	const within = 45 * time.Second
	var resumed time.Time
	waitFor(t, "gateway answering 200 again while the node is frozen", within, func() bool {
		for _, a := range l.within(stopped, time.Now()) {
			if a.status == http.StatusOK && a.start.After(stopped.Add(time.Second)) {
				resumed = a.end
				return true
			}
		}
		return false
	})
	if n, _ := metric(t, hg.baseURL, `hookgate_nats_reconnects_total{connection="hookgate-serve"}`); n < 1 {
		t.Errorf("hookgate_nats_reconnects_total of the gateway's connection is %v after it left the frozen node; want >= 1", n)
	}
	l.waitPosts(t, 100, 30*time.Second)
	thaw()
	c.waitHealthy(60*time.Second, frozen)
	l.waitPosts(t, 100, 30*time.Second)
	l.stop()

	during := l.stats(stopped, resumed)
	t.Logf("froze %s; first 200 for a request started after it %s later; frozen window: %s",
		frozen.name, resumed.Sub(stopped).Round(time.Millisecond), during)
	if during.unavailable+during.connErrors+during.slow == 0 {
		t.Fatalf("the freeze was not felt by the load (no 503, error or slow request before %s): %s", resumed.Sub(stopped), during)
	}
	for _, s := range []string{"WEBHOOKS", "GRANTS", "AUDIT"} {
		c.waitReplicasCurrent(j, s, 60*time.Second)
	}
	reconcile(t, j, l, reconcileOptions{procs: []*hgProc{hg}})
}

// nodeWithConnection returns the node a client connection named name is
// connected to, read from each node's monitoring endpoint.
func (c *natsCluster) nodeWithConnection(name string) *natsNode {
	c.t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second}
	var found []string
	for _, n := range c.nodes {
		resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/connz?limit=4096", n.httpPort))
		if err != nil {
			c.t.Fatalf("connz of %s: %v", n.name, err)
		}
		var cz struct {
			Connections []struct {
				Name string `json:"name"`
			} `json:"connections"`
		}
		err = json.NewDecoder(resp.Body).Decode(&cz)
		resp.Body.Close()
		if err != nil {
			c.t.Fatalf("connz of %s: %v", n.name, err)
		}
		for _, conn := range cz.Connections {
			found = append(found, n.name+":"+conn.Name)
			if conn.Name == name {
				return n
			}
		}
	}
	c.t.Fatalf("no node has a connection named %q (connections: %v)", name, found)
	return nil
}
