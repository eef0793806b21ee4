// Package e2e runs the real hookgate binary as a subprocess and talks HTTP
// and NATS to it over loopback. Every wait polls for a state with a
// deadline.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hookgate-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "hookgate")
	cmd := exec.Command("go", "build", "-o", binary, "../cmd/hookgate")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build hookgate:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// freePort returns a loopback port nobody listens on right now, for a
// listener that binds it later, often again after a restart: nodePort's,
// outside the kernel's ephemeral range, where a listener on port 0 or an
// outgoing connection of another test could take it meanwhile.
func freePort(t testing.TB) int {
	t.Helper()
	return nodePort(t)
}

// instance is one running hookgate process.
type instance struct {
	t       testing.TB
	cmd     *exec.Cmd
	baseURL string
	stderr  *syncBuffer
	done    chan struct{}
	// letsExpire: the test makes events outlive WEBHOOKS' max_age, and
	// the serve's line telling them lost is expected (noLostAlarm).
	letsExpire bool
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs `hookgate serve --config cfgPath` and waits for its listening
// line. The process is killed at cleanup if still running.
func start(t testing.TB, cfgPath string, env ...string) *instance {
	t.Helper()
	in, addr := spawnServe(t, cfgPath, env...)
	in.awaitListening(t, addr)
	return in
}

// awaitListening waits up to 60 s for the listening line spawnCmd's addr
// channel gives, and sets baseURL from it.
func (in *instance) awaitListening(t testing.TB, addr <-chan string) {
	t.Helper()
	select {
	case a := <-addr:
		in.baseURL = a
	case <-in.done:
		t.Fatalf("hookgate exited before listening:\n%s", in.stderr)
	case <-time.After(60 * time.Second):
		t.Fatalf("hookgate not listening after 60s:\n%s", in.stderr)
	}
}

// spawnServe runs `hookgate serve --config cfgPath` and returns at once,
// with a channel that gets the address of its listening line. The process
// is killed at cleanup if still running.
func spawnServe(t testing.TB, cfgPath string, env ...string) (*instance, <-chan string) {
	t.Helper()
	cmd := exec.Command(binary, "serve", "--config", cfgPath)
	cmd.Env = append(os.Environ(), env...)
	return spawnCmd(t, cmd)
}

// spawnCmd runs cmd, a serve (or a shell that execs one), as spawnServe
// does.
func spawnCmd(t testing.TB, cmd *exec.Cmd) (*instance, <-chan string) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in := &instance{t: t, cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = in.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "hookgate: listening on "); ok {
				addr <- rest
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(in.done) }()
	t.Cleanup(func() {
		in.kill()
		in.noLostAlarm()
	})
	return in, addr
}

// noLostAlarm fails the test when the serve told events lost to
// WEBHOOKS' max_age: but for the tests that let events expire
// (letsExpire), none keeps events for less than an hour or runs that
// long, so every such line would be a false alarm (after a kill, a
// restart, a lock handover, a replay).
func (in *instance) noLostAlarm() {
	if log := in.stderr.String(); !in.letsExpire && strings.Contains(log, "before they were applied: they are lost") {
		in.t.Errorf("a serve told events lost to max_age that no test let expire:\n%s", grepString(log, "they are lost"))
	}
}

// grepString is the lines of s that contain word.
func grepString(s, word string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, word) {
			out = append(out, strings.TrimRight(line, "\n"))
		}
	}
	return strings.Join(out, "\n")
}

// kill sends SIGKILL and waits for the process to go.
func (in *instance) kill() {
	select {
	case <-in.done:
		return
	default:
	}
	_ = in.cmd.Process.Signal(syscall.SIGKILL)
	<-in.done
}

// stop sends SIGTERM and waits up to 30s for a clean exit.
func (in *instance) stop(t testing.TB) {
	t.Helper()
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-in.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("hookgate did not stop within 30s of SIGTERM:\n%s", in.stderr)
	}
	if code := in.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("hookgate exit code %d after SIGTERM:\n%s", code, in.stderr)
	}
}

type response struct {
	status int
	header http.Header
	body   string
}

var client = &http.Client{Timeout: 30 * time.Second}

func post(t testing.TB, url string, header http.Header, body []byte) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// readyz is base's /readyz status, 0 when nothing answered.
func readyz(base string) int {
	resp, err := client.Get(base + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitFor polls cond every 50ms until it holds or the deadline passes.
func waitFor(t testing.TB, what string, deadline time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %s waiting for %s", deadline, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// natsClient connects to a hookgate's NATS (embedded listen address with
// its token, or an external server).
func natsClient(t testing.TB, url, token string) js.JetStream {
	t.Helper()
	opts := []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond)}
	if token != "" {
		opts = append(opts, nats.Token(token))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	j, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// publishAll publishes n messages (msg gives each one's subject, body and
// Nats-Msg-Id) straight to JetStream, asynchronously, and waits until every
// one is acknowledged, within d. When the server falls behind (a busy
// machine: nats.go gives up on a stalled window after 200 ms) it waits for
// the window to drain and goes on.
func publishAll(t testing.TB, j js.JetStream, n int, d time.Duration, msg func(i int) (subject string, body []byte, id string)) {
	t.Helper()
	deadline := time.After(d)
	for i := 0; i < n; {
		subject, body, id := msg(i)
		_, err := j.PublishAsync(subject, body, js.WithMsgID(id))
		if errors.Is(err, js.ErrTooManyStalledMsgs) {
			select {
			case <-j.PublishAsyncComplete():
			case <-deadline:
				t.Fatalf("publishes not acknowledged within %s", d)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		i++
	}
	select {
	case <-j.PublishAsyncComplete():
	case <-deadline:
		t.Fatalf("publishes not acknowledged within %s", d)
	}
}

// storedKeys returns the Nats-Msg-Id of every message in WEBHOOKS.
func storedKeys(t testing.TB, j js.JetStream) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := j.Stream(ctx, "WEBHOOKS")
	if err != nil {
		t.Fatalf("stream WEBHOOKS: %v", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue // a gap (none expected in WEBHOOKS, which denies deletes)
		}
		keys = append(keys, m.Header.Get("Nats-Msg-Id"))
	}
	return keys
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
