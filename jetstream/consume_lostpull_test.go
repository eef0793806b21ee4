package jetstream

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A pull request nobody answers (its consumer leader's node died with it,
// or it was lost in a reconnect, on a server that does not answer a parked
// pull "409 Leadership Change") is given up a second past its expiry, and
// the source pulls again by itself. Here a subscriber swallows the pulls:
// no status, no delivery, no "no responders". (Review AG: no test reached
// this timer; the cluster test's killed leader answers its parked pull.)
func TestSourcePullsAgainWhenAPullIsNeverAnswered(t *testing.T) {
	nc := startTCPServer(t).c.NC
	const subject = "test.swallowed.pulls"
	var pulls atomic.Int32
	var first, second atomic.Int64
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		switch n := pulls.Add(1); n {
		case 1:
			first.Store(time.Now().UnixNano())
		case 2:
			second.Store(time.Now().UnixNano())
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	src, err := startSource(nil, nc, subject, 16, inboxCapacity(0, 16), pullHealth{log: slog.New(slog.DiscardHandler), warnAfter: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Stop()
	for end := time.Now().Add(10 * time.Second); pulls.Load() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d pull requests within 10 s; want a second once the first went unanswered", pulls.Load())
		}
	}
	// Not a retry at once: the second came after the first was given up.
	if gap := time.Duration(second.Load() - first.Load()); gap < pullExpiry {
		t.Errorf("second pull %s after the first, before the first's expiry (%s): it was not given up by its timer", gap, pullExpiry)
	}
}
