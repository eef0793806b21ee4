package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
)

// PruneMark removes an entry only at the revision it was read at: a write
// since (a consumer's lease or commit) survives and the prune says so.
// A pruned subject leaves no marker (the bucket's subject count drops),
// and a consumer holding the old revision gets a conflict, then finds the
// entry absent and creates it again.
func TestPruneMarkOnlyAtItsRevision(t *testing.T) {
	env := jstest.Start(t, "")
	ctx := context.Background()
	at := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	put := func(key string, m consumer.Mark, rev uint64) uint64 {
		t.Helper()
		r, err := env.Marks.Put(ctx, key, m, rev)
		if err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		return r
	}
	old := put("g.default.G-1", consumer.Mark{At: at}, 0)
	moved := put("g.default.G-2", consumer.Mark{At: at}, 0)
	put("h.default.H-1", consumer.Mark{At: at}, 0)
	moved2 := put("g.default.G-2", consumer.Mark{At: at.Add(time.Hour)}, moved)

	seen := map[string]jetstream.MarkEntry{}
	if err := jetstream.ReadMarks(ctx, env.Conn, "g", func(e jetstream.MarkEntry) error {
		seen[e.Key] = e
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen["g.default.G-1"].Rev != old || seen["g.default.G-2"].Rev != moved2 ||
		!seen["g.default.G-2"].Mark.At.Equal(at.Add(time.Hour)) || seen["g.default.G-1"].Written.IsZero() {
		t.Fatalf("ReadMarks for provider g: %+v; want G-1 at rev %d and G-2 at rev %d (h's entry left out)", seen, old, moved2)
	}

	// G-2 was written again after the revision a prune would have read.
	if pruned, err := jetstream.PruneMark(ctx, env.Conn, "g.default.G-2", moved); err != nil || pruned {
		t.Fatalf("prune at a superseded revision: pruned %v, err %v; want false", pruned, err)
	}
	if m, rev, err := env.Marks.Get(ctx, "g.default.G-2"); err != nil || rev != moved2 || !m.At.Equal(at.Add(time.Hour)) {
		t.Fatalf("G-2 after a refused prune: %+v rev %d err %v; want its newer mark at rev %d", m, rev, err, moved2)
	}

	if pruned, err := jetstream.PruneMark(ctx, env.Conn, "g.default.G-1", old); err != nil || !pruned {
		t.Fatalf("prune at the current revision: pruned %v, err %v; want true", pruned, err)
	}
	if m, rev, err := env.Marks.Get(ctx, "g.default.G-1"); err != nil || rev != 0 || !m.At.IsZero() {
		t.Fatalf("G-1 after its prune: %+v rev %d err %v; want absent (rev 0, no marker)", m, rev, err)
	}
	s, err := env.Conn.JS.Stream(ctx, "KV_"+jetstream.BucketMarks)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.NumSubjects != 2 {
		t.Fatalf("bucket subjects after one prune: %d, want 2 (nothing left for G-1)", info.State.NumSubjects)
	}
	// A consumer that cached G-1 at its old revision: conflict, then a
	// create succeeds.
	if _, err := env.Marks.Put(ctx, "g.default.G-1", consumer.Mark{At: at.Add(2 * time.Hour)}, old); !errors.Is(err, consumer.ErrConflict) {
		t.Fatalf("put at the pruned revision: %v, want ErrConflict", err)
	}
	put("g.default.G-1", consumer.Mark{At: at.Add(2 * time.Hour)}, 0)

	// An operator's delete marker is an entry too, and prunes the same way.
	kv, err := env.Conn.JS.KeyValue(ctx, jetstream.BucketMarks)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "h.default.H-1"); err != nil {
		t.Fatal(err)
	}
	var marker jetstream.MarkEntry
	if err := jetstream.ReadMarks(ctx, env.Conn, "h", func(e jetstream.MarkEntry) error { marker = e; return nil }); err != nil {
		t.Fatal(err)
	}
	if !marker.Deleted || marker.Err != nil {
		t.Fatalf("read of a delete marker: %+v; want Deleted", marker)
	}
	if pruned, err := jetstream.PruneMark(ctx, env.Conn, marker.Key, marker.Rev); err != nil || !pruned {
		t.Fatalf("prune of the marker: pruned %v, err %v", pruned, err)
	}
	if _, rev, err := env.Marks.Get(ctx, "h.default.H-1"); err != nil || rev != 0 {
		t.Fatalf("H-1 after its marker's prune: rev %d err %v; want absent", rev, err)
	}
}

// BenchmarkPruneMarks is the cost per mark of `watermarks prune` (the read
// of the bucket and one purge per mark) beside a reference measured in the
// same run: one mark written (a create, as a new subject's first commit).
// Report the ratio; these machines are shared and noisy.
func BenchmarkPruneMarks(b *testing.B) {
	env := jstest.Start(b, "")
	ctx := context.Background()
	at := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	var seq int
	put := func(provider string, n int) {
		b.Helper()
		for range n {
			seq++
			if _, err := env.Marks.Put(ctx, fmt.Sprintf("%s.default.G-%d", provider, seq), consumer.Mark{At: at}, 0); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("write-reference", func(b *testing.B) {
		b.ResetTimer()
		put("w", b.N) // not the prune's provider
	})
	b.Run("prune", func(b *testing.B) {
		b.StopTimer()
		put("g", b.N)
		b.StartTimer()
		pruned := 0
		err := jetstream.ReadMarks(ctx, env.Conn, "g", func(e jetstream.MarkEntry) error {
			ok, err := jetstream.PruneMark(ctx, env.Conn, e.Key, e.Rev)
			if ok {
				pruned++
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if pruned < b.N {
			b.Fatalf("pruned %d of at least %d marks", pruned, b.N)
		}
	})
}
