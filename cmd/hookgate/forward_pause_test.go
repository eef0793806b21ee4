package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// A forward receiver that answers 429 with Retry-After is left alone for
// that long: the provider's other events wait, untried and uncounted,
// instead of each being sent (a request the receiver asked not to get,
// and an attempt counted towards max_deliver). Before, only the event
// that got the 429 waited; every other one was sent, refused, and
// counted, and under a longer limit burnt its attempts into DLQ.
func TestForwardReceiverRetryAfterPausesTheProvider(t *testing.T) {
	var (
		mu             sync.Mutex
		refusedAt      time.Time
		early, served  int
		firstSentAgain bool
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if refusedAt.IsZero() {
			refusedAt = now
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		if now.Sub(refusedAt) < time.Second {
			early++ // asked for 2 s of quiet, got a request within 1
		}
		if strings.HasSuffix(r.Header.Get("Idempotency-Key"), ":e-1") {
			firstSentAgain = true
		}
		served++
	}))
	t.Cleanup(recv.Close)
	cfgPath := aoConfig(t, t.TempDir(), "", recv.URL, "consumer: { workers: 1, max_deliver: 2, backoff: [100ms, 5s] }\n")
	s := aoStart(t, cfgPath)
	state := func() (bool, int, int, bool) {
		mu.Lock()
		defer mu.Unlock()
		return !refusedAt.IsZero(), early, served, firstSentAgain
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(30 * time.Second); !cond(); {
			if time.Now().After(end) {
				r, e, n, a := state()
				t.Fatalf("%s: not within 30 s (refused %v, early %d, served %d, e-1 again %v)", what, r, e, n, a)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	post := func(i int) {
		t.Helper()
		if code := aoPost(t, s.base, aoSecret, fmt.Sprintf(`{"id":"e-%d","grant_id":"G-%d","at":"2026-12-01T10:00:00Z","type":"t"}`, i, i)); code != 200 {
			t.Fatalf("post e-%d: %d", i, code)
		}
	}
	post(1)
	waitFor("the receiver's 429", func() bool { r, _, _, _ := state(); return r })
	for i := 2; i <= 4; i++ {
		post(i)
	}
	waitFor("every event forwarded", func() bool { _, _, n, again := state(); return n == 4 && again })
	if _, early, _, _ := state(); early > 0 {
		t.Errorf("%d requests reached the receiver within 1 s of its 429 with Retry-After: 2", early)
	}
	if n := strings.Count(s.stderr.String(), "forward receiver asked to be left alone"); n != 1 {
		t.Errorf("the pause was logged %d times, want once:\n%s", n, tail(s.stderr.String(), 3000))
	}
	if strings.Contains(s.stderr.String(), `"decision":"dead-lettered"`) {
		t.Errorf("an event was dead-lettered:\n%s", tail(s.stderr.String(), 3000))
	}
	// One retry: e-1's. The events that waited out the pause untried are
	// no retries (each counted one before stop 38, a metrics audit).
	retry := `hookgate_consumer_events_total{decision="retry",provider="p"} `
	body := aoWaitMetrics(t, s.base, "the retry count", func(b string) bool { return strings.Contains(b, retry) })
	for line := range strings.Lines(body) {
		if strings.HasPrefix(line, retry) && strings.TrimSpace(strings.TrimPrefix(line, retry)) != "1" {
			t.Errorf("metrics say %s; want 1 (only e-1 was tried again)", strings.TrimSpace(line))
		}
	}
}
