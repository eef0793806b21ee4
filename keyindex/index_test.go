package keyindex

import (
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// t0 is an arbitrary, fixed stored time: the tests pass explicit times and
// never sleep.
var t0 = time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)

func key(i uint64) string { return fmt.Sprintf("key-%d", i) }

// contents copies what the index holds, digest by digest, ignoring the
// expired mark.
func contents(x *Index) map[Digest]uint64 {
	out := map[Digest]uint64{}
	for i := range x.shards {
		s := &x.shards[i]
		s.mu.RLock()
		for d, seq := range s.m {
			out[d] = seq
		}
		s.mu.RUnlock()
	}
	return out
}

// fataler is what testing.TB and *rapid.T have in common.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// checkMarks fails unless the checkpoints are ascending in Seq, never
// descending in Time, and thinned: any two checkpoints with one between
// them are at least a second apart.
func checkMarks(tb fataler, x *Index) {
	tb.Helper()
	x.mu.Lock()
	defer x.mu.Unlock()
	for k := 1; k < len(x.marks); k++ {
		a, b := x.marks[k-1], x.marks[k]
		if b.Seq <= a.Seq || b.Time < a.Time {
			tb.Fatalf("marks[%d]=%+v then marks[%d]=%+v: not ascending", k-1, a, k, b)
		}
		if k >= 2 && b.Time-x.marks[k-2].Time < int64(time.Second) {
			tb.Fatalf("marks[%d] and marks[%d] are %v apart, less than a second", k-2, k, time.Duration(b.Time-x.marks[k-2].Time))
		}
	}
}

func TestDigestOf(t *testing.T) {
	tests := []struct {
		key  string
		want string // first 16 bytes of SHA-256(key)
	}{
		{"", "e3b0c44298fc1c149afbf4c8996fb924"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223"},
	}
	for _, tt := range tests {
		if got := DigestOf(tt.key); hex.EncodeToString(got[:]) != tt.want {
			t.Errorf("DigestOf(%q) = %x, want %s", tt.key, got, tt.want)
		}
	}
}

func TestLookupAdd(t *testing.T) {
	type add struct {
		key string
		seq uint64
	}
	tests := []struct {
		name    string
		adds    []add
		want    map[string]uint64 // key -> seq Lookup finds
		missing []string
		len     int
	}{
		{
			name:    "empty",
			missing: []string{"a", ""},
		},
		{
			name:    "one key",
			adds:    []add{{"a", 1}},
			want:    map[string]uint64{"a": 1},
			missing: []string{"b", "A", ""},
			len:     1,
		},
		{
			name: "distinct keys",
			adds: []add{{"a", 1}, {"b", 2}, {"c", 3}},
			want: map[string]uint64{"a": 1, "b": 2, "c": 3},
			len:  3,
		},
		{
			name: "same key again keeps the newest",
			adds: []add{{"a", 1}, {"b", 2}, {"a", 3}},
			want: map[string]uint64{"a": 3, "b": 2},
			len:  2,
		},
		{
			name: "same key older seq later keeps the newest",
			adds: []add{{"a", 5}, {"a", 2}},
			want: map[string]uint64{"a": 5},
			len:  1,
		},
		{
			name: "same key same seq",
			adds: []add{{"a", 4}, {"a", 4}},
			want: map[string]uint64{"a": 4},
			len:  1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := New(time.Hour, 1)
			for i, a := range tt.adds {
				x.Add(a.key, a.seq, t0.Add(time.Duration(i)*time.Second))
			}
			for k, want := range tt.want {
				if got, ok := x.Lookup(k); !ok || got != want {
					t.Errorf("Lookup(%q) = %d, %v; want %d, true", k, got, ok, want)
				}
			}
			for _, k := range tt.missing {
				if got, ok := x.Lookup(k); ok {
					t.Errorf("Lookup(%q) = %d, true; want not found", k, got)
				}
			}
			if got := x.Len(); got != tt.len {
				t.Errorf("Len() = %d, want %d", got, tt.len)
			}
		})
	}
}

// TestDigestForms: AddDigest and LookupDigest are Add and Lookup by the
// key's digest, one index whichever form wrote or reads.
func TestDigestForms(t *testing.T) {
	x := New(time.Hour, 1)
	x.Add("a", 1, t0)
	x.AddDigest(DigestOf("b"), 2, t0.Add(time.Minute))
	x.AddDigest(DigestOf("a"), 3, t0.Add(2*time.Minute))
	if seq, ok := x.LookupDigest(DigestOf("a")); !ok || seq != 3 {
		t.Errorf(`LookupDigest(DigestOf("a")) = %d, %v; want 3, true`, seq, ok)
	}
	if seq, ok := x.Lookup("b"); !ok || seq != 2 {
		t.Errorf(`Lookup("b") = %d, %v; want 2, true`, seq, ok)
	}
	if seq, ok := x.LookupDigest(Digest{}); ok {
		t.Errorf("LookupDigest(zero digest) = %d, true; want not found", seq)
	}
	if got := x.Frontier(); got != 3 {
		t.Errorf("Frontier() = %d, want 3: AddDigest moves it", got)
	}
	// Cut at t0+1m30s: seq 2 expired; a late copy of it stays hidden.
	x.Expire(t0.Add(time.Hour + 90*time.Second))
	x.AddDigest(DigestOf("b"), 2, time.Time{})
	if seq, ok := x.LookupDigest(DigestOf("b")); ok {
		t.Errorf(`LookupDigest(DigestOf("b")) = %d, true below the expired mark`, seq)
	}
}

func TestFrontier(t *testing.T) {
	type op struct {
		seq   uint64
		keyed bool // Add with a key, else Resolve without one
	}
	tests := []struct {
		name     string
		from     uint64
		ops      []op
		frontier uint64
		gap      uint64 // next missing sequence; 0: no gap
	}{
		{name: "new from 0", from: 0, frontier: 0},
		{name: "new from 1", from: 1, frontier: 0},
		{name: "new from 100", from: 100, frontier: 99},
		{
			name:     "in order",
			from:     1,
			ops:      []op{{1, true}, {2, true}, {3, true}},
			frontier: 3,
		},
		{
			name:     "3 before 2 waits",
			from:     1,
			ops:      []op{{1, true}, {3, true}},
			frontier: 1,
			gap:      2,
		},
		{
			name:     "3 before 2, then 2",
			from:     1,
			ops:      []op{{1, true}, {3, true}, {2, true}},
			frontier: 3,
		},
		{
			name:     "gap filled by a seq without a key",
			from:     1,
			ops:      []op{{1, true}, {3, true}, {4, true}, {2, false}},
			frontier: 4,
		},
		{
			name:     "two gaps, first filled",
			from:     1,
			ops:      []op{{1, true}, {3, true}, {5, false}, {2, false}},
			frontier: 3,
			gap:      4,
		},
		{
			name:     "starts at from",
			from:     11,
			ops:      []op{{12, true}, {11, true}},
			frontier: 12,
		},
		{
			name:     "waiting for from itself",
			from:     10,
			ops:      []op{{11, true}, {12, true}},
			frontier: 9,
			gap:      10,
		},
		{
			name:     "seqs at or below the frontier are ignored",
			from:     10,
			ops:      []op{{3, true}, {9, false}, {10, false}, {10, true}},
			frontier: 10,
		},
		{
			name:     "resolving an ahead seq twice",
			from:     1,
			ops:      []op{{2, false}, {2, true}, {1, false}},
			frontier: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := New(time.Hour, tt.from)
			for _, o := range tt.ops {
				if o.keyed {
					x.Add(key(o.seq), o.seq, time.Time{})
				} else {
					x.Resolve(o.seq, time.Time{})
				}
			}
			if got := x.Frontier(); got != tt.frontier {
				t.Errorf("Frontier() = %d, want %d", got, tt.frontier)
			}
			next, since, ok := x.Gap()
			switch {
			case tt.gap == 0 && ok:
				t.Errorf("Gap() = %d, %v, true; want no gap", next, since)
			case tt.gap == 0 && (next != 0 || !since.IsZero()):
				t.Errorf("Gap() = %d, %v, false; want zero values", next, since)
			case tt.gap != 0 && (!ok || next != tt.gap || since.IsZero()):
				t.Errorf("Gap() = %d, %v, %v; want %d, a time, true", next, since, ok, tt.gap)
			}
		})
	}
}

func TestGapSince(t *testing.T) {
	x := New(time.Hour, 1)
	before := time.Now()
	x.Add(key(3), 3, time.Time{})
	after := time.Now()
	next, since, ok := x.Gap()
	if !ok || next != 1 || since.Before(before) || since.After(after) {
		t.Fatalf("Gap() = %d, %v, %v; want 1, in [%v, %v], true", next, since, ok, before, after)
	}
	// Another seq ahead is the same wait: since stays.
	x.Add(key(5), 5, time.Time{})
	if n, s, ok := x.Gap(); !ok || n != 1 || !s.Equal(since) {
		t.Fatalf("after 5: Gap() = %d, %v, %v; want 1, %v, true", n, s, ok, since)
	}
	// Skipping to where the frontier already is changes nothing.
	x.SkipTo(1)
	if n, s, ok := x.Gap(); !ok || n != 1 || !s.Equal(since) {
		t.Fatalf("after SkipTo(1): Gap() = %d, %v, %v; want 1, %v, true", n, s, ok, since)
	}
	// The frontier moves to 3 and waits for 4 from now on.
	x.Resolve(1, time.Time{})
	x.Resolve(2, time.Time{})
	n, s, ok := x.Gap()
	if !ok || n != 4 || s.Before(since) {
		t.Fatalf("after 1, 2: Gap() = %d, %v, %v; want 4, not before %v, true", n, s, ok, since)
	}
	x.Resolve(4, time.Time{})
	if n, s, ok := x.Gap(); ok || n != 0 || !s.IsZero() {
		t.Fatalf("after 4: Gap() = %d, %v, %v; want no gap", n, s, ok)
	}
	if got := x.Frontier(); got != 5 {
		t.Fatalf("Frontier() = %d, want 5", got)
	}
}

func TestSkipTo(t *testing.T) {
	tests := []struct {
		name     string
		from     uint64
		known    []uint64 // resolved before SkipTo
		skipTo   uint64
		frontier uint64
		gap      uint64 // next missing sequence; 0: no gap
	}{
		{name: "zero", from: 1, skipTo: 0, frontier: 0},
		{name: "to the next seq", from: 5, skipTo: 5, frontier: 4},
		{name: "below the frontier", from: 1, known: []uint64{1, 2, 3}, skipTo: 2, frontier: 3},
		{name: "forward", from: 1, known: []uint64{1}, skipTo: 10, frontier: 9},
		{name: "over a gap", from: 1, known: []uint64{1, 3}, skipTo: 3, frontier: 3},
		{name: "drops what it passes", from: 1, known: []uint64{2, 4}, skipTo: 6, frontier: 5},
		{name: "then drains", from: 1, known: []uint64{3, 12, 13, 20}, skipTo: 12, frontier: 13, gap: 14},
		{name: "into ahead", from: 1, known: []uint64{3, 5, 6}, skipTo: 5, frontier: 6},
		{name: "gap left above", from: 1, known: []uint64{8}, skipTo: 4, frontier: 3, gap: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := New(time.Hour, tt.from)
			for _, seq := range tt.known {
				x.Resolve(seq, time.Time{})
			}
			x.SkipTo(tt.skipTo)
			if got := x.Frontier(); got != tt.frontier {
				t.Errorf("Frontier() = %d, want %d", got, tt.frontier)
			}
			next, since, ok := x.Gap()
			if tt.gap == 0 && (ok || next != 0 || !since.IsZero()) {
				t.Errorf("Gap() = %d, %v, %v; want no gap", next, since, ok)
			}
			if tt.gap != 0 && (!ok || next != tt.gap || since.IsZero()) {
				t.Errorf("Gap() = %d, %v, %v; want %d, a time, true", next, since, ok, tt.gap)
			}
			x.mu.Lock()
			for seq := range x.ahead {
				if seq <= x.frontier+1 {
					t.Errorf("ahead holds %d with the frontier at %d", seq, x.frontier)
				}
			}
			x.mu.Unlock()
		})
	}
}

// TestExpire stores a key a minute for three hours, a checkpoint each, so
// Expire's cut is exact: it removes the keys stored before now-horizon.
func TestExpire(t *testing.T) {
	const n = 181 // t0, t0+1m, ..., t0+3h
	stored := func(i uint64) time.Time { return t0.Add(time.Duration(i-1) * time.Minute) }
	tests := []struct {
		name    string
		now     time.Time
		removed int
	}{
		{"before the first key", t0.Add(-time.Hour), 0},
		{"within the horizon of all", t0.Add(30 * time.Minute), 0},
		{"the first key exactly at the horizon", t0.Add(time.Hour), 0},
		{"the first key just past the horizon", t0.Add(time.Hour + time.Nanosecond), 1},
		{"half way", t0.Add(2*time.Hour + 30*time.Minute), 90},
		{"between two keys", t0.Add(2*time.Hour + 30*time.Minute + 30*time.Second), 91},
		{"the last key exactly at the horizon", t0.Add(4 * time.Hour), n - 1},
		{"all", t0.Add(10 * time.Hour), n},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := New(time.Hour, 1)
			for i := uint64(1); i <= n; i++ {
				x.Add(key(i), i, stored(i))
			}
			if got := x.Expire(tt.now); got != tt.removed {
				t.Errorf("Expire(%v) = %d, want %d", tt.now, got, tt.removed)
			}
			if got := x.Len(); got != n-tt.removed {
				t.Errorf("Len() = %d, want %d", got, n-tt.removed)
			}
			cut := tt.now.Add(-time.Hour)
			for i := uint64(1); i <= n; i++ {
				_, ok := x.Lookup(key(i))
				if want := !stored(i).Before(cut); ok != want {
					t.Errorf("key %d stored %v, cut %v: Lookup ok = %v, want %v", i, stored(i), cut, ok, want)
				}
			}
			if got := x.Frontier(); got != n {
				t.Errorf("Frontier() = %d, want %d: Expire must not move it", got, n)
			}
			// A second Expire at the same time finds nothing more.
			if got := x.Expire(tt.now); got != 0 {
				t.Errorf("second Expire(%v) = %d, want 0", tt.now, got)
			}
		})
	}
}

// TestExpireGranularity stores keys 100ms apart, more than a checkpoint a
// second, and moves now in steps that fall between them: a key never goes
// before the horizon has passed since it was stored, and lives at most a
// second past it.
func TestExpireGranularity(t *testing.T) {
	const (
		n       = 200 // 20s of keys
		horizon = time.Hour
		spacing = 100 * time.Millisecond
	)
	stored := func(i uint64) time.Time { return t0.Add(time.Duration(i) * spacing) }
	x := New(horizon, 1)
	for i := uint64(1); i <= n; i++ {
		x.Add(key(i), i, stored(i))
	}
	checkMarks(t, x)
	for now := t0.Add(horizon); now.Before(stored(n + 20).Add(horizon)); now = now.Add(37 * time.Millisecond) {
		x.Expire(now)
		checkMarks(t, x)
		cut := now.Add(-horizon)
		for i := uint64(1); i <= n; i++ {
			_, ok := x.Lookup(key(i))
			if !stored(i).Before(cut) && !ok {
				t.Fatalf("now %v: key %d stored %v gone before the horizon passed (cut %v)", now, i, stored(i), cut)
			}
			if !stored(i).After(cut.Add(-time.Second)) && ok {
				t.Fatalf("now %v: key %d stored %v still found more than a second past the horizon (cut %v)", now, i, stored(i), cut)
			}
		}
	}
	if got := x.Len(); got != 0 {
		t.Fatalf("Len() = %d after every key passed the horizon, want 0", got)
	}
}

// TestLookupUsesExpiredMark: a key at or below the expired mark is no
// duplicate even while Expire has not removed it (or it came in late).
func TestLookupUsesExpiredMark(t *testing.T) {
	t.Run("set directly", func(t *testing.T) {
		x := New(time.Hour, 1)
		for i := uint64(1); i <= 5; i++ {
			x.Add(key(i), i, time.Time{})
		}
		x.expired.Store(3)
		for i := uint64(1); i <= 5; i++ {
			seq, ok := x.Lookup(key(i))
			if want := i > 3; ok != want {
				t.Errorf("Lookup(%q) = %d, %v; want ok %v with expired 3", key(i), seq, ok, want)
			}
		}
		if got := x.Len(); got != 5 {
			t.Errorf("Len() = %d, want 5: nothing swept", got)
		}
	})
	t.Run("moved by Expire", func(t *testing.T) {
		x := New(time.Hour, 1)
		for i := uint64(1); i <= 10; i++ {
			x.Add(key(i), i, t0.Add(time.Duration(i)*time.Minute))
		}
		// Cut at t0+5m30s: seqs 1..5 expire.
		if got := x.Expire(t0.Add(time.Hour + 5*time.Minute + 30*time.Second)); got != 5 {
			t.Fatalf("Expire = %d, want 5", got)
		}
		// An event older than the cut read back late is not swept yet.
		x.Add("late", 4, time.Time{})
		if got := x.Len(); got != 6 {
			t.Fatalf("Len() = %d, want 6 (5 left and the late one)", got)
		}
		if seq, ok := x.Lookup("late"); ok {
			t.Errorf(`Lookup("late") = %d, true; want false: seq 4 is below the expired mark`, seq)
		}
		// The same key stored again is a duplicate of its new event.
		x.Add("late", 11, t0.Add(11*time.Minute))
		if seq, ok := x.Lookup("late"); !ok || seq != 11 {
			t.Errorf(`Lookup("late") = %d, %v; want 11, true`, seq, ok)
		}
	})
	t.Run("never moves back", func(t *testing.T) {
		x := New(time.Hour, 1)
		for i := uint64(1); i <= 10; i++ {
			x.Add(key(i), i, t0.Add(time.Duration(i)*time.Minute))
		}
		x.Expire(t0.Add(time.Hour + 8*time.Minute + 30*time.Second))
		x.Expire(t0.Add(time.Hour + 2*time.Minute + 30*time.Second)) // a clock stepped back
		if got := x.expired.Load(); got != 8 {
			t.Fatalf("expired = %d, want 8", got)
		}
		x.Add("late", 6, time.Time{})
		if seq, ok := x.Lookup("late"); ok {
			t.Errorf(`Lookup("late") = %d, true; want false`, seq)
		}
	})
}

// TestExpireUnknownTimes: keys without a stored time are dated by the
// checkpoints around them, and kept while there is none.
func TestExpireUnknownTimes(t *testing.T) {
	x := New(time.Hour, 1)
	x.Add(key(1), 1, time.Time{})
	x.Add(key(2), 2, time.Time{})
	if got := x.Expire(t0.Add(100 * time.Hour)); got != 0 {
		t.Fatalf("Expire without checkpoints = %d, want 0", got)
	}
	x.Add(key(3), 3, t0)
	x.Add(key(4), 4, time.Time{})
	x.Add(key(5), 5, t0.Add(2*time.Hour))
	// Cut at t0+30m: 1..3 were stored by t0; 4 may be as late as t0+2h.
	if got := x.Expire(t0.Add(90 * time.Minute)); got != 3 {
		t.Fatalf("Expire = %d, want 3", got)
	}
	for i, want := range map[uint64]bool{1: false, 2: false, 3: false, 4: true, 5: true} {
		if _, ok := x.Lookup(key(i)); ok != want {
			t.Errorf("Lookup(%q) ok = %v, want %v", key(i), ok, want)
		}
	}
}

func TestMarksThinning(t *testing.T) {
	tests := []struct {
		name    string
		n       int
		spacing time.Duration
		max     int
	}{
		{"many adds within a second", 10000, 50 * time.Microsecond, 2},
		{"all at the same time", 1000, 0, 2},
		// Dense adds: about one checkpoint a second (and the newest).
		{"ten seconds of 1ms", 10000, time.Millisecond, 10 + 2},
		{"a minute of 10ms", 6000, 10 * time.Millisecond, 60 + 2},
		// Adds 0.5s to 1s apart all stay checkpoints: the bound is two
		// checkpoints with one between them a second apart, not one a
		// second as mark's comment says.
		{"a minute of 600ms", 100, 600 * time.Millisecond, 100},
		{"a minute of 3s", 20, 3 * time.Second, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := New(time.Hour, 1)
			for i := range tt.n {
				seq := uint64(i + 1)
				x.Add(key(seq), seq, t0.Add(time.Duration(i)*tt.spacing))
			}
			checkMarks(t, x)
			if got := len(x.marks); got > tt.max {
				t.Fatalf("%d adds kept %d checkpoints, want at most %d", tt.n, got, tt.max)
			}
			if last := x.marks[len(x.marks)-1]; last.Seq != uint64(tt.n) {
				t.Fatalf("last checkpoint %+v, want the last seq %d", last, tt.n)
			}
		})
	}
}

func TestMarksClockBack(t *testing.T) {
	x := New(time.Hour, 1)
	times := []time.Duration{0, 5 * time.Second, 2 * time.Second, 3 * time.Second, 10 * time.Second, time.Second}
	for i, d := range times {
		seq := uint64(i + 1)
		x.Add(key(seq), seq, t0.Add(d))
	}
	checkMarks(t, x)
	// Seq 3 was stored "at 2s" after seq 2 at 5s: it may not go before 5s.
	if got := x.Expire(t0.Add(time.Hour + 4*time.Second)); got != 1 {
		t.Fatalf("Expire at cut 4s = %d, want 1 (only seq 1)", got)
	}
	if _, ok := x.Lookup(key(3)); !ok {
		t.Fatalf("key 3 stored after a key stored at 5s expired at cut 4s")
	}
}

// TestMarksOutOfOrder: a checkpoint for a seq below the newest one adds
// nothing (events are stored in seq order).
func TestMarksOutOfOrder(t *testing.T) {
	x := New(time.Hour, 1)
	x.Add(key(3), 3, t0.Add(3*time.Second))
	x.Add(key(2), 2, t0.Add(2*time.Second))
	x.Add(key(1), 1, t0.Add(time.Second))
	if len(x.marks) != 1 || x.marks[0] != (checkpoint{3, t0.Add(3 * time.Second).UnixNano()}) {
		t.Fatalf("marks = %+v, want only seq 3 at 3s", x.marks)
	}
	if got := x.Expire(t0.Add(time.Hour + 2500*time.Millisecond)); got != 0 {
		t.Fatalf("Expire at cut 2.5s = %d, want 0: nothing is dated before it", got)
	}
	if got := x.Expire(t0.Add(time.Hour + 3*time.Second + 1)); got != 3 {
		t.Fatalf("Expire past 3s = %d, want 3", got)
	}
}

// TestIndexProperty: whatever order seqs from..from+n-1 come in, some
// with a key and some without, with SkipTo now and then, the frontier
// ends at the last one, no gap is left and every key is found. After each
// step the frontier and gap match a model.
func TestIndexProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		from := rapid.Uint64Range(0, 1000).Draw(rt, "from")
		n := rapid.IntRange(1, 200).Draw(rt, "n")
		first := max(from, 1)
		seqs := make([]uint64, n)
		for i := range seqs {
			seqs[i] = first + uint64(i)
		}
		seqs = rapid.Permutation(seqs).Draw(rt, "order")
		x := New(time.Hour, from)
		known := map[uint64]bool{}
		keys := map[string]uint64{}
		skipped := first - 1 // SkipTo says every seq up to it is known
		for i, seq := range seqs {
			stored := time.Time{}
			if rapid.Bool().Draw(rt, fmt.Sprintf("timed%d", i)) {
				stored = t0.Add(time.Duration(seq) * time.Millisecond)
			}
			if rapid.IntRange(0, 3).Draw(rt, fmt.Sprintf("keyless%d", i)) == 0 {
				x.Resolve(seq, stored)
			} else {
				k := key(seq)
				if rapid.IntRange(0, 4).Draw(rt, fmt.Sprintf("again%d", i)) == 0 && len(keys) > 0 {
					// Another event's key, stored again.
					k = key(uint64(rapid.IntRange(0, len(keys)-1).Draw(rt, fmt.Sprintf("which%d", i))) + first)
				}
				x.Add(k, seq, stored)
				keys[k] = max(keys[k], seq)
			}
			known[seq] = true
			if rapid.IntRange(0, 9).Draw(rt, fmt.Sprintf("repeat%d", i)) == 0 {
				x.Resolve(seq, stored) // an event read back twice
			}

			if rapid.IntRange(0, 19).Draw(rt, fmt.Sprintf("skip%d", i)) == 0 {
				to := rapid.Uint64Range(0, first+uint64(n)).Draw(rt, fmt.Sprintf("skipTo%d", i))
				x.SkipTo(to)
				if to > 0 {
					skipped = max(skipped, to-1)
				}
			}

			want := skipped
			for known[want+1] {
				want++
			}
			if got := x.Frontier(); got != want {
				rt.Fatalf("after seq %d: Frontier() = %d, want %d", seq, got, want)
			}
			wantGap := false
			for k := range known {
				wantGap = wantGap || k > want
			}
			next, since, ok := x.Gap()
			if ok != wantGap || (ok && (next != want+1 || since.IsZero())) || (!ok && next != 0) {
				rt.Fatalf("after seq %d: Gap() = %d, %v, %v; want gap %v at %d", seq, next, since, ok, wantGap, want+1)
			}
		}
		if got, want := x.Frontier(), first+uint64(n)-1; got != want {
			rt.Fatalf("Frontier() = %d, want %d", got, want)
		}
		if next, _, ok := x.Gap(); ok {
			rt.Fatalf("Gap() = %d, true after every seq is known", next)
		}
		for k, seq := range keys {
			if got, ok := x.Lookup(k); !ok || got != seq {
				rt.Fatalf("Lookup(%q) = %d, %v; want %d, true", k, got, ok, seq)
			}
		}
		if got := x.Len(); got != len(keys) {
			rt.Fatalf("Len() = %d, want %d", got, len(keys))
		}
		checkMarks(rt, x)
	})
}

// TestExpireProperty: with stored times that mostly go forward (and
// sometimes step back, or are unknown) and Expire called as now goes
// forward, a key is never gone before the horizon has passed since it was
// stored (or since a key before it was stored, if the clock stepped back
// or its time is unknown), and a key with a stored time is gone once a
// second more has passed.
func TestExpireProperty(t *testing.T) {
	const horizon = 10 * time.Second
	rapid.Check(t, func(rt *rapid.T) {
		x := New(horizon, 1)
		type event struct {
			key     string
			lower   time.Time // not stored before this
			upper   time.Time // stored by then; zero: unknown
			removed bool
		}
		var events []event
		clock := t0          // the stored time of the next event
		var latest time.Time // newest stored time so far
		now := t0            // the last Expire's now
		n := rapid.IntRange(1, 300).Draw(rt, "n")
		for i := range n {
			seq := uint64(i + 1)
			clock = clock.Add(time.Duration(rapid.Int64Range(-1500, 2500).Draw(rt, "step")) * time.Millisecond)
			e := event{key: key(seq), lower: latest}
			if rapid.IntRange(0, 4).Draw(rt, "unknown") == 0 {
				x.Add(e.key, seq, time.Time{})
			} else {
				x.Add(e.key, seq, clock)
				if clock.After(latest) {
					latest = clock
				}
				e.lower, e.upper = latest, latest
			}
			events = append(events, e)
			if rapid.IntRange(0, 5).Draw(rt, "expire") == 0 {
				now = now.Add(time.Duration(rapid.Int64Range(0, 10000).Draw(rt, "advance")) * time.Millisecond)
				removed := x.Expire(now)
				checkMarks(rt, x)
				cut := now.Add(-horizon)
				m := contents(x)
				gone := 0
				for j := range events {
					e := &events[j]
					d := DigestOf(e.key)
					seq, held := m[d]
					_, ok := x.Lookup(e.key)
					if held && seq <= x.expired.Load() {
						rt.Fatalf("key %s seq %d held after Expire with expired mark %d", e.key, seq, x.expired.Load())
					}
					if held != ok {
						rt.Fatalf("key %s: held %v, but Lookup ok %v", e.key, held, ok)
					}
					if !e.lower.IsZero() && !e.lower.Before(cut) && !ok {
						rt.Fatalf("key %s (not stored before %v) gone at cut %v", e.key, e.lower, cut)
					}
					if !e.upper.IsZero() && !e.upper.After(cut.Add(-time.Second)) && ok {
						rt.Fatalf("key %s (stored by %v) found at cut %v, more than a second late", e.key, e.upper, cut)
					}
					if !held && !e.removed {
						e.removed = true
						gone++
					}
				}
				if removed != gone {
					rt.Fatalf("Expire = %d, but %d keys went", removed, gone)
				}
			}
		}
	})
}

// TestConcurrent runs adds, lookups, expiry and snapshots at once, for the
// race detector, and checks the outcome.
func TestConcurrent(t *testing.T) {
	const (
		n       = 4000
		writers = 4
		horizon = time.Hour
	)
	stored := func(seq uint64) time.Time { return t0.Add(time.Duration(seq) * time.Millisecond) }
	x := New(horizon, 1)
	now := stored(n / 2).Add(horizon) // cut in the middle
	path := filepath.Join(t.TempDir(), "keys.snap")
	done := make(chan struct{})
	var wg, bg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for seq := uint64(w + 1); seq <= n; seq += writers {
				if seq%7 == 0 {
					x.Resolve(seq, stored(seq))
				} else {
					x.Add(key(seq), seq, stored(seq))
				}
			}
		})
	}
	bg.Go(func() {
		for i := uint64(0); ; i++ {
			select {
			case <-done:
				return
			default:
			}
			x.Lookup(key(i%n + 1))
			x.Gap()
			x.Len()
		}
	})
	bg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			x.Expire(now)
			if _, err := x.WriteFile(path, "stream"); err != nil {
				t.Errorf("WriteFile: %v", err)
				return
			}
		}
	})
	wg.Wait()
	close(done)
	bg.Wait()
	x.Expire(now)
	if got := x.Frontier(); got != n {
		t.Fatalf("Frontier() = %d, want %d", got, n)
	}
	if next, _, ok := x.Gap(); ok {
		t.Fatalf("Gap() = %d, true; want none", next)
	}
	cut := now.Add(-horizon)
	for seq := uint64(1); seq <= n; seq++ {
		if seq%7 == 0 {
			continue
		}
		_, ok := x.Lookup(key(seq))
		if !stored(seq).Before(cut) && !ok {
			t.Fatalf("key %d stored %v not found, cut %v", seq, stored(seq), cut)
		}
		// No upper bound here: adds out of order leave checkpoints out,
		// so keys may live longer than a second past the horizon.
	}
	y, snap, err := ReadFile(path, "stream", horizon)
	if err != nil {
		t.Fatalf("ReadFile of the last snapshot: %v", err)
	}
	if snap.Keys != y.Len() || y.Frontier() != snap.Frontier {
		t.Fatalf("snapshot %+v, index has %d keys and frontier %d", snap, y.Len(), y.Frontier())
	}
}
