package jetstream

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookgate/hookgate/keyindex"
)

func TestSnapshotDue(t *testing.T) {
	tests := []struct {
		name         string
		keys         int
		fresh, after uint64
		want         bool
	}{
		{"nothing new", 10, 0, 50_000, false},
		{"nothing new, empty index", 0, 0, 50_000, false},
		{"small index, one new event", 10, 1, 50_000, true},
		{"10 M keys, 2 minutes at 100 a second", 10_000_000, 12_000, 50_000, false},
		{"10 M keys, a second's read-back", 10_000_000, 50_000, 50_000, true},
		{"1 M keys, a sixteenth", 1_000_000, 62_500, 100_000, true},
		{"1 M keys, under a sixteenth and the limit", 1_000_000, 62_499, 100_000, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := snapshotDue(tt.keys, tt.fresh, tt.after); got != tt.want {
				t.Fatalf("snapshotDue(%d, %d, %d) = %v, want %v", tt.keys, tt.fresh, tt.after, got, tt.want)
			}
		})
	}
}

// Run saves the index once enough events came since the last snapshot
// (here a sixteenth of the keys), and the file holds them: a restart
// after a crash then reads back only what came after.
func TestKeyIndexRunSnapshotsOnceEnoughEventsCame(t *testing.T) {
	dir := t.TempDir()
	e, c := startEmbedded(t, dir, keyIndexStreams())
	defer e.Shutdown()
	defer c.Close()
	plain := NewPublisher(c, 5*time.Second)
	for i := range 64 {
		if _, err := plain.Publish(t.Context(), keyMsg(fmt.Sprintf("p:a:evt:old-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "keys.idx")
	k, err := OpenKeyIndex(t.Context(), c, KeyIndexOptions{
		Path: path, Horizon: time.Hour, Window: keyIndexWindow,
		SnapshotEvery: time.Millisecond, SnapshotAfter: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	pub := k.Publisher(plain)
	var last uint64
	for i := range 4 { // 64/16
		res, err := pub.Publish(t.Context(), keyMsg(fmt.Sprintf("p:a:evt:new-%d", i)))
		if err != nil || res.Duplicate {
			t.Fatalf("publish: %+v, %v", res, err)
		}
		last = res.Seq
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		idx, snap, err := keyindex.ReadFile(path, k.streamID, time.Hour)
		if err == nil && snap.Frontier >= last {
			if _, ok := idx.Lookup("p:a:evt:new-3"); !ok {
				t.Fatalf("snapshot up to seq %d lacks the last key", snap.Frontier)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot up to seq %d within 10 s (last read: %+v, %v)", last, snap, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
