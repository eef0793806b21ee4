package gateway_test

import (
	"fmt"
	"github.com/hookgate/hookgate/gateway"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/event"
)

// A concurrent forged flood across several windows (real clock): every
// rejected request is in exactly one record's 1+suppressed, none twice,
// none lost, once the limiter's late write has run; no data race.
func TestReview9HFloodAcrossWindowsCountsEachOnce(t *testing.T) {
	h, audit, _ := review9fServer(t, "", nil)
	var sent atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(2300 * time.Millisecond)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				if c := review9fPost(h, fmt.Sprintf(`{"id":"g%d-%d"}`, g, i), false); c != http.StatusUnauthorized {
					t.Errorf("forged: %d", c)
					return
				}
				sent.Add(1)
				if i%50 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	total, recs := review9fAccounted(audit, int(sent.Load()))
	if int64(total) != sent.Load() {
		t.Fatalf("records account for %d of %d rejected requests (%d records)", total, sent.Load(), recs)
	}
	t.Logf("%d requests in %d records", total, recs)
}

// TestRejectedFloodIsAuditedSparingly's shape, on a machine where the
// flood takes over a second (CI under -race): the limiter's late write
// runs on the wall clock whatever Deps.Now says, from the timer's
// goroutine, into the suite's unlocked auditRecorder: a data race, and
// the suppressed counts the test pins change.
func TestReview9HExistingFloodTestDependsOnWallClock(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC).UnixNano())
	srv, _, audit := newGateway(t, "", func(d *gateway.Deps) { d.Now = func() time.Time { return time.Unix(0, clock.Load()) } })
	for range 50 {
		do(t, srv, http.Header{"X-Sig": {"sha256=00"}}, `{"id":"x"}`)
	}
	time.Sleep(1200 * time.Millisecond) // a slow machine
	clock.Add(int64(time.Second))
	do(t, srv, http.Header{"X-Sig": {"sha256=00"}}, `{"id":"x"}`)
	var got []int
	for _, r := range audit.recs {
		if r.Decision == event.DecisionRejected {
			got = append(got, r.Suppressed)
		}
	}
	if want := []int{0, 0, 0, 0, 0, 45}; !slices.Equal(got, want) {
		t.Fatalf("suppressed counts %v, want %v (the suite's expectation)", got, want)
	}
}
