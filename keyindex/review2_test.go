package keyindex

import (
	"path/filepath"
	"testing"
	"time"
)

// A snapshot taken while publishes are in flight knows sequences above its
// frontier (acks that came before a slower one below them). ReadFile drops
// their keys ("their events may be lost with the stream's unsynced tail")
// but keeps their checkpoints. When the stream did lose that tail (power
// loss with sync: interval, or a data_dir restored from a backup whose
// jetstream/ was copied a moment before the snapshot), the restarted
// stream hands those sequences to NEW events; mark() ignores them (seq <=
// the stale checkpoint's), so the stale checkpoint dates them at the old
// time, and their keys expire as early as the outage was long (at once
// after an outage longer than the horizon): a retry within the horizon is
// stored again (promise 2).
func TestReviewStaleCheckpointAboveTheFrontierExpiresNewEvents(t *testing.T) {
	const horizon = time.Hour
	t0 := time.Now().Add(-40 * time.Minute) // the snapshot, 40 min before the restart
	x := New(horizon, 1)
	x.Add("p:a:evt:old", 1, t0)
	// seq 2's ack is still on its way; seq 3's came first.
	x.Add("p:a:evt:inflight", 3, t0.Add(time.Millisecond))
	path := filepath.Join(t.TempDir(), "keys.idx")
	if _, err := x.WriteFile(path, "s"); err != nil {
		t.Fatal(err)
	}
	// Power loss: the stream keeps seq 1 (its last sequence is 1 >= the
	// snapshot's frontier 1, so the snapshot is used), seqs 2 and 3 are
	// gone. 40 minutes later hookgate is back and stores two new events,
	// which the stream numbers 2 and 3.
	y, snap, err := ReadFile(path, "s", horizon)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Frontier != 1 {
		t.Fatalf("frontier %d, want 1", snap.Frontier)
	}
	restart := time.Now()
	y.Add("p:a:evt:new2", 2, restart)
	y.Add("p:a:evt:new3", 3, restart)
	// 25 minutes after they were stored: well within the horizon.
	y.MoveExpiry(restart.Add(25 * time.Minute))
	for _, key := range []string{"p:a:evt:new2", "p:a:evt:new3"} {
		if _, ok := y.Lookup(key); !ok {
			t.Errorf("%s, stored 25 min ago (horizon %s), is no longer a duplicate: dated by a checkpoint of the event the stream lost at that sequence", key, horizon)
		}
	}
}
