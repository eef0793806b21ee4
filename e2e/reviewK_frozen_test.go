package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// connNode returns the node where a client connection named name is.
func (c *natsCluster) connNode(name string) *natsNode {
	c.t.Helper()
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		for _, n := range c.nodes {
			var connz struct {
				Conns []struct {
					Name string `json:"name"`
				} `json:"connections"`
			}
			if err := getJSON(fmt.Sprintf("http://127.0.0.1:%d/connz?limit=1000", n.httpPort), &connz); err != nil {
				continue
			}
			for _, cn := range connz.Conns {
				if cn.Name == name {
					return n
				}
			}
		}
	}
	c.t.Fatalf("no connection named %q on any node", name)
	return nil
}

// clientVia connects to the given URL list only (the test's reads must not
// sit on a frozen node).
func clientVia(t *testing.T, url string) js.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	j, err := js.New(nc, js.WithDefaultTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestReviewKFrozenNodeGatewayRecovers freezes (SIGSTOP: a hung host, or a
// network partition, where no TCP reset comes) the node hookgate's
// gateway connection is on, with no stream or consumer led there: the
// other two nodes keep quorum for everything. A sender retrying on 503
// should get its event stored within seconds. hookgate's connections use
// nats.go's default pings (every 2 min, 2 outstanding), so a silent
// server is noticed only after minutes; until then every publish waits
// out its timeout and the gateway answers 503.
func TestReviewKFrozenNodeGatewayRecovers(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	j := c.client()
	hg := startServe(t, "hg", writeClusterConfig(t, clusterConfig{natsURL: c.URL()}))
	l := newLoad(t, "frozen", []string{hg.baseURL})
	appliedWithin(t, j, l, l.newEvent("G-1"), 30*time.Second)

	victim := c.connNode("hookgate-serve")
	var home *natsNode
	for _, n := range c.nodes {
		if n != victim {
			home = n
			break
		}
	}
	c.placeAllBut(j, home.name, nil)
	j2 := clientVia(t, c.urlWithout(victim))
	t.Logf("hookgate-serve is connected to %s; every stream and the consumer are led by %s", victim.name, home.name)

	victim.mu.Lock()
	proc := victim.cmd.Process
	victim.mu.Unlock()
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	t.Cleanup(func() { _ = proc.Signal(syscall.SIGCONT) })

	// The sender retries on 503 until its deadline: the event stored
	// within it is the property (a poll with a deadline, not a timing
	// measured after the fact).
	l.deadline = 20 * time.Second
	ev := l.newEvent("G-1")
	l.deliver(0, ev, false)
	took := time.Since(frozen)
	var n503, nOther int
	for _, a := range l.within(frozen, time.Now().Add(time.Hour)) {
		switch a.status {
		case http.StatusOK:
		case http.StatusServiceUnavailable:
			n503++
		default:
			nOther++
		}
	}
	stderr := hg.stderr.String()
	t.Logf("event stored %s after the freeze (gave up: %v); %d answers 503, %d other failures; hookgate logged reconnects: %v",
		took.Round(time.Millisecond), l.gaveUp, n503, nOther, strings.Contains(stderr, "reconnect"))
	if l.gaveUp != nil {
		t.Fatalf("with 2 of 3 nodes up and leading everything, a sender retrying for %s never had its event stored after one node froze (gave up: %v, %d 503s)",
			l.deadline, l.gaveUp, n503)
	}
	// Stored is half of it: the consumer settles it too. Read through the
	// two nodes that answer (j may sit on the frozen one).
	waitSettled(t, j2, 60*time.Second)
}
