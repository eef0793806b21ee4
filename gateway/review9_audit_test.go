package gateway_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/gateway"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// review9fStore accepts every publish, new each time.
type review9fStore struct {
	mu  sync.Mutex
	seq uint64
}

func (s *review9fStore) Publish(context.Context, jetstream.Message) (jetstream.PublishResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return jetstream.PublishResult{Seq: s.seq}, nil
}

// review9fAudit is a concurrency-safe recorder.
type review9fAudit struct {
	mu   sync.Mutex
	recs []event.AuditRecord
}

func (a *review9fAudit) Record(r event.AuditRecord) {
	a.mu.Lock()
	a.recs = append(a.recs, r)
	a.mu.Unlock()
}
func (a *review9fAudit) snapshot() []event.AuditRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]event.AuditRecord(nil), a.recs...)
}

func review9fServer(t *testing.T, extra string, now func() time.Time) (http.Handler, *review9fAudit, *prometheus.Registry) {
	t.Helper()
	cfg := mustConfig(t, `
providers:
  gh:
    signature: { scheme: github, secrets: ["s3cret"] }
`+extra)
	audit := &review9fAudit{}
	reg := prometheus.NewRegistry()
	deps := gateway.Deps{
		Publisher: &review9fStore{}, Audit: audit, Registry: reg, Gatherer: reg, Now: now,
		Ready: func(context.Context) error { return nil },
	}
	if now != nil {
		// A test clock: the limiter's end-of-second write must not run on
		// wall time (a stalled test would get a record it does not expect).
		deps.AfterFunc = func(time.Duration, func()) *time.Timer { return time.NewTimer(time.Hour) }
	}
	h, err := gateway.NewServer(slog.New(slog.NewTextHandler(io.Discard, nil)), cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	return h, audit, reg
}

func review9fPost(h http.Handler, body string, good bool) int {
	sig := "sha256=" + strings.Repeat("0", 64)
	if good {
		m := hmac.New(sha256.New, []byte("s3cret"))
		m.Write([]byte(body))
		sig = "sha256=" + hex.EncodeToString(m.Sum(nil))
	}
	r := httptest.NewRequest(http.MethodPost, "/webhooks/gh", bytes.NewReader([]byte(body)))
	r.Header.Set("X-Hub-Signature-256", sig)
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

// A burst of forged requests that then stops: the contract says the
// rejections beyond the few records a second are "counted in
// suppressed". Here the count only rides on a later rejection, so when
// the flood ends nothing ever records it: AUDIT undercounts the attack.
func TestReview9SuppressedCountLostWhenFloodStops(t *testing.T) {
	h, audit, _ := review9fServer(t, "", nil)
	const n = 50
	for i := range n {
		if c := review9fPost(h, fmt.Sprintf(`{"id":"x%d"}`, i), false); c != http.StatusUnauthorized {
			t.Fatalf("forged request: %d", c)
		}
	}
	// The flood is over: the limiter's late write, at the end of its
	// one-second window, must account for the rest.
	if total, recs := review9fAccounted(audit, n); total != n {
		t.Fatalf("AUDIT accounts for %d of %d rejected requests (%d records); %d rejections are in no record's suppressed count",
			total, n, recs, n-total)
	}
}

// review9fAccounted waits (10 s at most) until the rejection records
// account for want requests (each 1 + its suppressed), and returns what
// they account for and how many there are.
func review9fAccounted(audit *review9fAudit, want int) (total, recs int) {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		total, recs = 0, 0
		for _, r := range audit.snapshot() {
			if r.Decision == event.DecisionRejected {
				total += 1 + r.Suppressed
				recs++
			}
		}
		if total >= want || time.Now().After(deadline) {
			return total, recs
		}
	}
}

// Rate-limited (429) requests share the rejection audit limit, but those
// folded away are not counted in hookgate_gateway_audit_suppressed_total,
// unlike folded 401/400/413s.
func TestReview9RateLimitedSuppressionNotCounted(t *testing.T) {
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	h, audit, reg := review9fServer(t, "    rate_limit: { per_second: 1, burst: 1 }\n", func() time.Time { return now })
	var codes []int
	for i := range 10 {
		codes = append(codes, review9fPost(h, fmt.Sprintf(`{"id":"e%d"}`, i), true))
	}
	limited := 0
	for _, c := range codes {
		if c == http.StatusTooManyRequests {
			limited++
		}
	}
	audited := 0
	for _, r := range audit.snapshot() {
		if r.Status == http.StatusTooManyRequests {
			audited++
		}
	}
	folded := limited - audited
	if folded <= 0 {
		t.Fatalf("setup: %d limited, %d audited (codes %v)", limited, audited, codes)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "hookgate_gateway_audit_suppressed_total" {
			for _, m := range mf.GetMetric() {
				got += m.GetCounter().GetValue()
			}
		}
	}
	if int(got) != folded {
		t.Fatalf("hookgate_gateway_audit_suppressed_total = %v, want %d (429s folded away: %d limited, %d audited)", got, folded, limited, audited)
	}
}

// A 400 found after the key was derived (an extracted value over 1 KiB):
// the record carries the key but not its account, so AUDIT's account
// field (and anything filtering on it) misses the rejection.
func TestReview9RejectAfterKeyRecordsAccount(t *testing.T) {
	h, audit, _ := review9fServer(t, "    event_id: [\"json:/id\"]\n    subject: \"json:/grant_id\"\n", nil)
	body := `{"id":"e1","grant_id":"` + strings.Repeat("g", 1025) + `"}`
	if c := review9fPost(h, body, true); c != http.StatusBadRequest {
		t.Fatalf("status %d, want 400", c)
	}
	recs := audit.snapshot()
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	r := recs[0]
	if r.Key != "gh:default:evt:e1" || r.Account != "default" {
		t.Fatalf("rejection record key %q account %q, want key gh:default:evt:e1 with account default", r.Key, r.Account)
	}
}
