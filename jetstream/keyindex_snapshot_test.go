package jetstream

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
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
	runKeyIndex(t, k)
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

// onMessage is a slog handler that calls f with each record's message and
// attributes.
type onMessage struct {
	f func(slog.Record)
}

func (h onMessage) Enabled(context.Context, slog.Level) bool      { return true }
func (h onMessage) Handle(_ context.Context, r slog.Record) error { h.f(r); return nil }
func (h onMessage) WithAttrs([]slog.Attr) slog.Handler            { return h }
func (h onMessage) WithGroup(string) slog.Handler                 { return h }

// A read of every key back (no usable snapshot: up to 210 s at 10 M keys)
// that is stopped part way saves what it read, and the next open goes on
// from there instead of starting over.
func TestKeyIndexReadBackStoppedPartWayGoesOnFromWhereItWas(t *testing.T) {
	dir := t.TempDir()
	e, c := startEmbedded(t, dir, keyIndexStreams())
	defer e.Shutdown()
	defer c.Close()
	const n = 12000
	review8Bulk(t, c, "k", n)
	path := filepath.Join(dir, "keys.idx")
	// The first open stops right after its first save, as a stop would.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var saves atomic.Int32
	_, err := OpenKeyIndex(ctx, c, KeyIndexOptions{
		Path: path, Horizon: time.Hour, Window: keyIndexWindow, SnapshotEvery: time.Nanosecond,
		Log: slog.New(onMessage{func(r slog.Record) {
			if r.Message == "key index: what was read back is saved" && saves.Add(1) == 1 {
				cancel()
			}
		}}),
	})
	if err == nil {
		t.Fatal("the open read everything back although stopped after its first save")
	}
	var readBack int64 = -1
	k, err := OpenKeyIndex(t.Context(), c, KeyIndexOptions{
		Path: path, Horizon: time.Hour, Window: keyIndexWindow,
		Log: slog.New(onMessage{func(r slog.Record) {
			if r.Message == "key index ready" {
				r.Attrs(func(a slog.Attr) bool {
					if a.Key == "read_back" {
						readBack = a.Value.Int64()
					}
					return true
				})
			}
		}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if readBack < 0 || readBack >= n {
		t.Fatalf("the second open read back %d events of %d: it started over", readBack, n)
	}
	for i := range n {
		if _, ok := k.idx.Lookup(fmt.Sprintf("p:a:evt:k-%d", i)); !ok {
			t.Fatalf("key %d unknown after the resumed read", i)
		}
	}
}

// On an upgrade serve takes webhooks through the plain publisher while the
// index opens. If WEBHOOKS lost its unsynced tail (a power loss with sync:
// interval) after the snapshot was written, those publishes reuse the
// lost sequences: by the time the index opens, the stream holds as many
// events as the snapshot knows, and the snapshot would pass for current,
// its keys of lost events answered duplicate. The stream as found before
// the first publish (StreamLastSeq) decides.
func TestKeyIndexSnapshotAheadOfTheStreamFoundAtStartIsNotUsed(t *testing.T) {
	dir := t.TempDir()
	e, c := startEmbedded(t, dir, keyIndexStreams())
	defer e.Shutdown()
	defer c.Close()
	plain := NewPublisher(c, 5*time.Second)
	for i := range 10 {
		if _, err := plain.Publish(t.Context(), keyMsg(fmt.Sprintf("p:a:evt:held-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	k := openTestKeyIndex(t, c, dir)
	// The snapshot of a stream that also held seqs 11-13 before a power
	// loss took them.
	now := time.Now()
	x := keyindex.New(time.Hour, 0)
	for i := range 10 {
		x.Add(fmt.Sprintf("p:a:evt:held-%d", i), uint64(i+1), now)
	}
	for seq := uint64(11); seq <= 13; seq++ {
		x.Add(fmt.Sprintf("p:a:evt:lost-%d", seq), seq, now)
	}
	path := filepath.Join(dir, "keys.idx")
	if _, err := x.WriteFile(path, k.streamID); err != nil {
		t.Fatal(err)
	}
	held := uint64(10)
	// The upgrade's first publishes, before the index opened.
	for i := range 5 {
		if _, err := plain.Publish(t.Context(), keyMsg(fmt.Sprintf("p:a:evt:new-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	k, err := OpenKeyIndex(t.Context(), c, KeyIndexOptions{Path: path, Horizon: time.Hour, Window: keyIndexWindow, StreamLastSeq: &held})
	if err != nil {
		t.Fatal(err)
	}
	for seq := 11; seq <= 13; seq++ {
		if s, ok := k.idx.Lookup(fmt.Sprintf("p:a:evt:lost-%d", seq)); ok {
			t.Errorf("the key of an event the stream lost is a duplicate of seq %d (which holds another event)", s)
		}
	}
	for i := range 5 {
		if _, ok := k.idx.Lookup(fmt.Sprintf("p:a:evt:new-%d", i)); !ok {
			t.Errorf("new-%d, stored after the loss, is not known", i)
		}
	}
	if _, ok := k.idx.Lookup("p:a:evt:held-3"); !ok {
		t.Error("held-3 is not known")
	}
}
