package gateway_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/gateway"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
)

// A redelivery of a stored event is answered 200 duplicate while its
// provider is over its rate_limit (the contract's answer for a key seen
// before; a 429 kept the sender retrying it), and takes nothing from the
// budget: the key index in front of a real JetStream tells it without a
// write (an edge audit, stop 38).
func TestRateLimitLetsRedeliveriesThrough(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC).UnixNano())
	sc := jstest.Streams()
	sc.KeyIndex = true
	env := jstest.StartWith(t, "", sc)
	k, err := jetstream.OpenKeyIndex(t.Context(), env.Conn, jetstream.KeyIndexOptions{
		Path: filepath.Join(env.Dir, "keys.idx"), Horizon: time.Hour, Window: sc.DedupWindow,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	srv, _, _ := newGateway(t, "    rate_limit: { per_second: 1, burst: 1 }\n", func(d *gateway.Deps) {
		d.Now = func() time.Time { return time.Unix(0, clock.Load()) }
		d.Publisher = k.Publisher(jetstream.NewPublisher(env.Conn, 5*time.Second))
	})
	post := func(id string) (int, string) {
		body := `{"id":"` + id + `","grant_id":"G","at":"2026-11-30T10:00:00Z"}`
		r := do(t, srv, signed(t, body), body)
		return r.StatusCode, r.Header.Get("Retry-After")
	}
	if code, _ := post("e1"); code != http.StatusOK {
		t.Fatalf("first event: %d, want 200", code)
	}
	if code, _ := post("e2"); code != http.StatusTooManyRequests {
		t.Fatalf("second new event in the same second: %d, want 429 (burst 1)", code)
	}
	// Over the rate still: the stored one's redeliveries are duplicates.
	for range 3 {
		if code, _ := post("e1"); code != http.StatusOK {
			t.Fatalf("redelivery of a stored event over the rate: %d, want 200 duplicate", code)
		}
	}
	// They took nothing from the budget: a second later exactly one new
	// event goes through again.
	clock.Add(int64(time.Second))
	if code, _ := post("e2"); code != http.StatusOK {
		t.Fatalf("new event a second later: %d, want 200", code)
	}
	if code, ra := post("e3"); code != http.StatusTooManyRequests || strings.TrimSpace(ra) != "1" {
		t.Fatalf("the next new event: %d (Retry-After %q), want 429 with Retry-After 1", code, ra)
	}
}
