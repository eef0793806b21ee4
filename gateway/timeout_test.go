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

// A slow store is answered 503 + Retry-After even when the body took a
// while to arrive: http.Server's write timeout runs from the end of the
// headers, so the publish must end before it, not a fixed time after it
// started (the sender got no answer at all when the body took over a
// second with a 3 s write timeout). Found by review.
func TestSlowBodyThenSlowStoreStillAnswers503(t *testing.T) {
	cfg := mustConfig(t, `
http:
  timeouts: { read_header: 2s, read: 10s, write: 3s, idle: 10s }
providers:
  gh:
    signature: { scheme: github, secrets: ["It's a Secret to Everybody"] }
`)
	reg := prometheus.NewRegistry()
	h, err := gateway.NewServer(slog.New(slog.NewTextHandler(io.Discard, nil)), cfg, gateway.Deps{
		Publisher: untilDeadline{}, Audit: &auditRecorder{}, Registry: reg, Gatherer: reg,
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
	defer srv.Close()

	body := []byte(`{"a":1}`)
	m := hmac.New(sha256.New, []byte("It's a Secret to Everybody"))
	m.Write(body)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /webhooks/gh HTTP/1.1\r\nHost: x\r\nX-Hub-Signature-256: sha256=%x\r\nContent-Length: %d\r\n\r\n", m.Sum(nil), len(body))
	_, _ = conn.Write(body[:3])
	// The fault: a slow sender, well within timeouts.read, that uses up
	// half the write timeout before the publish starts.
	time.Sleep(1500 * time.Millisecond)
	_, _ = conn.Write(body[3:])
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer (want 503 + Retry-After): %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("got %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}
