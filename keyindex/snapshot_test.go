package keyindex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const testStream = "WEBHOOKS-2025-03-14T12:00:00Z"

// sampleIndex returns an index with keys stored a second apart over two
// hours, a part of them expired (and one unswept key below the expired
// mark), a gap with keys above the frontier, and keyless events.
func sampleIndex(t *testing.T) *Index {
	t.Helper()
	x := New(time.Hour, 1)
	for seq := uint64(1); seq <= 7200; seq++ {
		at := t0.Add(time.Duration(seq) * time.Second)
		if seq%5 == 0 {
			x.Resolve(seq, at)
			continue
		}
		x.Add(key(seq), seq, at)
	}
	x.Add(key(7203), 7203, t0.Add(7203*time.Second)) // 7201, 7202 missing
	x.Add(key(7205), 7205, time.Time{})
	if got := x.Expire(t0.Add(time.Hour + 30*time.Minute)); got == 0 {
		t.Fatal("Expire removed nothing: the sample has no expired keys")
	}
	x.Add("unswept", 10, time.Time{}) // read back late, below the expired mark
	if x.Frontier() != 7200 || x.expired.Load() == 0 || len(x.marks) < 2 {
		t.Fatalf("sample: frontier %d, expired %d, %d marks", x.Frontier(), x.expired.Load(), len(x.marks))
	}
	return x
}

// writeSnapshot writes x for testStream to a new file and returns its path.
func writeSnapshot(t *testing.T, x *Index) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys.snap")
	if _, err := x.WriteFile(path, testStream); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	return path
}

// sameIndex fails unless x and y hold the same keys, frontier, expired
// mark and checkpoints.
func sameIndex(t *testing.T, x, y *Index) {
	t.Helper()
	if got, want := y.Frontier(), x.Frontier(); got != want {
		t.Errorf("Frontier() = %d, want %d", got, want)
	}
	// Checkpoints above the frontier are not loaded either, and the
	// expired mark is not above it.
	if got, want := y.expired.Load(), min(x.expired.Load(), x.Frontier()); got != want {
		t.Errorf("expired = %d, want %d", got, want)
	}
	var marks []checkpoint
	for _, m := range x.marks {
		if m.Seq <= x.Frontier() {
			marks = append(marks, m)
		}
	}
	if !slices.Equal(y.marks, marks) {
		t.Errorf("%d marks, want %d (the first differing: %v)", len(y.marks), len(marks), firstDiff(y.marks, marks))
	}
	// Keys above the frontier are not loaded (their events may be lost
	// with the stream's unsynced tail; the owner reads them back).
	xm, ym := contents(x), contents(y)
	for d, seq := range xm {
		if seq > x.Frontier() {
			delete(xm, d)
		}
	}
	if len(ym) != len(xm) {
		t.Errorf("%d keys, want %d", len(ym), len(xm))
	}
	for d, seq := range xm {
		if got, ok := ym[d]; !ok || got != seq {
			t.Errorf("digest %x: seq %d, %v; want %d", d, got, ok, seq)
		}
	}
}

func firstDiff(a, b []checkpoint) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("at %d: %v vs %v", i, a[i], b[i])
		}
	}
	return "one is a prefix of the other"
}

func TestSnapshotRoundTrip(t *testing.T) {
	x := sampleIndex(t)
	path := filepath.Join(t.TempDir(), "keys.snap")
	wrote, err := x.WriteFile(path, testStream)
	if err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	want := Snapshot{StreamID: testStream, Horizon: time.Hour, Frontier: 7200, Keys: x.Len()}
	if wrote != want {
		t.Fatalf("WriteFile = %+v, want %+v", wrote, want)
	}
	y, read, err := ReadFile(path, testStream, time.Hour)
	if err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
	want.Keys = 0
	for _, seq := range contents(x) {
		if seq <= x.Frontier() {
			want.Keys++
		}
	}
	if want.Keys == x.Len() {
		t.Fatal("the sample index has no key above its frontier: the test cannot see them left out")
	}
	if read != want {
		t.Fatalf("ReadFile = %+v, want %+v", read, want)
	}
	if y.Horizon() != time.Hour {
		t.Fatalf("Horizon() = %v, want 1h", y.Horizon())
	}
	sameIndex(t, x, y)
	for _, k := range []string{key(1), key(3000), key(7199), "unswept", "never"} {
		xs, xok := x.Lookup(k)
		ys, yok := y.Lookup(k)
		if xs != ys || xok != yok {
			t.Errorf("Lookup(%q) = %d, %v after loading, %d, %v before", k, ys, yok, xs, xok)
		}
	}
	// Above the frontier: known before, left out after loading.
	for _, k := range []string{key(7203), key(7205)} {
		if _, ok := x.Lookup(k); !ok {
			t.Errorf("Lookup(%q) missed before writing", k)
		}
		if _, ok := y.Lookup(k); ok {
			t.Errorf("Lookup(%q) found after loading: a key above the frontier was loaded", k)
		}
	}
	// Drop them (and the checkpoints above the frontier) from x too, so
	// that Expire can be compared.
	for _, k := range []string{key(7203), key(7205)} {
		d := DigestOf(k)
		delete(x.shard(d).m, d)
	}
	kept := x.marks[:0]
	for _, m := range x.marks {
		if m.Seq <= x.Frontier() {
			kept = append(kept, m)
		}
	}
	x.marks = kept
	if _, ok := y.Lookup("unswept"); ok {
		t.Errorf(`Lookup("unswept") found a key below the expired mark`)
	}

	// Expire after loading does what it does on the index written.
	for _, now := range []time.Time{
		t0.Add(time.Hour + 30*time.Minute), // the cut already applied
		t0.Add(time.Hour + 45*time.Minute + 500*time.Millisecond),
		t0.Add(2*time.Hour + 59*time.Minute),
		t0.Add(5 * time.Hour),
	} {
		xr, yr := x.Expire(now), y.Expire(now)
		if xr != yr {
			t.Errorf("Expire(%v) = %d after loading, %d before", now, yr, xr)
		}
		sameIndex(t, x, y)
	}
	if y.Len() != 0 {
		t.Errorf("Len() = %d after all expired, want 0", y.Len())
	}

	// The loaded index goes on from its frontier.
	y.Resolve(7201, time.Time{})
	y.Resolve(7202, time.Time{})
	y.Add(key(7203), 7203, time.Time{})
	y.Add(key(7204), 7204, time.Time{})
	if got := y.Frontier(); got != 7204 {
		t.Errorf("Frontier() = %d after reading 7201..7204 back, want 7204", got)
	}
}

func TestSnapshotEmpty(t *testing.T) {
	for _, from := range []uint64{0, 1, 42} {
		x := New(time.Minute, from)
		y, snap, err := ReadFile(writeSnapshot(t, x), testStream, time.Minute)
		if err != nil {
			t.Fatalf("from %d: ReadFile: %v", from, err)
		}
		want := Snapshot{StreamID: testStream, Horizon: time.Minute, Frontier: x.Frontier()}
		if snap != want {
			t.Errorf("from %d: ReadFile = %+v, want %+v", from, snap, want)
		}
		sameIndex(t, x, y)
	}
}

// TestSnapshotMaxFrontier shows a bug: ReadFile builds the index with
// New(horizon, Frontier+1), which wraps to 0 for a frontier of
// math.MaxUint64, so the loaded index's frontier is 0 while the Snapshot
// it returns says MaxUint64.
func TestSnapshotMaxFrontier(t *testing.T) {
	x := New(time.Hour, math.MaxUint64)
	x.Add(key(1), math.MaxUint64, time.Time{})
	if x.Frontier() != math.MaxUint64 {
		t.Fatalf("Frontier() = %d before writing, want MaxUint64", x.Frontier())
	}
	y, snap, err := ReadFile(writeSnapshot(t, x), testStream, time.Hour)
	if err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
	if snap.Frontier != math.MaxUint64 || y.Frontier() != snap.Frontier {
		t.Errorf("ReadFile: Snapshot.Frontier %d, Frontier() %d; want both MaxUint64", snap.Frontier, y.Frontier())
	}
}

func TestReadFileHorizonAndStream(t *testing.T) {
	x := sampleIndex(t)
	path := writeSnapshot(t, x)
	tests := []struct {
		name    string
		stream  string
		horizon time.Duration
		ok      bool
	}{
		{"same", testStream, time.Hour, true},
		{"shorter asked", testStream, time.Minute, true},
		{"zero asked", testStream, 0, true},
		{"longer asked", testStream, time.Hour + time.Nanosecond, false},
		{"other stream", "WEBHOOKS-2025-03-15T00:00:00Z", time.Hour, false},
		{"empty stream", "", time.Hour, false},
		{"stream id prefix", testStream[:len(testStream)-1], time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y, snap, err := ReadFile(path, tt.stream, tt.horizon)
			if !tt.ok {
				if !errors.Is(err, ErrSnapshot) || y != nil {
					t.Fatalf("ReadFile = %v, %v; want nil, ErrSnapshot", y, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadFile: %v", err)
			}
			if snap.Horizon != time.Hour || y.Horizon() != tt.horizon {
				t.Fatalf("Snapshot.Horizon %v, Horizon() %v; want 1h (as written), %v (as asked)", snap.Horizon, y.Horizon(), tt.horizon)
			}
			// The expired mark and the keys are those of the longer
			// horizon: a shorter one drops them at its next Expire.
			sameIndex(t, x, y)
		})
	}
}

func TestReadFileMissing(t *testing.T) {
	_, _, err := ReadFile(filepath.Join(t.TempDir(), "none.snap"), testStream, time.Hour)
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadFile of a missing file: %v, want os.ErrNotExist", err)
	}
	if errors.Is(err, ErrSnapshot) {
		t.Fatalf("ReadFile of a missing file: %v, want no ErrSnapshot", err)
	}
}

// TestReadFileDamaged: a snapshot cut short anywhere, with any byte
// changed, or with bytes after it is refused, never loaded or a panic.
func TestReadFileDamaged(t *testing.T) {
	x := New(time.Hour, 1)
	for seq := uint64(1); seq <= 20; seq++ {
		x.Add(key(seq), seq, t0.Add(time.Duration(seq)*time.Second))
	}
	x.Expire(t0.Add(time.Hour + 5*time.Second + 1))
	good, err := os.ReadFile(writeSnapshot(t, x))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	refused := func(t *testing.T, name string, data []byte) {
		t.Helper()
		path := filepath.Join(dir, "damaged.snap")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		y, _, err := ReadFile(path, testStream, time.Hour)
		if !errors.Is(err, ErrSnapshot) || y != nil {
			t.Fatalf("%s: ReadFile = %v, %v; want nil, ErrSnapshot", name, y, err)
		}
	}
	t.Run("cut short", func(t *testing.T) {
		for n := range len(good) {
			refused(t, fmt.Sprintf("first %d bytes", n), good[:n])
		}
	})
	t.Run("a byte changed", func(t *testing.T) {
		for i := range good {
			for _, flip := range []byte{0x01, 0x80, 0xff} {
				bad := slices.Clone(good)
				bad[i] ^= flip
				refused(t, fmt.Sprintf("byte %d ^ %#x", i, flip), bad)
			}
		}
	})
	t.Run("bytes after it", func(t *testing.T) {
		refused(t, "one more byte", append(slices.Clone(good), 0))
		refused(t, "twice", append(slices.Clone(good), good...))
	})
	t.Run("keys after it, checksum fixed", func(t *testing.T) {
		// Valid in every field, with a record past the last shard.
		body := slices.Concat(good[:len(good)-4], make([]byte, 24))
		refused(t, "extra record", withChecksum(body))
	})
	t.Run("key in the wrong shard", func(t *testing.T) {
		// Written with a correct checksum: a reader that took the key
		// would never find it.
		y := New(time.Hour, 1)
		d := DigestOf("misplaced")
		y.shards[d[15]+1].m[d] = 1
		var buf bytes.Buffer
		if _, err := y.write(&buf, testStream); err != nil {
			t.Fatal(err)
		}
		refused(t, "wrong shard", buf.Bytes())
	})
	t.Run("not a snapshot", func(t *testing.T) {
		refused(t, "empty", nil)
		refused(t, "text", []byte(strings.Repeat("hello, world\n", 40)))
		refused(t, "magic only", withChecksum([]byte(snapshotMagic)))
	})
}

// withChecksum appends the checksum a snapshot ends with to body.
func withChecksum(body []byte) []byte {
	return binary.LittleEndian.AppendUint32(slices.Clone(body), crc32.Checksum(body, castagnoli))
}

func TestWriteFile(t *testing.T) {
	t.Run("replaces and leaves no temporary file", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "keys.snap")
		x := New(time.Hour, 1)
		x.Add("a", 1, t0)
		if _, err := x.WriteFile(path, testStream); err != nil {
			t.Fatalf("WriteFile: %v", err)
		}
		x.Add("b", 2, t0.Add(time.Second))
		if _, err := x.WriteFile(path, testStream); err != nil {
			t.Fatalf("second WriteFile: %v", err)
		}
		y, snap, err := ReadFile(path, testStream, time.Hour)
		if err != nil {
			t.Fatalf("ReadFile: %v", err)
		}
		if snap.Keys != 2 || snap.Frontier != 2 {
			t.Fatalf("ReadFile = %+v, want the second snapshot (2 keys, frontier 2)", snap)
		}
		if _, ok := y.Lookup("b"); !ok {
			t.Fatal(`Lookup("b") not found in the second snapshot`)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Name() != "keys.snap" {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Fatalf("directory holds %v, want only keys.snap", names)
		}
	})
	t.Run("stream id length", func(t *testing.T) {
		dir := t.TempDir()
		x := New(time.Hour, 1)
		longest := strings.Repeat("s", maxStreamIDSize)
		path := filepath.Join(dir, "ok.snap")
		if _, err := x.WriteFile(path, longest); err != nil {
			t.Fatalf("WriteFile with a %d-byte stream id: %v", len(longest), err)
		}
		if _, _, err := ReadFile(path, longest, time.Hour); err != nil {
			t.Fatalf("ReadFile with a %d-byte stream id: %v", len(longest), err)
		}
		tooLong := filepath.Join(dir, "long.snap")
		if _, err := x.WriteFile(tooLong, longest+"s"); err == nil {
			t.Fatalf("WriteFile with a %d-byte stream id succeeded", len(longest)+1)
		}
		if _, err := os.Stat(tooLong); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a refused WriteFile left a file: %v", err)
		}
	})
	t.Run("rename fails", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "keys.snap")
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(path, "in-the-way"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		x := New(time.Hour, 1)
		x.Add("a", 1, t0)
		if _, err := x.WriteFile(path, testStream); err == nil {
			t.Fatal("WriteFile over a directory succeeded")
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 {
			t.Fatalf("directory holds %d entries after a failed WriteFile, want only keys.snap/", len(entries))
		}
	})
	t.Run("no directory", func(t *testing.T) {
		x := New(time.Hour, 1)
		if _, err := x.WriteFile(filepath.Join(t.TempDir(), "none", "keys.snap"), testStream); err == nil {
			t.Fatal("WriteFile into a missing directory succeeded")
		}
	})
}

// FuzzReadFile feeds arbitrary files to ReadFile: it must never panic,
// and must return an index or an error, not both; an error that is not
// ErrSnapshot is only for a file it could not open. Each input is also
// tried with a correct checksum, to reach past the check of it. Seeds: a
// snapshot written here and testdata/fuzz/FuzzReadFile.
func FuzzReadFile(f *testing.F) {
	dir := f.TempDir()
	x := New(time.Hour, 1)
	for seq := uint64(1); seq <= 6; seq++ {
		if seq == 4 {
			continue // a gap, with keys above it
		}
		x.Add(key(seq), seq, t0.Add(time.Duration(seq)*time.Second))
	}
	x.Expire(t0.Add(time.Hour + 1500*time.Millisecond))
	path := filepath.Join(dir, "seed.snap")
	if _, err := x.WriteFile(path, testStream); err != nil {
		f.Fatal(err)
	}
	seed, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	// One file per fuzzing process, whose calls run one at a time: a
	// temporary directory per call costs more than ReadFile itself.
	path = filepath.Join(dir, "fuzz.snap")
	f.Fuzz(func(t *testing.T, data []byte) {
		try := func(data []byte) {
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			y, snap, err := ReadFile(path, testStream, time.Hour)
			if err != nil {
				if y != nil || !errors.Is(err, ErrSnapshot) || snap != (Snapshot{}) {
					t.Fatalf("ReadFile = %v, %+v, %v; want nil, zero Snapshot, ErrSnapshot", y, snap, err)
				}
				return
			}
			if y == nil {
				t.Fatal("ReadFile = nil, nil")
			}
			if snap.StreamID != testStream || snap.Horizon < time.Hour || y.Horizon() != time.Hour {
				t.Fatalf("loaded %+v with horizon %v, asked %q for 1h", snap, y.Horizon(), testStream)
			}
			for i := range y.shards {
				for d := range y.shards[i].m {
					if d[15] != byte(i) {
						t.Fatalf("digest %x loaded into shard %d", d, i)
					}
				}
			}
			// Keys counts records; a crafted file may repeat a digest.
			if y.Len() > snap.Keys {
				t.Fatalf("Len() = %d, more than the %d keys read", y.Len(), snap.Keys)
			}
			// What was loaded writes and reads back the same. (write, not
			// WriteFile: its fsyncs would slow the fuzzer to a crawl.)
			var buf bytes.Buffer
			if _, err := y.write(&buf, testStream); err != nil {
				t.Fatalf("write of a loaded index: %v", err)
			}
			if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			z, _, err := ReadFile(path, testStream, time.Hour)
			if err != nil {
				t.Fatalf("ReadFile of a loaded index written again: %v", err)
			}
			if z.Len() != y.Len() || z.Frontier() != y.Frontier() || z.expired.Load() != y.expired.Load() || !slices.Equal(z.marks, y.marks) {
				t.Fatal("a loaded index written and read again differs")
			}
			y.Expire(t0.Add(10 * time.Hour))
			y.Add("k", y.Frontier()+1, t0)
		}
		try(data)
		if len(data) >= 4 {
			try(withChecksum(data[:len(data)-4]))
		}
	})
}
