package gateway_test

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/gateway"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// untilDeadline is a store that never acknowledges: it fails at the
// publish's deadline, as a publish not acknowledged in time does.
type untilDeadline struct{}

func (untilDeadline) Publish(ctx context.Context, m jetstream.Message) (jetstream.PublishResult, error) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(m.Deadline)):
	}
	return jetstream.PublishResult{}, fmt.Errorf("%w: not acknowledged in time", jetstream.ErrUnavailable)
}

// counting is a Publisher that counts its calls and answers as under.
type counting struct {
	calls atomic.Int64
	under gateway.Publisher
}

func (c *counting) Publish(ctx context.Context, m jetstream.Message) (jetstream.PublishResult, error) {
	c.calls.Add(1)
	return c.under.Publish(ctx, m)
}

// slowSend serves a gh provider with the timeouts given (as serve sets
// them) in front of pub, sends a signed body whose last bytes come after
// pause, and returns the answer (nil with the error when none came).
func slowSend(t *testing.T, timeouts string, pub gateway.Publisher, pause time.Duration) (*http.Response, error) {
	t.Helper()
	cfg := mustConfig(t, `
http:
  timeouts: `+timeouts+`
providers:
  gh:
    signature: { scheme: github, secrets: ["It's a Secret to Everybody"] }
`)
	reg := prometheus.NewRegistry()
	h, err := gateway.NewServer(slog.New(slog.NewTextHandler(io.Discard, nil)), cfg, gateway.Deps{
		Publisher: pub, Audit: &auditRecorder{}, Registry: reg, Gatherer: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	// As serve sets them.
	srv.Config.ReadHeaderTimeout = cfg.HTTP.Timeouts.ReadHeader
	srv.Config.ReadTimeout = cfg.HTTP.Timeouts.Read
	srv.Config.WriteTimeout = cfg.HTTP.Timeouts.Write
	srv.Config.IdleTimeout = cfg.HTTP.Timeouts.Idle
	srv.Start()
	t.Cleanup(srv.Close)

	body := []byte(`{"a":1}`)
	m := hmac.New(sha256.New, []byte("It's a Secret to Everybody"))
	m.Write(body)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /webhooks/gh HTTP/1.1\r\nHost: x\r\nX-Hub-Signature-256: sha256=%x\r\nContent-Length: %d\r\n\r\n", m.Sum(nil), len(body))
	_, _ = conn.Write(body[:3])
	// The fault: a slow sender, within timeouts.read.
	time.Sleep(pause)
	_, _ = conn.Write(body[3:])
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err == nil {
		t.Cleanup(func() { resp.Body.Close() })
	}
	return resp, err
}

// A slow store is answered 503 + Retry-After even when the body took a
// while to arrive: http.Server's write timeout runs from the end of the
// headers, so the publish must end before it, not a fixed time after it
// started (the sender got no answer at all when the body took over a
// second with a 3 s write timeout). Found by review.
func TestSlowBodyThenSlowStoreStillAnswers503(t *testing.T) {
	// The body uses up half the write timeout before the publish starts.
	resp, err := slowSend(t, "{ read_header: 2s, read: 10s, write: 3s, idle: 10s }", untilDeadline{}, 1500*time.Millisecond)
	if err != nil {
		t.Fatalf("no answer (want 503 + Retry-After): %v", err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("got %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// A body that arrives (within timeouts.read) too late to leave time for a
// publish before the write timeout is the sender's slowness: 408 saying
// so, and nothing tried. It was a 503 "event store unavailable" with an
// ERROR line and the unavailable metric (the store was well), and with
// write < read the answer came after the write deadline: none at all
// (an edge audit, stop 38).
func TestBodyTooLateToStoreIs408(t *testing.T) {
	pub := &counting{under: untilDeadline{}}
	resp, err := slowSend(t, "{ read_header: 2s, read: 10s, write: 2s, idle: 10s }", pub, 1800*time.Millisecond)
	if err != nil {
		t.Fatalf("no answer (want 408): %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "leaving no time to store it within http.timeouts.write") {
		t.Fatalf("got %d %s; want 408 saying the request took too long to store", resp.StatusCode, b)
	}
	if n := pub.calls.Load(); n != 0 {
		t.Fatalf("%d publishes tried; want none", n)
	}
}

// With the least write timeout (1 s: the publish then ends half of it
// before the deadline; before stop 38 it got a second of its own, past
// the deadline), a store that does not answer is still a 503 the sender
// reads, not a closed connection.
func TestShortWriteTimeoutStillAnswers503(t *testing.T) {
	resp, err := slowSend(t, "{ read_header: 2s, read: 10s, write: 1s, idle: 10s }", untilDeadline{}, 0)
	if err != nil {
		t.Fatalf("no answer (want 503 + Retry-After): %v", err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("got %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}
