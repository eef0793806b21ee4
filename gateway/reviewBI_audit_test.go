package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/gateway"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// slowStore takes its time on the test clock, as a store riding out a
// failover does.
type slowStore struct {
	mu  *sync.Mutex
	now *time.Time
}

func (s slowStore) Publish(context.Context, jetstream.Message) (jetstream.PublishResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*s.now = s.now.Add(6 * time.Second)
	return jetstream.PublishResult{Seq: 1}, nil
}

// The accepted record is stamped when the store answered, not when the
// request came: stamped at the start, a write that waited out a failover
// read in `trace` as accepted 6.6 s before WEBHOOKS stored it (review BI).
func TestAcceptedRecordIsStampedWhenStored(t *testing.T) {
	var mu sync.Mutex
	start := time.Date(2026, 12, 4, 23, 8, 11, 0, time.UTC)
	now := start
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	cfg := mustConfig(t, `
providers:
  gh:
    signature: { scheme: github, secrets: ["s3cret"] }
`)
	audit := &review9fAudit{}
	reg := prometheus.NewRegistry()
	h, err := gateway.NewServer(slog.New(slog.NewTextHandler(io.Discard, nil)), cfg, gateway.Deps{
		Publisher: slowStore{mu: &mu, now: &now}, Audit: audit, Registry: reg, Gatherer: reg, Now: clock,
		Ready:     func(context.Context) error { return nil },
		AfterFunc: func(time.Duration, func()) *time.Timer { return time.NewTimer(time.Hour) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := review9fPost(h, `{"id":"a1"}`, true); c != http.StatusOK {
		t.Fatalf("post: %d", c)
	}
	recs := audit.snapshot()
	if len(recs) != 1 || recs[0].Decision != "accepted" || !recs[0].Time.Equal(start.Add(6*time.Second)) {
		t.Fatalf("records %+v: want one accepted, stamped %s (when the store answered)", recs, start.Add(6*time.Second))
	}
}
