package gateway_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/gateway"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

type storeAway struct{}

func (storeAway) Publish(context.Context, jetstream.Message) (jetstream.PublishResult, error) {
	return jetstream.PublishResult{}, fmt.Errorf("%w: no responders", jetstream.ErrUnavailable)
}

type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A store away for a while under a steady rate: every request is answered
// 503, but the log gets at most 5 "webhook not stored" lines per provider
// per second, the next one saying how many it stands for.
func TestStoreErrorsAreLoggedAFewPerSecond(t *testing.T) {
	cfg := mustConfig(t, `
providers:
  gh:
    signature: { scheme: github, secrets: ["s3cret"] }
`)
	var mu sync.Mutex
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	var logs lockedLog
	reg := prometheus.NewRegistry()
	h, err := gateway.NewServer(slog.New(slog.NewJSONHandler(&logs, nil)), cfg, gateway.Deps{
		Publisher: storeAway{}, Audit: &auditRecorder{}, Registry: reg, Gatherer: reg, Now: clock,
		// The test's clock: the limiter's end-of-second line must not come
		// on wall time (a stall past a second would add one).
		AfterFunc: func(time.Duration, func()) *time.Timer { return time.NewTimer(time.Hour) },
	})
	if err != nil {
		t.Fatal(err)
	}
	send := func(i int) int {
		body := fmt.Appendf(nil, `{"id":"e%d"}`, i)
		m := hmac.New(sha256.New, []byte("s3cret"))
		m.Write(body)
		r := httptest.NewRequest(http.MethodPost, "/webhooks/gh", bytes.NewReader(body))
		r.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for i := range 20 {
		if code := send(i); code != http.StatusServiceUnavailable {
			t.Fatalf("request %d: %d, want 503", i, code)
		}
	}
	if n := strings.Count(logs.String(), `"msg":"webhook not stored"`); n != 5 {
		t.Fatalf("%d log lines for 20 unstored requests in one second, want 5:\n%s", n, logs.String())
	}
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	if code := send(20); code != http.StatusServiceUnavailable {
		t.Fatalf("request 20: %d, want 503", code)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, `"msg":"webhook not stored"`) || !strings.Contains(last, `"suppressed":15`) {
		t.Fatalf("the next second's line: %s, want it to stand for the 15 left out", last)
	}
}
