package jetstream

import (
	"bufio"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// The server's errors and warnings reach hookgate's log, a message at most
// once a minute; the file store's critical write error marks the store as
// failed.
func TestServerLogPassesErrorsAndNoticesAWriteError(t *testing.T) {
	var b strings.Builder
	e := &Embedded{}
	l := &serverLog{log: slog.New(slog.NewTextHandler(&b, nil)), e: e, last: map[string]time.Time{}}
	l.Noticef("Starting nats-server")
	l.Warnf("Filestore [WEBHOOKS] Stream state outdated, %s", "will rebuild")
	l.Warnf("Filestore [WEBHOOKS] Stream state outdated, %s", "will rebuild")
	// A client's line that merely quotes the words is not the store's.
	l.Errorf(`127.0.0.1:5000 - cid:7 - Client parser ERROR, state=0, i=0: proto='"Critical write error: x"'`)
	if err := e.WriteError(); err != nil {
		t.Fatalf("WriteError before any write error: %v", err)
	}
	l.Errorf("Filestore [WEBHOOKS] Critical write error: %v", "write /d/1.blk: no space left on device")
	if n := strings.Count(b.String(), "Stream state outdated"); n != 1 {
		t.Errorf("a repeated warning logged %d times, want once:\n%s", n, b.String())
	}
	if strings.Contains(b.String(), "Starting nats-server") {
		t.Errorf("a notice was logged:\n%s", b.String())
	}
	err := e.WriteError()
	if !errors.Is(err, ErrStoreWrite) || !strings.Contains(err.Error(), "no space left on device") || !strings.Contains(b.String(), "event store stopped writing") {
		t.Fatalf("after a critical write error: WriteError %v; log:\n%s", err, b.String())
	}
}

// syncLog is a log destination read while the server writes to it.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// startListening starts an embedded server on a loopback port with token
// "s3cret-token", logging to w; it returns the server and its address.
func startListening(t *testing.T, w *syncLog) (*Embedded, string) {
	t.Helper()
	e, err := StartEmbedded(EmbeddedOptions{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Token: "s3cret-token", MaxPayload: 4 << 20,
		Log: slog.New(slog.NewTextHandler(w, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	u, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	return e, u.Host
}

// rawClient sends lines to the server as a client would and returns the
// server's first answer after them (the server logs a client's error
// before it answers it).
func rawClient(t *testing.T, addr, lines string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadString('\n'); err != nil { // INFO
		t.Fatal(err)
	}
	if _, err := c.Write([]byte(lines)); err != nil {
		t.Fatal(err)
	}
	answer, _ := r.ReadString('\n')
	return answer
}

// What a client that is not logged in sends reaches the log at most as
// the server's quote of it (review D2): it never sets the store failure,
// nor do many such clients fill the log or serverLog's memory, nor does
// the token appear.
func TestServerLogAgainstStrangeClients(t *testing.T) {
	var w syncLog
	e, addr := startListening(t, &w)
	if a := rawClient(t, addr, "CCritical write error\r\n"); !strings.HasPrefix(a, "-ERR") {
		t.Fatalf("garbage answered %q, want -ERR", a)
	}
	for range 30 {
		if a := rawClient(t, addr, "CONNECT {\"auth_token\":\"wrong\",\"verbose\":false}\r\nPING\r\n"); !strings.HasPrefix(a, "-ERR") {
			t.Fatalf("a wrong token answered %q, want -ERR", a)
		}
	}
	// Holding the token, a CONNECT line over the server's limit is quoted
	// in its error.
	rawClient(t, addr, `CONNECT {"verbose":false,"auth_token":"s3cret-token","name":"`+strings.Repeat("x", 5000)+"\"}\r\nPING\r\n")
	logs := w.String()
	if err := e.WriteError(); err != nil {
		t.Fatalf("a client's garbage set the store failure: %v\n%s", err, logs)
	}
	if n := strings.Count(logs, "uthentication error"); n != 1 {
		t.Fatalf("30 wrong-token connections logged %d authentication errors within a minute, want 1:\n%s", n, logs)
	}
	if strings.Contains(logs, "s3cret-token") {
		t.Fatalf("the token reached the log:\n%s", logs)
	}
	if n := len(serverLogKeysOf(e)); n > 10 {
		t.Fatalf("serverLog remembers %d messages after 32 clients", n)
	}
}

// serverLogKeysOf is what e's server logger remembers having logged.
func serverLogKeysOf(e *Embedded) []string {
	l := e.serverLog
	l.mu.Lock()
	defer l.mu.Unlock()
	var keys []string
	for k := range l.last {
		keys = append(keys, k)
	}
	return keys
}
