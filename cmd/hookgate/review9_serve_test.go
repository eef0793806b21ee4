package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/testpki"
	"github.com/hookgate/hookgate/jetstream"
)

// review9gConfig writes an embedded, gateway-only config with the given
// http block (a YAML flow mapping's inside).
func review9gConfig(t *testing.T, dataDir, natsListen, httpBlock string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf("http: { %s }\nroles: { consumer: false }\nnats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n%s",
		httpBlock, dataDir, natsListen, review6Provider)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func review9gFreeAddr(t *testing.T) string {
	t.Helper()
	return freeAddr(t)
}

// A tls.cert that exists but is no certificate (a key pasted into the
// wrong file, a truncated copy) passes `config check` and serve's start;
// serve then fails with net/http's bare "tls: ..." error, which names
// neither the key nor the file. Expected: serve refuses before listening,
// with a message naming http.tls.cert (or .key).
func TestReview9TLSBadCertNamesKey(t *testing.T) {
	dir := t.TempDir()
	cert := filepath.Join(dir, "cert.pem")
	key := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := review9gConfig(t, t.TempDir(), "", fmt.Sprintf("listen: %q, tls: { cert: %q, key: %q }", "127.0.0.1:0", cert, key))

	var out strings.Builder
	if err := run(context.Background(), []string{"config", "check", cfg}, func(string) string { return "" }, nil, &out, io.Discard); err == nil {
		t.Logf("config check accepted the config: %q", out.String())
	}

	s := review7Start(t, cfg, false)
	var err error
	select {
	case err = <-s.done:
		s.done <- err
	case <-time.After(30 * time.Second):
		t.Fatalf("serve with a garbage tls.cert still running after 30 s")
	}
	if err == nil || !strings.Contains(err.Error(), "http.tls") {
		t.Errorf("serve with a garbage tls.cert: error %v; want one naming http.tls.cert/key", err)
	}
	if strings.Contains(s.stdout.String(), "listening on") {
		t.Errorf("serve printed %q (which means ready) before failing on its certificate", strings.TrimSpace(s.stdout.String()))
	}
}

// With admin_listen set the webhook port serves no admin endpoint and the
// admin port no webhook.
func TestReview9AdminSeparate(t *testing.T) {
	admin := review9gFreeAddr(t)
	cfg := review9gConfig(t, t.TempDir(), "", fmt.Sprintf("listen: %q, admin_listen: %q", "127.0.0.1:0", admin))
	s := review7Start(t, cfg, true)
	c := &http.Client{Timeout: 10 * time.Second}
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "//healthz", "/healthz/", "/%68ealthz"} {
		resp, err := c.Get(s.base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("GET %s on the webhook port = %d, want 404", p, resp.StatusCode)
		}
		req, _ := http.NewRequest(http.MethodHead, s.base+p, nil)
		if resp, err = c.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode != 404 {
				t.Errorf("HEAD %s on the webhook port = %d, want 404", p, resp.StatusCode)
			}
		}
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := c.Get("http://" + admin + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s on the admin port = %d, want 200", p, resp.StatusCode)
		}
	}
	if code, _, err := review7Send(c, "http://"+admin, "adm-1"); err != nil || code == 200 {
		t.Errorf("a webhook posted to the admin port: %d %v, want not 200", code, err)
	}
	review7MustSend(t, s.base, "adm-2", "accepted")
}

// Expect: 100-continue with a Content-Length over max_body_bytes: 413 at
// once, without 100 Continue, and the connection closed.
func TestReview9ExpectContinueOversize(t *testing.T) {
	cfg := review9gConfig(t, t.TempDir(), "", `listen: "127.0.0.1:0", max_body_bytes: 1000`)
	s := review7Start(t, cfg, true)
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(s.base, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "POST /webhooks/p HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\nExpect: 100-continue\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Fatalf("got %d, want 413 before the body", resp.StatusCode)
	}
}

// A second serve on one data_dir refuses, naming the holder.
func TestReview9SecondServeRefused(t *testing.T) {
	data := t.TempDir()
	a := review7Start(t, review9gConfig(t, data, "", `listen: "127.0.0.1:0"`), true)
	b := review7Start(t, review9gConfig(t, data, "", `listen: "127.0.0.1:0"`), false)
	select {
	case err := <-b.done:
		b.done <- err
		if err == nil || !strings.Contains(err.Error(), fmt.Sprint("held by process ", os.Getpid())) || !strings.Contains(err.Error(), "give this serve its own nats.embedded.data_dir") || strings.Contains(err.Error(), "CLI") {
			t.Fatalf("second serve: %v; want the data_dir lock naming pid %d and what a serve can do about it", err, os.Getpid())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("second serve on one data_dir still running after 20 s")
	}
	review7MustSend(t, a.base, "lock-1", "accepted")
}

// A port in use is named in the error, and the data_dir is let go.
func TestReview9PortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, block := range []string{
		fmt.Sprintf("listen: %q", ln.Addr().String()),
		fmt.Sprintf("listen: %q, admin_listen: %q", "127.0.0.1:0", ln.Addr().String()),
	} {
		data := t.TempDir()
		s := review7Start(t, review9gConfig(t, data, "", block), false)
		select {
		case err := <-s.done:
			s.done <- err
			if err == nil || !strings.Contains(err.Error(), ln.Addr().String()) {
				t.Errorf("%s: %v; want the address named", block, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: still running", block)
		}
		// The lock was released.
		review7Start(t, review9gConfig(t, data, "", `listen: "127.0.0.1:0"`), true)
	}
}

// External NATS going away and coming back: /readyz 503 while it is away
// (webhooks 503 + Retry-After), 200 again once it is back; /healthz 200
// throughout.
func TestReview9ReadyzFollowsExternalNATS(t *testing.T) {
	natsAddr, dataDir := review9gFreeAddr(t), t.TempDir()
	startNATS := func() *jetstream.Embedded {
		e, err := jetstream.StartEmbedded(jetstream.EmbeddedOptions{DataDir: dataDir, Listen: natsAddr, Token: "tok", MaxPayload: 4 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := startNATS()
	defer func() { e.Shutdown() }()
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nroles: { consumer: false }\nnats: { url: \"nats://tok@%s\" }\n%s", natsAddr, review6Provider)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	s := review7Start(t, path, true)
	c := &http.Client{Timeout: 5 * time.Second}
	get := func(p string) (int, http.Header) {
		resp, err := c.Get(s.base + p)
		if err != nil {
			return 0, nil
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	waitStatus := func(p string, want int, within time.Duration) {
		t.Helper()
		var got int
		for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if got, _ = get(p); got == want {
				return
			}
		}
		t.Fatalf("GET %s = %d after %s, want %d\n%s", p, got, within, want, tail(s.stderr.String(), 1500))
	}
	waitStatus("/readyz", 200, 10*time.Second)
	review7MustSend(t, s.base, "ext-1", "accepted")

	e.Shutdown()
	waitStatus("/readyz", 503, 10*time.Second)
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz = %d with NATS away", code)
	}
	code, st, err := review7Send(c, s.base, "ext-2")
	if err != nil || code != 503 {
		t.Errorf("webhook with NATS away: %d %q %v, want 503", code, st, err)
	}

	e = startNATS()
	waitStatus("/readyz", 200, 20*time.Second)
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		code, st, err := review7Send(c, s.base, "ext-2")
		if err == nil && code == 200 && st == "accepted" {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("webhook after NATS came back: %d %q %v", code, st, err)
		}
	}
}

// review9gServerCert writes a server certificate for 127.0.0.1 and its
// key (signed by a throwaway CA the clients here do not check).
func review9gServerCert(t *testing.T) (certPath, keyPath string) {
	t.Helper()
	pki := testpki.Write(t, t.TempDir(), "")
	return pki.ServerCert, pki.ServerKey
}

// With http.tls set, a client that speaks HTTP/2 (ALPN h2), sends the
// connection preface and then nothing is held open past read_header (and
// read): net/http's HTTP/2 server does not apply ReadHeaderTimeout, only
// IdleTimeout. The same silent client over HTTP/1.1 is cut at read_header.
func TestReview9H2SilentClientHeldPastReadHeader(t *testing.T) {
	cert, key := review9gServerCert(t)
	cfg := review9gConfig(t, t.TempDir(), "", fmt.Sprintf(`listen: "127.0.0.1:0", tls: { cert: %q, key: %q }, timeouts: { read_header: 1s, read: 2s, write: 5s, idle: 60s }`, cert, key))
	s := review7Start(t, cfg, false)
	re := regexp.MustCompile(`listening on https://([0-9.:]+)`)
	var addr string
	for end := time.Now().Add(25 * time.Second); addr == ""; time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(s.stdout.String()); m != nil {
			addr = m[1]
		} else if time.Now().After(end) {
			t.Fatalf("not listening\n%s", tail(s.stderr.String(), 1500))
		}
	}
	// HTTP/2 is not served: a client offering it gets HTTP/1.1, whose
	// read_header applies; one offering only h2 is refused at the
	// handshake.
	if c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}); err == nil {
		c.Close()
		t.Errorf("a client offering only h2 was served (%q)", c.ConnectionState().NegotiatedProtocol)
	}
	for _, offer := range [][]string{{"http/1.1"}, {"h2", "http/1.1"}} {
		t.Run(strings.Join(offer, ","), func(t *testing.T) {
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: offer})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if got := c.ConnectionState().NegotiatedProtocol; got == "h2" {
				t.Fatalf("negotiated h2, whose server ignores read_header")
			}
			start := time.Now()
			_ = c.SetReadDeadline(start.Add(10 * time.Second))
			_, err = io.Copy(io.Discard, c) // EOF when the server hangs up
			held := time.Since(start)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("a client that sent nothing was still connected after %s (read_header 1s, read 2s)", held.Round(time.Millisecond))
			}
			t.Logf("cut after %s (%v)", held.Round(time.Millisecond), err)
		})
	}
}

// Raw HTTP/1 edge cases against the webhook port.
func TestReview9RawHTTPEdges(t *testing.T) {
	cfg := review9gConfig(t, t.TempDir(), "", `listen: "127.0.0.1:0", max_body_bytes: 1000`)
	s := review7Start(t, cfg, true)
	addr := strings.TrimPrefix(s.base, "http://")
	exchange := func(t *testing.T, raw string, n int) []int {
		t.Helper()
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		go func() { _, _ = io.WriteString(c, raw) }()
		br := bufio.NewReader(c)
		var codes []int
		for range n {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("after %v: %v", codes, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes = append(codes, resp.StatusCode)
		}
		return codes
	}
	t.Run("pipelined", func(t *testing.T) {
		r := "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nPOST /webhooks/p HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n"
		if got := exchange(t, r, 3); fmt.Sprint(got) != "[200 401 200]" {
			t.Errorf("pipelined answers %v, want [200 401 200]", got)
		}
	})
	t.Run("http/1.0", func(t *testing.T) {
		if got := exchange(t, "POST /webhooks/p HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}", 1); got[0] != 401 {
			t.Errorf("HTTP/1.0 unsigned POST = %d, want 401", got[0])
		}
	})
	t.Run("long header", func(t *testing.T) {
		r := "POST /webhooks/p HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 80<<10) + "\r\nContent-Length: 2\r\n\r\n{}"
		if got := exchange(t, r, 1); got[0] != 431 {
			t.Errorf("80 KiB header = %d, want 431", got[0])
		}
	})
	t.Run("long uri", func(t *testing.T) {
		r := "POST /webhooks/p?" + strings.Repeat("a", 80<<10) + " HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
		if got := exchange(t, r, 1); got[0] != 431 && got[0] != 414 {
			t.Errorf("80 KiB URI = %d, want 414 or 431", got[0])
		}
	})
}

// A command that finds data_dir held while nothing answers on
// nats.embedded.listen (a serve still recovering its store) says so and
// what to do, and leaves the holder alone.
func TestCLILockedDataDirWithListenNothingAnswering(t *testing.T) {
	data, listen := t.TempDir(), freeAddr(t)
	cfgPath := review9gConfig(t, data, listen, `listen: "127.0.0.1:0"`)
	lock, err := jetstream.LockDataDir(data)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	var out, errb bytes.Buffer
	err = run(t.Context(), []string{"status", "--config", cfgPath}, func(string) string { return "" }, nil, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprint("held by process ", os.Getpid())) || !strings.Contains(err.Error(), "nothing answers on nats.embedded.listen "+listen) {
		t.Fatalf("status against a held data_dir with nothing on listen: %v", err)
	}
}
