package keyindex

import (
	"path/filepath"
	"testing"
	"time"
)

// A snapshot whose newest checkpoint lies above its frontier (it moved on
// with an ack above a gap) drops that checkpoint at load: the keys between
// the last checkpoint kept and the frontier must still be dated (by the
// dropped checkpoint's time, at or after theirs), or they never expire
// while no later event comes, and are answered duplicate past the horizon.
func TestReview7KeysBelowTheFrontierStayDatedAcrossASnapshot(t *testing.T) {
	const horizon = time.Hour
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	x := New(horizon, 0)
	x.Add("k1", 1, t0)
	x.Add("k2", 2, t0.Add(100*time.Millisecond))
	x.Add("k3", 3, t0.Add(200*time.Millisecond))
	x.Add("k5", 5, t0.Add(400*time.Millisecond)) // 4's answer not come yet
	path := filepath.Join(t.TempDir(), "keys.idx")
	snap, err := x.WriteFile(path, "s")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Frontier != 3 {
		t.Fatalf("snapshot frontier %d, want 3 (setup)", snap.Frontier)
	}
	y, _, err := ReadFile(path, "s", horizon)
	if err != nil {
		t.Fatal(err)
	}
	y.Expire(t0.Add(horizon + time.Second))
	for _, k := range []string{"k1", "k2", "k3"} {
		if seq, ok := y.Lookup(k); ok {
			t.Errorf("%s (seq %d) stored over the horizon ago is still a duplicate after a reload", k, seq)
		}
	}
	// And the dropped checkpoint dates nothing above the frontier: a new
	// event at seq 4 stored now is not expired by it.
	now := t0.Add(horizon + time.Second)
	y.Add("new4", 4, now)
	y.Expire(now)
	if _, ok := y.Lookup("new4"); !ok {
		t.Error("an event stored after the reload at seq 4 expired at once")
	}
}
