package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hookgate/hookgate/gateway"
	"github.com/hookgate/hookgate/jetstream"
)

// refusingStore refuses every message as too large for the store, as a
// cluster whose limit is below the body's does.
type refusingStore struct{}

func (refusingStore) Publish(context.Context, jetstream.Message) (jetstream.PublishResult, error) {
	return jetstream.PublishResult{}, fmt.Errorf("%w: message too large (nats: API error: code=400 err_code=10077)", jetstream.ErrTooLarge)
}

// A store refusing an event as too large is a rejection (413, counted
// rejected), not an outage: it was counted "unavailable" with status 413
// and logged at error as "webhook not stored" (a metrics audit, stop 38).
func TestStoreRefusingTooLargeIsARejection(t *testing.T) {
	srv, _, audit := newGateway(t, "", func(d *gateway.Deps) { d.Publisher = refusingStore{} })
	body := `{"id":"big","grant_id":"G","at":"2026-11-30T10:00:00Z"}`
	r := do(t, srv, signed(t, body), body)
	if r.StatusCode != http.StatusRequestEntityTooLarge || r.Header.Get("Retry-After") != "" {
		t.Fatalf("got %d (Retry-After %q), want 413 without Retry-After", r.StatusCode, r.Header.Get("Retry-After"))
	}
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(m), `hookgate_gateway_requests_total{decision="rejected",provider="p",status="413"} 1`) ||
		strings.Contains(string(m), `hookgate_gateway_requests_total{decision="unavailable",provider="p",status="413"}`) {
		t.Errorf("metrics: want the request counted rejected/413, not unavailable:\n%s", grepLines(string(m), "hookgate_gateway_requests_total"))
	}
	found := false
	for _, rec := range audit.recs {
		found = found || rec.Decision == "rejected" && rec.Status == http.StatusRequestEntityTooLarge && strings.Contains(rec.Reason, "too large for the event store")
	}
	if !found {
		t.Errorf("no AUDIT rejected/413 record: %+v", audit.recs)
	}
}
