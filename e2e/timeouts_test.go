package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The http.Server timeouts are black-box behaviour: a client too slow with
// its headers or body is cut off, an idle keep-alive connection is closed,
// and an answer due after the write timeout is not sent. Every network wait
// has a deadline; everything is on loopback.

// tmoEnv writes a config like newEnv's (embedded NATS listening on
// loopback with natsToken, the grants provider) with the given
// http.timeouts, so a test can use timeouts shorter than newEnv's.
func tmoEnv(t *testing.T, timeouts string) *env {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	e := &env{dir: dir, cfgPath: filepath.Join(dir, "hookgate.yaml"), natsURL: fmt.Sprintf("nats://127.0.0.1:%d", port)}
	cfg := fmt.Sprintf(`http:
  listen: "127.0.0.1:0"
  max_body_bytes: 65536
  timeouts: %s
nats:
  embedded:
    data_dir: %q
    listen: "127.0.0.1:%d"
    token: %q
providers:
  grants:
    signature: { scheme: standard-webhooks, secrets: [%q] }
    event_id: ["header:webhook-id"]
    subject: "json:/grant_id"
    occurred_at: "json:/occurred_at"
    type: "json:/type"
`, timeouts, filepath.Join(dir, "data"), port, natsToken, grantsSecret)
	if err := os.WriteFile(e.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

// tmoSignedRequest is a complete, correctly signed delivery to grants,
// split into its head and body, so a test can send them at its own pace.
// keepAlive leaves out Connection: close.
func tmoSignedRequest(t *testing.T, id string, keepAlive bool) (head, body []byte) {
	t.Helper()
	body = []byte(`{"grant_id":"G-slow","type":"x","occurred_at":"2026-11-30T10:00:00Z","pad":"0123456789"}`)
	var b strings.Builder
	b.WriteString("POST /webhooks/grants HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n")
	if !keepAlive {
		b.WriteString("Connection: close\r\n")
	}
	for name, vs := range signGrants(t, id, body) {
		fmt.Fprintf(&b, "%s: %s\r\n", name, vs[0])
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body))
	return []byte(b.String()), body
}

func tmoHost(t *testing.T, baseURL string) string {
	t.Helper()
	u, err := url.Parse(baseURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// tmoDial connects with every later read and write bounded by limit.
func tmoDial(t *testing.T, addr string, limit time.Duration) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(limit))
	return c
}

// tmoTrickle writes data one byte per every until it is all sent, a write
// fails (the server hung up) or stop is closed. It returns at once; done
// is closed when it stops.
func tmoTrickle(c net.Conn, data []byte, every time.Duration, stop <-chan struct{}) (done <-chan struct{}) {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for i := range data {
			if _, err := c.Write(data[i : i+1]); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(every):
			}
		}
	}()
	return ch
}

// tmoAwaitCut waits for the server to give up on the connection: either an
// answer that is not a success, followed by the connection closing, or a
// close without an answer. It returns how long after start that happened
// and the status (0 when there was no answer). A read deadline (set by
// tmoDial) fails the test instead.
func tmoAwaitCut(t *testing.T, c net.Conn, start time.Time) (time.Duration, int) {
	t.Helper()
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	at := time.Since(start)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("still connected after %s: the server did not cut the connection off", at.Round(time.Millisecond))
		}
		return at, 0 // EOF or reset: closed without an answer
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode < 400 {
		t.Fatalf("answered %d %q to a request that never completed", resp.StatusCode, b)
	}
	if _, err := br.ReadByte(); err == nil {
		t.Fatalf("connection still open after the %d answer", resp.StatusCode)
	} else if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after the %d answer", resp.StatusCode)
	}
	return at, resp.StatusCode
}

func tmoWithin(t *testing.T, what string, got, low, high time.Duration) {
	t.Helper()
	if got < low || got > high {
		t.Fatalf("%s after %s, want between %s and %s", what, got.Round(time.Millisecond), low, high)
	}
	t.Logf("%s after %s", what, got.Round(time.Millisecond))
}

// TestTimeoutsCutOffSlowClients runs against newEnv's config: read_header
// 2s, read 5s. Slack above each timeout absorbs a loaded machine; the
// lower bounds show the server waited for its timeout rather than
// dropping slow clients on sight.
func TestTimeoutsCutOffSlowClients(t *testing.T) {
	e := newEnv(t, "")
	hg := start(t, e.cfgPath)
	j := natsClient(t, e.natsURL, natsToken)
	addr := tmoHost(t, hg.baseURL)
	before := storedKeys(t, j)

	t.Run("group", func(t *testing.T) {
		t.Run("silent connection", func(t *testing.T) {
			t.Parallel()
			c := tmoDial(t, addr, 10*time.Second)
			start := time.Now()
			at, status := tmoAwaitCut(t, c, start)
			tmoWithin(t, fmt.Sprintf("silent connection cut (status %d)", status), at, 1500*time.Millisecond, 10*time.Second)
		})
		t.Run("headers slower than read_header", func(t *testing.T) {
			t.Parallel()
			head, body := tmoSignedRequest(t, "tmo_slow_header", false)
			c := tmoDial(t, addr, 10*time.Second)
			start := time.Now()
			stop := make(chan struct{})
			// A byte every 100ms: the head (~250 bytes) would take 25s.
			done := tmoTrickle(c, append(head, body...), 100*time.Millisecond, stop)
			at, status := tmoAwaitCut(t, c, start)
			close(stop)
			<-done
			if status != 0 && status != http.StatusBadRequest && status != http.StatusRequestTimeout {
				t.Fatalf("slow headers answered %d, want 400, 408 or a close", status)
			}
			tmoWithin(t, fmt.Sprintf("slow headers cut (status %d)", status), at, 1500*time.Millisecond, 10*time.Second)
		})
		t.Run("body slower than read", func(t *testing.T) {
			t.Parallel()
			head, body := tmoSignedRequest(t, "tmo_slow_body", false)
			c := tmoDial(t, addr, 15*time.Second)
			start := time.Now()
			if _, err := c.Write(head); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			// A byte every 250ms: the body (~90 bytes) would take 22s.
			done := tmoTrickle(c, body, 250*time.Millisecond, stop)
			at, status := tmoAwaitCut(t, c, start)
			close(stop)
			<-done
			if status != 0 && status != http.StatusBadRequest && status != http.StatusRequestTimeout {
				t.Fatalf("slow body answered %d, want 400, 408 or a close", status)
			}
			tmoWithin(t, fmt.Sprintf("slow body cut (status %d)", status), at, 4500*time.Millisecond, 15*time.Second)
		})
	})

	// Nothing of the cut-off requests is stored (each was correctly
	// signed), and the server still serves.
	if after := storedKeys(t, j); len(after) != len(before) {
		t.Fatalf("WEBHOOKS went from %v to %v: a cut-off request was stored", before, after)
	}
	resp, err := client.Get(hg.baseURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz = %d after the slow clients", resp.StatusCode)
	}
	head, body := tmoSignedRequest(t, "tmo_after", false)
	c := tmoDial(t, addr, 10*time.Second)
	if _, err := c.Write(append(head, body...)); err != nil {
		t.Fatal(err)
	}
	r, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Fatalf("a normal delivery after the slow clients got %d", r.StatusCode)
	}
}

// TestTimeoutsIdleAndWrite uses its own config with idle 3s and write 1s
// (newEnv's 30s and 10s would make the test slow).
func TestTimeoutsIdleAndWrite(t *testing.T) {
	e := tmoEnv(t, "{ read_header: 2s, read: 5s, write: 1s, idle: 3s }")
	hg := start(t, e.cfgPath)
	j := natsClient(t, e.natsURL, natsToken)
	addr := tmoHost(t, hg.baseURL)

	t.Run("idle keep-alive connection is closed", func(t *testing.T) {
		c := tmoDial(t, addr, 10*time.Second)
		br := bufio.NewReader(c)
		get := func() {
			t.Helper()
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Close {
				t.Fatalf("GET /healthz = %d (close %v), want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
			}
		}
		get()
		// A second request well within idle reuses the connection, so the
		// close that follows is the idle timeout, not a refusal of keep-alive
		// (idle is long enough that a stalled test client does not miss it).
		time.Sleep(50 * time.Millisecond)
		get()
		idleFrom := time.Now()
		_, err := br.ReadByte()
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("idle connection still open at the test's deadline")
		}
		if err == nil {
			t.Fatal("server sent bytes on an idle connection")
		}
		tmoWithin(t, "idle connection closed", time.Since(idleFrom), 2*time.Second, 6*time.Second)
	})

	t.Run("body arriving after the write timeout gets 408", func(t *testing.T) {
		// The write deadline starts when the headers are read; the body
		// trickles in for ~2s, well inside read (5s), so no time is left
		// to store it and answer within write (1s). Before stop 38 the
		// event was stored and the answer lost (the connection closed);
		// now the sender reads a 408 and nothing is stored.
		head, body := tmoSignedRequest(t, "tmo_write", false)
		c := tmoDial(t, addr, 10*time.Second)
		start := time.Now()
		if _, err := c.Write(head); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		done := tmoTrickle(c, body, 2*time.Second/time.Duration(len(body)), stop)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		close(stop)
		<-done
		if err != nil {
			t.Fatalf("no answer after %s: %v; want 408", time.Since(start).Round(time.Millisecond), err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "http.timeouts.write") {
			t.Fatalf("got %d %s; want 408 naming http.timeouts.write", resp.StatusCode, b)
		}
		if keys := storedKeys(t, j); len(keys) != 0 {
			t.Fatalf("WEBHOOKS holds %v, want nothing: the 408 said not stored", keys)
		}
		// The sender's retry, sent at once, is stored.
		r := post(t, hg.baseURL+"/webhooks/grants", signGrants(t, "tmo_write", body), body)
		expect(t, r, 200, "status", "accepted")
		if keys := storedKeys(t, j); len(keys) != 1 {
			t.Fatalf("WEBHOOKS holds %v after the retry, want one event", keys)
		}
	})
}
