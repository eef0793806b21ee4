package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SIGTERM stops accepting, lets an in-flight request finish (its event is
// stored and answered 200), then exits 0.
func TestGracefulShutdownFinishesInFlight(t *testing.T) {
	e := newEnv(t, "")
	hg := start(t, e.cfgPath)
	addr := strings.TrimPrefix(hg.baseURL, "http://")

	body := []byte(`{"grant_id":"G-1","type":"t","occurred_at":"2026-11-30T10:00:00Z"}`)
	h := signGrants(t, "msg_inflight", body)
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var req strings.Builder
	fmt.Fprintf(&req, "POST /webhooks/grants HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", addr, len(body))
	for k, v := range h {
		fmt.Fprintf(&req, "%s: %s\r\n", k, v[0])
	}
	// Expect: 100-continue makes the server say when the handler has
	// started reading the body: then the request is surely in flight.
	req.WriteString("Expect: 100-continue\r\n\r\n")
	if _, err := conn.Write([]byte(req.String())); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := br.ReadString('\n')
	if err != nil || !strings.Contains(line, "100 Continue") {
		t.Fatalf("want 100 Continue, got %q, %v", line, err)
	}
	if _, err := br.ReadString('\n'); err != nil { // the blank line after it
		t.Fatal(err)
	}
	if _, err := conn.Write(body[:len(body)/2]); err != nil {
		t.Fatal(err)
	}
	if err := hg.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Shutdown has begun once new connections are refused.
	waitFor(t, "the listener to close after SIGTERM", 10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	select {
	case <-hg.done:
		t.Fatalf("hookgate exited with a request in flight:\n%s", hg.stderr)
	default:
	}
	if _, err := conn.Write(body[len(body)/2:]); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("in-flight request got no answer: %v\n%s", err, hg.stderr)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("in-flight request answered %d, want 200", resp.StatusCode)
	}
	select {
	case <-hg.done:
	case <-time.After(30 * time.Second):
		t.Fatal("hookgate did not exit within 30s of SIGTERM")
	}
	if code := hg.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM:\n%s", code, hg.stderr)
	}
	// The answered event was stored: after a restart it is a duplicate.
	hg = start(t, e.cfgPath)
	expect(t, post(t, hg.baseURL+"/webhooks/grants", signGrants(t, "msg_inflight", body), body), 200, "status", "duplicate")
}

// A second SIGTERM while serve waits out http.shutdown_delay ends it at
// once (review D2: the signal was caught and dropped, so only SIGKILL cut
// the drain short); what was answered 200 is still stored.
func TestSecondSignalEndsTheDrain(t *testing.T) {
	e := newEnv(t, "")
	cfg, err := os.ReadFile(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(strings.Replace(string(cfg), "http:\n", "http:\n  shutdown_delay: 50s\n", 1))
	if err := os.WriteFile(e.cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	hg := start(t, e.cfgPath)
	body := []byte(`{"grant_id":"G-1","type":"t","occurred_at":"2026-11-30T10:00:00Z"}`)
	if r := post(t, hg.baseURL+"/webhooks/grants", signGrants(t, "msg_before_stop", body), body); r.status != 200 {
		t.Fatalf("before the stop: %d %s", r.status, r.body)
	}
	_ = hg.cmd.Process.Signal(syscall.SIGTERM)
	for end := time.Now().Add(20 * time.Second); readyz(hg.baseURL) != http.StatusServiceUnavailable; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no /readyz 503 while draining within 20 s:\n%s", hg.stderr)
		}
	}
	_ = hg.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-hg.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("serve still draining 20 s after a second SIGTERM (its delay is 50 s):\n%s", hg.stderr)
	}
	start(t, e.cfgPath) // its NATS serves the read below
	seen := 0
	for _, k := range storedKeys(t, natsClient(t, e.natsURL, natsToken)) {
		if k == "grants:default:evt:msg_before_stop" {
			seen++
		}
	}
	if seen != 1 {
		t.Fatalf("the event answered 200 before the stop is stored %d times", seen)
	}
}
