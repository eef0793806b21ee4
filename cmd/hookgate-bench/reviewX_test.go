package main

import (
	"os"
	"testing"
	"time"

	"github.com/hookgate/hookgate/bench"
)

// A paced round reports E2E.Offered = the schedule's rate, whatever the
// load generator sent: when its connections were all waiting for answers
// the slots that fell due went out late or not at all (LoadResult.Slots
// against Sent), but round() drops both, so the table and the goal line
// print "N requests/s offered" for a rate never offered, and a shortfall
// of the load generator reads as the gateway's ("the gateway answered
// M/s"). Here one connection is paced at 4x the rate it reached closed
// loop against the floor in the same round: it cannot send that.
func TestReviewXPacedOfferedIsWhatWasSent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two floor children")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o := bench.Options{
		Self: self, Work: t.TempDir(), Conns: 1, BodySize: 1024,
		Warmup: 500 * time.Millisecond, Duration: time.Second, Rounds: 1,
		Redeliver: 0.5, Pace: 4, Only: []string{"floor-sustained"}, DrainTimeout: 60 * time.Second,
	}
	rep, err := bench.Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Rounds {
		if r.Config != "floor-sustained" {
			continue
		}
		if r.E2E == nil {
			t.Fatal("no end-to-end result")
		}
		sentRate := float64(r.Sent) / (o.Warmup + o.Duration).Seconds()
		if r.E2E.Offered > 1.25*sentRate {
			t.Errorf("reported %.0f requests/s offered; the load generator sent %d in %s (%.0f/s)",
				r.E2E.Offered, r.Sent, o.Warmup+o.Duration, sentRate)
		}
		return
	}
	t.Fatal("no floor-sustained round")
}
