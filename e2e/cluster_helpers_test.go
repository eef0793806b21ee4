package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// natsServerModule is the server the cluster tests run, at the version
// go.mod pins.
const natsServerModule = "github.com/nats-io/nats-server/v2"

var (
	natsServerOnce sync.Once
	natsServerPath string
	natsServerErr  error
)

// natsServerBinary finds the nats-server binary: $NATS_SERVER, then
// GOBIN / GOPATH/bin (where `go install` puts it), then PATH. A missing
// binary fails the test (CI installs it) unless -short is set.
func natsServerBinary(t testing.TB) string {
	t.Helper()
	natsServerOnce.Do(func() { natsServerPath, natsServerErr = findNATSServer() })
	if natsServerErr != nil {
		if testing.Short() {
			t.Skipf("-short: %v", natsServerErr)
		}
		t.Fatal(natsServerErr)
	}
	return natsServerPath
}

func findNATSServer() (string, error) {
	want := "v?"
	if out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", natsServerModule).Output(); err == nil {
		want = strings.TrimSpace(string(out))
	}
	install := fmt.Sprintf("go install %s@%s (or make nats-server)", natsServerModule, want)
	var candidates []string
	if p := os.Getenv("NATS_SERVER"); p != "" {
		candidates = append(candidates, p)
	} else if out, err := exec.Command("go", "env", "-json", "GOBIN", "GOPATH").Output(); err == nil {
		var env struct{ GOBIN, GOPATH string }
		if err := json.Unmarshal(out, &env); err == nil {
			if env.GOBIN != "" {
				candidates = append(candidates, filepath.Join(env.GOBIN, "nats-server"))
			}
			for _, gp := range filepath.SplitList(env.GOPATH) {
				candidates = append(candidates, filepath.Join(gp, "bin", "nats-server"))
			}
		}
	}
	if p, err := exec.LookPath("nats-server"); err == nil && os.Getenv("NATS_SERVER") == "" {
		candidates = append(candidates, p)
	}
	for _, p := range candidates {
		out, err := exec.Command(p, "--version").Output()
		if err != nil {
			continue
		}
		have := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "nats-server:"))
		if want != "v?" && have != want {
			return "", fmt.Errorf("%s is nats-server %s, go.mod pins %s: run %s", p, have, want, install)
		}
		return p, nil
	}
	return "", fmt.Errorf("the cluster tests need the nats-server binary (looked in $NATS_SERVER, GOBIN, GOPATH/bin, PATH): run %s", install)
}

var (
	nodePortsMu sync.Mutex
	nodePorts   = map[int]bool{}
)

// nodePort picks a free loopback port for a node below the kernel's
// ephemeral range (32768 up on Linux): a restarted node must get its
// ports back, and a port from that range may meanwhile be the source port
// of some outgoing connection (a client reconnecting). Other packages'
// tests pick below 20000 (cmd/hookgate 12000-19999, the bench harness
// 10000-11999), so they never take a restarted node's. Never the same
// port twice in this process, so parallel tests do not collide.
func nodePort(t testing.TB) int {
	t.Helper()
	nodePortsMu.Lock()
	defer nodePortsMu.Unlock()
	for range 1000 {
		p := 20000 + mathrand.IntN(12000)
		if nodePorts[p] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ln.Close()
		nodePorts[p] = true
		return p
	}
	t.Fatal("no free port in 20000-31999")
	return 0
}

// natsNode is one nats-server process of a natsCluster.
type natsNode struct {
	name                              string
	clientPort, clusterPort, httpPort int
	conf, logPath                     string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// natsCluster is a 3-node JetStream cluster of real nats-server processes
// on loopback, so a node can be killed with SIGKILL and restarted on its
// store.
type natsCluster struct {
	t     testing.TB
	bin   string
	nodes []*natsNode
}

// startCluster writes the three nodes' configs (ports chosen up front,
// stores in t.TempDir()), starts them and waits for a JetStream meta
// leader. The nodes are killed at cleanup.
func startCluster(t testing.TB) *natsCluster {
	t.Helper()
	bin := natsServerBinary(t)
	dir := t.TempDir()
	c := &natsCluster{t: t, bin: bin}
	for i := range 3 {
		c.nodes = append(c.nodes, &natsNode{
			name:        fmt.Sprintf("n%d", i+1),
			clientPort:  nodePort(t),
			clusterPort: nodePort(t),
			httpPort:    nodePort(t),
		})
	}
	var routes strings.Builder
	for _, n := range c.nodes {
		fmt.Fprintf(&routes, "    nats://127.0.0.1:%d\n", n.clusterPort)
	}
	clusterName := "hg-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	if len(clusterName) > 40 {
		clusterName = clusterName[:40]
	}
	for _, n := range c.nodes {
		store := filepath.Join(dir, n.name)
		n.conf = filepath.Join(dir, n.name+".conf")
		n.logPath = filepath.Join(dir, n.name+".log")
		conf := fmt.Sprintf(`server_name: %q
listen: "127.0.0.1:%d"
http: "127.0.0.1:%d"
max_payload: 4MB
jetstream {
  store_dir: %q
  max_memory_store: 64MB
  max_file_store: 1GB
}
cluster {
  name: %q
  listen: "127.0.0.1:%d"
  routes: [
%s  ]
}
`, n.name, n.clientPort, n.httpPort, store, clusterName, n.clusterPort, routes.String())
		if err := os.WriteFile(n.conf, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.nodes {
		c.spawn(n)
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			c.signal(n, syscall.SIGKILL)
		}
		if t.Failed() || keepLogs {
			for _, n := range c.nodes {
				b, _ := os.ReadFile(n.logPath)
				t.Logf("--- tail of %s's log (whole log in %s):\n%s", n.name, keepLog(t, n.name, string(b)), tailFile(n.logPath, 10))
			}
		}
	})
	c.waitHealthy(60*time.Second, c.nodes...)
	return c
}

func (c *natsCluster) spawn(n *natsNode) {
	c.t.Helper()
	f, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(c.bin, "-c", n.conf)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		c.t.Fatalf("start %s: %v", n.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
}

// signal sends sig to the node and waits for it to exit.
func (c *natsCluster) signal(n *natsNode, sig syscall.Signal) {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// URL is the nats.url listing every node.
func (c *natsCluster) URL() string {
	urls := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		urls[i] = fmt.Sprintf("nats://127.0.0.1:%d", n.clientPort)
	}
	return strings.Join(urls, ",")
}

// node returns the node with the given server name.
func (c *natsCluster) node(name string) *natsNode {
	c.t.Helper()
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	c.t.Fatalf("no node named %q", name)
	return nil
}

// kill9 kills the node with SIGKILL and waits until it is gone.
func (c *natsCluster) kill9(n *natsNode) { c.signal(n, syscall.SIGKILL) }

// restart starts a stopped node again on its store and waits until it is
// healthy (JetStream current with the meta leader).
func (c *natsCluster) restart(n *natsNode) {
	c.t.Helper()
	c.spawn(n)
	c.waitHealthy(60*time.Second, n)
}

// waitHealthy polls each node's /healthz until it answers 200: the node
// runs JetStream and is in contact with a meta leader.
func (c *natsCluster) waitHealthy(d time.Duration, nodes ...*natsNode) {
	c.t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(d)
	for _, n := range nodes {
		for {
			resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", n.httpPort))
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			n.mu.Lock()
			done := n.done
			n.mu.Unlock()
			select {
			case <-done:
				c.t.Fatalf("nats-server %s exited:\n%s", n.name, tailFile(n.logPath, 30))
			default:
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("nats-server %s not healthy after %s:\n%s", n.name, d, tailFile(n.logPath, 30))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// client connects to the cluster (all nodes) for the test's own reads.
func (c *natsCluster) client() js.JetStream {
	c.t.Helper()
	nc, err := nats.Connect(c.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.RetryOnFailedConnect(true))
	if err != nil {
		c.t.Fatalf("connect to cluster: %v", err)
	}
	c.t.Cleanup(nc.Close)
	j, err := js.New(nc, js.WithDefaultTimeout(5*time.Second))
	if err != nil {
		c.t.Fatal(err)
	}
	return j
}

// streamLeader returns the node leading stream's Raft group, waiting while
// there is none or while the leader is still reported as not (a node just
// killed).
func (c *natsCluster) streamLeader(j js.JetStream, stream string, not *natsNode, d time.Duration) *natsNode {
	c.t.Helper()
	return c.leaderOf("stream "+stream, not, d, func(ctx context.Context) (*js.ClusterInfo, error) {
		s, err := j.Stream(ctx, stream)
		if err != nil {
			return nil, err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return nil, err
		}
		return info.Cluster, nil
	})
}

// consumerLeader is streamLeader for a consumer of stream.
func (c *natsCluster) consumerLeader(j js.JetStream, stream, consumer string, not *natsNode, d time.Duration) *natsNode {
	c.t.Helper()
	return c.leaderOf("consumer "+consumer, not, d, func(ctx context.Context) (*js.ClusterInfo, error) {
		cons, err := j.Consumer(ctx, stream, consumer)
		if err != nil {
			return nil, err
		}
		return cons.CachedInfo().Cluster, nil
	})
}

func (c *natsCluster) leaderOf(what string, not *natsNode, d time.Duration, read func(context.Context) (*js.ClusterInfo, error)) *natsNode {
	c.t.Helper()
	var last error
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		leader := ""
		ci, err := read(ctx)
		if err == nil && ci != nil {
			leader = ci.Leader
		}
		cancel()
		last = err
		if leader != "" && (not == nil || leader != not.name) {
			return c.node(leader)
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s has no new leader after %s (last error: %v)", what, d, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitReplicasCurrent waits until every replica of stream is current with
// its leader (after a restarted node caught up).
func (c *natsCluster) waitReplicasCurrent(j js.JetStream, stream string, d time.Duration) {
	c.t.Helper()
	var last string
	deadline := time.Now().Add(d)
	for !c.replicasCurrent(j, stream, &last) {
		if time.Now().After(deadline) {
			c.t.Fatalf("%s replicas not current after %s: %s", stream, d, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *natsCluster) replicasCurrent(j js.JetStream, stream string, last *string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	s, err := j.Stream(ctx, stream)
	if err != nil {
		*last = err.Error()
		return false
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
		*last = fmt.Sprintf("no leader (%v)", err)
		return false
	}
	if len(info.Cluster.Replicas) != len(c.nodes)-1 {
		*last = fmt.Sprintf("%d replicas besides the leader", len(info.Cluster.Replicas))
		return false
	}
	for _, r := range info.Cluster.Replicas {
		if !r.Current || r.Offline || r.Lag > 0 {
			*last = fmt.Sprintf("replica %s current=%v offline=%v lag=%d", r.Name, r.Current, r.Offline, r.Lag)
			return false
		}
	}
	return true
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// hgProc is a hookgate serve process in a cluster test: its HTTP address
// is the gateway's, or the admin one for a consumer-only instance.
type hgProc struct {
	*instance
	name string
}

// killedHard reports whether p has died of SIGKILL.
func (p *hgProc) killedHard() bool {
	select {
	case <-p.done:
	default:
		return false
	}
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// startServe runs `hookgate serve` like start, but also accepts the admin
// line that a consumer-only instance prints instead of the gateway's.
func startServe(t testing.TB, name, cfgPath string) *hgProc {
	t.Helper()
	p, err := launchServe(t, name, cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// launchServe is startServe for any goroutine: it returns the error
// instead of failing the test.
func launchServe(t testing.TB, name, cfgPath string) (*hgProc, error) {
	cmd := exec.Command(binary, "serve", "--config", cfgPath)
	cmd.Env = os.Environ()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	in := &instance{t: t, cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = in.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	addr := make(chan string, 2)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			for _, p := range []string{"hookgate: listening on ", "hookgate: admin on "} {
				if rest, ok := strings.CutPrefix(sc.Text(), p); ok {
					addr <- rest
				}
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(in.done) }()
	t.Cleanup(func() {
		in.kill()
		in.noLostAlarm()
		if t.Failed() || keepLogs {
			log := in.stderr.String()
			t.Logf("--- hookgate %s (pid %d): its last lines above debug, then the tail of its log (whole log in %s):\n%s\n---\n%s", name, cmd.Process.Pid,
				keepLog(t, "hookgate-"+name, log), aboveDebug(log, 30), tailString(log, 10))
		}
	})
	select {
	case a := <-addr:
		in.baseURL = a
	case <-in.done:
		return nil, fmt.Errorf("hookgate %s exited before listening:\n%s", name, in.stderr)
	case <-time.After(60 * time.Second):
		return nil, fmt.Errorf("hookgate %s not listening after 60s:\n%s", name, in.stderr)
	}
	// serve listens before it provisions the consumer; "hookgate started"
	// comes after, when every role runs.
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(in.stderr.String(), `"msg":"hookgate started"`) {
		select {
		case <-in.done:
			return nil, fmt.Errorf("hookgate %s exited after listening:\n%s", name, in.stderr)
		default:
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("hookgate %s not started after 60s:\n%s", name, in.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &hgProc{instance: in, name: name}, nil
}

// keepLogs (E2E_KEEP_LOGS=1) keeps the logs of passing tests too.
var keepLogs = os.Getenv("E2E_KEEP_LOGS") != ""

// keepLog writes a failed test's log where it outlives t.TempDir and
// returns the path.
func keepLog(t testing.TB, name, content string) string {
	dir := filepath.Join(os.TempDir(), "hookgate-cluster-logs", strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err.Error()
	}
	path := filepath.Join(dir, name+".log")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return err.Error()
	}
	return path
}

// aboveDebug is the last n lines of a hookgate log that are not at debug
// level: the lock, hand-over and warning lines a CI failure is read by,
// which the per-event debug lines push out of the tail.
func aboveDebug(log string, n int) string {
	var keep []string
	for line := range strings.Lines(log) {
		if !strings.Contains(line, `"level":"DEBUG"`) {
			keep = append(keep, strings.TrimRight(line, "\n"))
		}
	}
	return strings.Join(keep[max(len(keep)-n, 0):], "\n")
}

func tailString(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// clusterConfig is a hookgate config for the cluster: every stream and
// bucket R3, the grants provider of newEnv, retries fast enough for a
// minute-long test, per-event log lines. roles and forward may be empty.
type clusterConfig struct {
	natsURL    string
	roles      string // e.g. "{ gateway: false, consumer: true }"
	forwardURL string
	replicas   int    // 0: 3
	natsTLS    string // nats.tls as YAML flow, e.g. "{ ca: /x/ca.pem }"
}

func writeClusterConfig(t testing.TB, c clusterConfig) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, `http:
  listen: "127.0.0.1:0"
  max_body_bytes: 65536
  timeouts: { read_header: 2s, read: 5s, write: 10s, idle: 30s }
nats:
  url: %q
  replicas: %d
  tls: %s
# The nodes have 1 GB of file store; streams reserve their max_bytes.
retention:
  webhooks: { max_bytes: 256MB }
  grants: { max_bytes: 256MB }
  dlq: { max_bytes: 64MB }
  audit: { max_bytes: 256MB }
consumer:
  workers: 8
  max_deliver: 8
  backoff: [250ms, 500ms, 1s, 2s]
# The reconciliation reads every consumer decision from the logs, too.
log: { level: debug }
`, c.natsURL, cmp.Or(c.replicas, 3), cmp.Or(c.natsTLS, "{}"))
	if c.roles != "" {
		fmt.Fprintf(&b, "roles: %s\n", c.roles)
	}
	fmt.Fprintf(&b, `providers:
  grants:
    signature: { scheme: standard-webhooks, secrets: [%q] }
    event_id: ["header:webhook-id"]
    subject: "json:/grant_id"
    occurred_at: "json:/occurred_at"
    type: "json:/type"
    effects:
      forward: { url: %q, timeout: 1s }
`, grantsSecret, c.forwardURL)
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := cliRun(t, "config", "check", path)
	if code != 0 {
		t.Fatalf("config check %s: exit %d\n%s%s\n%s", path, code, out, errOut, b.String())
	}
	return path
}

// cliRun runs a hookgate command and returns stdout, stderr and exit code.
func cliRun(t testing.TB, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	}
	t.Fatalf("hookgate %v: %v", args, err)
	return "", "", 0
}

// metric returns the value of the series named exactly series (name and
// labels as /metrics writes them) in base's /metrics, and whether it is
// there.
func metric(t testing.TB, base, series string) (float64, bool) {
	t.Helper()
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatalf("GET %s/metrics: %v", base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s/metrics: %v", base, err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("%s: %q", series, line)
			}
			return v, true
		}
	}
	return 0, false
}
