package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
)

// Cluster audit 41: faults of a 3-node NATS JetStream cluster under
// several hookgate instances.

// TestAudit41ReadyzHonestWhileWebhooksHasNoQuorum: with two of the three
// nodes killed, WEBHOOKS cannot take a write and every webhook is answered
// 503. /readyz must say so for as long as it lasts. It does for the
// first 20 s or so; then WEBHOOKS's last leader steps down, its stream
// info (answered by the surviving node, not a leader) names no leader
// and shows the dead peers with `active 0`, which NoQuorum does not count
// as offline (it counts `active 0` only once a leader has led 10 s), and
// /readyz answers 200 "ready" for good, while every webhook still gets 503.
// A load balancer or Kubernetes then keeps sending to (and a rolling
// deploy proceeds past) an instance that can store nothing.
func TestAudit41ReadyzHonestWhileWebhooksHasNoQuorum(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	j := c.client()
	hg := startServe(t, "hg", writeClusterConfig(t, clusterConfig{natsURL: c.URL()}))
	waitFor(t, "/readyz 200", 30*time.Second, func() bool { return readyz(hg.baseURL) == http.StatusOK })

	body := func(id string) []byte {
		return fmt.Appendf(nil, `{"id":%q,"grant_id":"G-1","type":"award.updated","occurred_at":"2026-11-30T10:00:00Z"}`, id)
	}
	if r := post(t, hg.baseURL+"/webhooks/grants", signGrants(t, "before", body("before")), body("before")); r.status != http.StatusOK {
		t.Fatalf("before the fault: POST = %d %s", r.status, r.body)
	}

	// Keep the node leading WEBHOOKS, kill the other two.
	leader := c.streamLeader(j, "WEBHOOKS", nil, 10*time.Second)
	var killed []string
	for _, n := range c.nodes {
		if n != leader {
			c.kill9(n)
			killed = append(killed, n.name)
		}
	}
	down := time.Now()
	t.Logf("killed %v; %s, which led WEBHOOKS, runs alone", killed, leader.name)

	// A replica is taken for offline once its leader has not heard from
	// it for 10 s: /readyz turns 503 then. From then on, until the nodes
	// come back, nothing can be stored: every webhook is 503, and /readyz
	// must stay 503. Watch for a minute.
	waitFor(t, "/readyz 503 after the kill", 45*time.Second, func() bool { return readyz(hg.baseURL) == http.StatusServiceUnavailable })
	t.Logf("/readyz turned 503 %s after the kill", time.Since(down).Round(time.Millisecond))
	n := 0
	for time.Since(down) < 60*time.Second {
		n++
		id := fmt.Sprintf("during-%d", n)
		r := post(t, hg.baseURL+"/webhooks/grants", signGrants(t, id, body(id)), body(id))
		if r.status == http.StatusOK {
			t.Fatalf("%s after the kill: a webhook answered 200 (%s) with 2 of 3 nodes down", time.Since(down).Round(time.Millisecond), r.body)
		}
		resp, err := client.Get(hg.baseURL + "/readyz")
		if err != nil {
			t.Fatalf("GET /readyz: %v", err)
		}
		rb := readAll(resp)
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("%s after killing %v: /readyz answered 200 %s, while the webhook just before was answered %d %s (WEBHOOKS has 1 of 3 replicas: nothing can be stored)",
				time.Since(down).Round(time.Millisecond), killed, strings.TrimSpace(rb), r.status, strings.TrimSpace(r.body))
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("/readyz answered 503 throughout the %d checks of the minute", n)
}

// TestAudit41TraceRidesOutConsumerLeaderKill: `hookgate trace KEY` run
// right after the node leading the durable consumer hookgate-apply (and
// whatever else it led) was killed must still answer, once the cluster has
// elected new leaders. Each of trace's reads rides out an election: its
// read of the WATERMARKS bucket and its look at the consumer (once single
// requests bounded only by the CLI's 10-minute deadline: trace hung for 10
// minutes, then failed `trace: bucket WATERMARKS: jetstream unavailable:
// context deadline exceeded`), and its stream scans (which gave up after
// 10 s without a message, shorter than an election on a busy CI machine:
// `read GRANTS: no message for 10s although some are pending`).
func TestAudit41TraceRidesOutConsumerLeaderKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	j := c.client()
	cfg := writeClusterConfig(t, clusterConfig{natsURL: c.URL()})
	hg := startServe(t, "hg", cfg)

	body := []byte(`{"id":"evt-1","grant_id":"G-1","type":"award.updated","occurred_at":"2026-11-30T10:00:00Z"}`)
	if r := post(t, hg.baseURL+"/webhooks/grants", signGrants(t, "evt-1", body), body); r.status != http.StatusOK {
		t.Fatalf("POST = %d %s", r.status, r.body)
	}
	key := "grants:default:evt:evt-1"
	waitSettled(t, j, 30*time.Second)

	for round := 1; round <= 4; round++ {
		leader := c.consumerLeader(j, "WEBHOOKS", "hookgate-apply", nil, 30*time.Second)
		// The streams and buckets trace reads first lead elsewhere, so its
		// scans are quick and its later requests meet the consumer's
		// election.
		for _, s := range []string{"WEBHOOKS", "AUDIT", "GRANTS", "DLQ", "KV_WATERMARKS", "KV_APPLIED"} {
			moveLeaderOff(t, c, j, s, leader)
		}
		c.kill9(leader)
		killed := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		cmd := exec.CommandContext(ctx, binary, "trace", key, "--config", cfg)
		out, err := cmd.CombinedOutput()
		took := time.Since(killed)
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("round %d: hookgate trace started right after the kill -9 of %s (the consumer's leader) still ran %s later (killed by the test; the CLI would wait out its 10 minutes); output so far:\n%s",
				round, leader.name, took.Round(time.Millisecond), out)
		}
		if err != nil {
			t.Fatalf("round %d: hookgate trace after the kill of %s: %v\n%s", round, leader.name, err, out)
		}
		if !strings.Contains(string(out), "published") {
			t.Fatalf("round %d: trace does not show the event in GRANTS:\n%s", round, out)
		}
		t.Logf("round %d: trace answered %s after the kill -9 of %s", round, took.Round(time.Millisecond), leader.name)
		c.restart(leader)
		c.waitReplicasCurrent(j, "WEBHOOKS", 60*time.Second)
	}
}

// moveLeaderOff steps stream's leader down until it is not on node.
func moveLeaderOff(t *testing.T, c *natsCluster, j js.JetStream, stream string, node *natsNode) {
	t.Helper()
	other := c.nodes[0]
	if other == node {
		other = c.nodes[1]
	}
	deadline := time.Now().Add(30 * time.Second)
	for c.streamLeader(j, stream, nil, 30*time.Second) == node {
		if time.Now().After(deadline) {
			t.Fatalf("stream %s: leader still on %s", stream, node.name)
		}
		_, _ = j.Conn().Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, fmt.Appendf(nil, `{"placement":{"preferred":%q}}`, other.name), 5*time.Second)
		time.Sleep(500 * time.Millisecond)
	}
}
