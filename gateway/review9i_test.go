package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/gateway"
	"github.com/prometheus/client_golang/prometheus"
)

// review9iAudit blocks the late record (Suppressed > 0) until released.
type review9iAudit struct {
	mu      sync.Mutex
	recs    []event.AuditRecord
	block   chan struct{}
	entered chan struct{}
}

func (a *review9iAudit) Record(r event.AuditRecord) {
	if r.Suppressed > 0 && a.block != nil {
		a.entered <- struct{}{}
		<-a.block
	}
	a.mu.Lock()
	a.recs = append(a.recs, r)
	a.mu.Unlock()
}

func (a *review9iAudit) total() (n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.recs {
		n += 1 + r.Suppressed
	}
	return n
}

func review9iServer(t *testing.T, audit *review9iAudit) (*gateway.Handler, func() []func()) {
	t.Helper()
	cfg := mustConfig(t, "\nproviders:\n  gh:\n    signature: { scheme: github, secrets: [\"s3cret\"] }\n")
	var mu sync.Mutex
	var fs []func()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	h, err := gateway.NewServer(slog.New(slog.NewTextHandler(io.Discard, nil)), cfg, gateway.Deps{
		Publisher: &review9fStore{}, Audit: audit, Registry: reg, Gatherer: reg,
		Now:   func() time.Time { return now },
		Ready: func(context.Context) error { return nil },
		AfterFunc: func(_ time.Duration, f func()) *time.Timer {
			mu.Lock()
			fs = append(fs, f)
			mu.Unlock()
			return time.NewTimer(time.Hour)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h, func() []func() { mu.Lock(); defer mu.Unlock(); return append([]func(){}, fs...) }
}

// The end-of-second timer fires just as serve stops: writeLate has taken
// the held record (and zeroed the window) and is writing it when
// FlushHeld runs. flush finds nothing and returns at once, serve's
// deferred stop of the AUDIT writer runs next, and the record (with its
// count) lands after the stop: the loss FlushHeld exists to prevent.
func TestReview9IFlushHeldDoesNotWaitForFiringTimer(t *testing.T) {
	audit := &review9iAudit{block: make(chan struct{}), entered: make(chan struct{}, 1)}
	h, timers := review9iServer(t, audit)
	for i := range 10 {
		if c := review9fPost(h, fmt.Sprintf(`{"id":"x%d"}`, i), false); c != http.StatusUnauthorized {
			t.Fatalf("forged: %d", c)
		}
	}
	fs := timers()
	if len(fs) != 1 {
		t.Fatalf("%d timers armed, want 1", len(fs))
	}
	go fs[0]() // the timer fires
	<-audit.entered
	done := make(chan struct{})
	go func() { h.FlushHeld(); close(done) }()
	select {
	case <-done:
		got := audit.total()
		close(audit.block)
		t.Fatalf("FlushHeld returned with %d of 10 rejections in AUDIT; the held record (suppressed 4) is still being written by the timer and would follow the writer's stop", got)
	case <-time.After(300 * time.Millisecond):
		close(audit.block) // FlushHeld waits for the write in progress: right
		<-done
	}
}

// serve flushes even when Shutdown timed out (requests still running).
// A rejection answered after the flush is held again (the window still
// has its 5 records) behind a new end-of-second timer, which fires after
// the AUDIT writer stopped: that record is lost, FlushHeld does not
// cover it, and nothing writes it synchronously.
func TestReview9IRejectionAfterFlushIsHeldPastStop(t *testing.T) {
	audit := &review9iAudit{}
	h, timers := review9iServer(t, audit)
	for i := range 6 {
		review9fPost(h, fmt.Sprintf(`{"id":"x%d"}`, i), false)
	}
	h.FlushHeld()
	if got := audit.total(); got != 6 {
		t.Fatalf("after FlushHeld %d of 6 rejections in AUDIT", got)
	}
	review9fPost(h, `{"id":"late"}`, false) // a request Shutdown did not wait for
	if got := audit.total(); got != 7 {
		t.Fatalf("rejection after FlushHeld: %d of 7 in AUDIT; held behind a new timer (%d armed) that fires after the writer's stop", got, len(timers()))
	}
}
