package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestClusterServeAnswersProbesWhileStarting starts serve while its
// cluster has lost its quorum (two of three nodes killed): the first dial
// succeeds, but JetStream answers nothing until the nodes come back, as
// after an embedded server's kill -9 it answers nothing while it recovers.
// Meanwhile serve must listen: /healthz 200 (a liveness probe refused
// then killed the process, which started its recovery over), /metrics 200
// with hookgate_starting 1, /readyz and webhooks 503 with Retry-After,
// nothing stored; the "listening on" line
// only once webhooks are taken. Then both nodes come back (creating an
// R3 stream needs three peers) and the same address takes webhooks.
func TestClusterServeAnswersProbesWhileStarting(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	cfg := writeClusterConfig(t, clusterConfig{natsURL: c.URL()})
	c.kill9(c.node("n2"))
	c.kill9(c.node("n3"))

	in, listening := spawnServe(t, cfg)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- hookgate log:\n%s", tailString(in.stderr.String(), 30))
		}
	})

	addrRe := regexp.MustCompile(`"msg":"http listening while starting[^"]*","addr":"([^"]+)"`)
	var base string
	waitFor(t, "serve's early listener", 30*time.Second, func() bool {
		select {
		case <-in.done:
			t.Fatalf("serve exited while starting:\n%s", in.stderr)
		default:
		}
		if m := addrRe.FindStringSubmatch(in.stderr.String()); m != nil {
			base = "http://" + m[1]
			return true
		}
		return false
	})

	get := func(path string) response {
		t.Helper()
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
		return response{status: resp.StatusCode, header: resp.Header, body: b.String()}
	}
	if r := get("/healthz"); r.status != http.StatusOK {
		t.Fatalf("/healthz while starting: %d %s", r.status, r.body)
	}
	if r := get("/readyz"); r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, "starting") {
		t.Fatalf("/readyz while starting: %d, Retry-After %q, %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	if r := get("/metrics"); r.status != http.StatusOK || !strings.Contains(r.body, "\nhookgate_starting 1\n") || !strings.Contains(r.body, "go_goroutines") {
		t.Fatalf("/metrics while starting: %d, want 200 with hookgate_starting 1 and the Go series:\n%.600s", r.status, r.body)
	}
	body := []byte(`{"grant_id":"G-start","type":"award.made","occurred_at":"2026-12-02T08:00:00Z"}`)
	r := post(t, base+"/webhooks/grants", signGrants(t, "evt-while-starting", body), body)
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, "starting") {
		t.Fatalf("webhook while starting: %d, Retry-After %q, %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	select {
	case a := <-listening:
		t.Fatalf("serve said it listens on %s while the cluster had no quorum", a)
	default:
	}

	// Both back: creating an R3 stream needs three peers to place it.
	t0 := time.Now()
	c.spawn(c.node("n2"))
	c.spawn(c.node("n3"))
	c.waitHealthy(60*time.Second, c.node("n2"), c.node("n3"))
	t.Logf("n2 and n3 back and healthy after %s", time.Since(t0))
	select {
	case a := <-listening:
		if "http://"+strings.TrimPrefix(a, "http://") != base {
			t.Fatalf("ready on %s, started on %s", a, base)
		}
	case <-in.done:
		t.Fatalf("serve exited:\n%s", in.stderr)
	case <-time.After(60 * time.Second):
		t.Fatalf("serve not ready 60s after the quorum came back:\n%s", in.stderr)
	}
	t.Logf("serve ready %s after the nodes came back", time.Since(t0))
	// The sender's retry of the refused event is stored now.
	r = post(t, base+"/webhooks/grants", signGrants(t, "evt-while-starting", body), body)
	if r.status != http.StatusOK || !strings.Contains(r.body, `"accepted"`) {
		t.Fatalf("webhook once ready: %d %s", r.status, r.body)
	}
	waitFor(t, "/readyz 200", 30*time.Second, func() bool { return get("/readyz").status == http.StatusOK })
	if m := get("/metrics"); !strings.Contains(m.body, "\nhookgate_starting 0\n") || !strings.Contains(m.body, "hookgate_gateway_requests_total") {
		t.Fatalf("/metrics once ready: %d, want hookgate_starting 0 and the gateway's series:\n%.600s", m.status, m.body)
	}
	if got := storedKeys(t, c.client()); fmt.Sprint(got) != "[grants:default:evt:evt-while-starting]" {
		t.Fatalf("WEBHOOKS holds %v, want the one event stored once", got)
	}
	in.stop(t)
}
