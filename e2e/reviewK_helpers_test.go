package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
)

// Review K: helpers to place Raft leaders on chosen nodes before a fault,
// so a kill -9 hits exactly the asset a test is about.

// urlWithout is the nats.url of every node but the ones given, so a
// hookgate's connections survive their kill (only the Raft groups move).
func (c *natsCluster) urlWithout(not ...*natsNode) string {
	var urls []string
	for _, n := range c.nodes {
		skip := false
		for _, x := range not {
			skip = skip || x == n
		}
		if !skip {
			urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", n.clientPort))
		}
	}
	return strings.Join(urls, ",")
}

// metaLeader returns the node leading the JetStream meta group.
func (c *natsCluster) metaLeader(j js.JetStream) string {
	// The server's /jsz names the meta leader.
	for _, n := range c.nodes {
		var jsz struct {
			MetaCluster struct {
				Leader string `json:"leader"`
			} `json:"meta_cluster"`
		}
		if err := getJSON(fmt.Sprintf("http://127.0.0.1:%d/jsz", n.httpPort), &jsz); err == nil && jsz.MetaCluster.Leader != "" {
			return jsz.MetaCluster.Leader
		}
	}
	return ""
}

func getJSON(url string, v any) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// placeLeader asks the group behind subject (a LEADER.STEPDOWN API subject)
// to move its leader to the node named want, and waits until leader()
// names it.
func (c *natsCluster) placeLeader(j js.JetStream, what, stepdownSubject, want string, leader func() string) {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	body := fmt.Appendf(nil, `{"placement":{"preferred":%q}}`, want)
	for {
		cur := leader()
		if cur == want {
			return
		}
		if cur != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			resp, err := j.Conn().RequestWithContext(ctx, stepdownSubject, body)
			cancel()
			if err == nil {
				var r struct {
					Error *struct {
						Description string `json:"description"`
					} `json:"error"`
				}
				_ = json.Unmarshal(resp.Data, &r)
				if r.Error != nil {
					c.t.Logf("stepdown %s to %s: %s", what, want, r.Error.Description)
				}
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("could not move the leader of %s to %s (leader %q)", what, want, cur)
		}
		// Poll for the move.
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end) && leader() != want; {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// placeStreamLeader moves stream's leader to want.
func (c *natsCluster) placeStreamLeader(j js.JetStream, stream, want string) {
	c.t.Helper()
	c.placeLeader(j, "stream "+stream, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, want, func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := j.Stream(ctx, stream)
		if err != nil {
			return ""
		}
		info, err := s.Info(ctx)
		if err != nil || info.Cluster == nil {
			return ""
		}
		return info.Cluster.Leader
	})
}

// placeConsumerLeader moves a consumer's leader to want.
func (c *natsCluster) placeConsumerLeader(j js.JetStream, stream, consumer, want string) {
	c.t.Helper()
	c.placeLeader(j, "consumer "+consumer, "$JS.API.CONSUMER.LEADER.STEPDOWN."+stream+"."+consumer, want, func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		cons, err := j.Consumer(ctx, stream, consumer)
		if err != nil || cons.CachedInfo().Cluster == nil {
			return ""
		}
		return cons.CachedInfo().Cluster.Leader
	})
}

// hookgateStreams is every stream hookgate keeps on a cluster.
var hookgateStreams = []string{"WEBHOOKS", "GRANTS", "DLQ", "AUDIT", "KV_WATERMARKS", "KV_APPLIED", "KV_HOOKGATE_LOCKS"}

// placeAllBut puts every hookgate stream's leader and the durable
// consumer's on home, except those in on, which go to their node.
func (c *natsCluster) placeAllBut(j js.JetStream, home string, on map[string]string) {
	c.t.Helper()
	var present []string
	for _, s := range hookgateStreams {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := j.Stream(ctx, s)
		cancel()
		if err == nil {
			present = append(present, s)
		}
	}
	for _, s := range present {
		want := home
		if n, ok := on[s]; ok {
			want = n
		}
		c.placeStreamLeader(j, s, want)
	}
	want := home
	if n, ok := on["hookgate-apply"]; ok {
		want = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err := j.Consumer(ctx, "WEBHOOKS", "hookgate-apply")
	cancel()
	if err == nil {
		c.placeConsumerLeader(j, "WEBHOOKS", "hookgate-apply", want)
	}
	// Moving one may have moved nothing else, but check all once more.
	for _, s := range present {
		want := home
		if n, ok := on[s]; ok {
			want = n
		}
		if got := c.streamLeader(j, s, nil, 10*time.Second).name; got != want {
			c.t.Fatalf("stream %s led by %s after placing, want %s", s, got, want)
		}
	}
}

// victimAndHome picks a node that does not lead the meta group (a stepdown
// of the meta leader needs the system account) as the one to kill, and
// the meta leader as home for everything else.
func (c *natsCluster) victimAndHome(j js.JetStream) (victim, home *natsNode) {
	c.t.Helper()
	var meta string
	for end := time.Now().Add(30 * time.Second); meta == ""; time.Sleep(100 * time.Millisecond) {
		if meta = c.metaLeader(j); meta == "" && time.Now().After(end) {
			c.t.Fatal("no meta leader")
		}
	}
	home = c.node(meta)
	for _, n := range c.nodes {
		if n != home {
			return n, home
		}
	}
	return nil, nil
}

// appliedWithin posts ev and returns how long the consumer took to settle
// it (and everything before it), failing after d.
func appliedWithin(t *testing.T, j js.JetStream, l *load, ev *loadEvent, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	l.deliver(0, ev, false)
	if l.gaveUp != nil || l.problems != nil {
		t.Fatalf("delivery: gave up %v, problems %v", l.gaveUp, l.problems)
	}
	waitSettled(t, j, d)
	return time.Since(start)
}
