package keyindex

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"time"
)

// ErrSnapshot marks a snapshot that cannot be used (damaged, of another
// stream, or for a shorter horizon): the owner rebuilds the index from the
// stream instead.
var ErrSnapshot = errors.New("key index snapshot unusable")

const (
	snapshotMagic   = "HGKEYIX1"
	maxStreamIDSize = 256
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Snapshot is what a snapshot file says besides its keys.
type Snapshot struct {
	// StreamID names the stream the index was built from (its creation
	// time, say): a snapshot of another stream is refused.
	StreamID string
	Horizon  time.Duration
	Frontier uint64
	Keys     int
}

// WriteFile writes the index to path atomically (a temporary file, synced,
// then renamed) and returns what it wrote. Every event up to the frontier
// read before the keys are copied is in the file; adds during the write go
// on (the file may hold some beyond it).
func (x *Index) WriteFile(path, streamID string) (Snapshot, error) {
	if len(streamID) > maxStreamIDSize {
		return Snapshot{}, fmt.Errorf("key index snapshot: stream id of %d bytes", len(streamID))
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return Snapshot{}, err
	}
	defer os.Remove(tmp.Name()) // after the rename: a no-op
	snap, err := x.write(tmp, streamID)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("key index snapshot %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return Snapshot{}, fmt.Errorf("key index snapshot: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return snap, nil
}

func (x *Index) write(f io.Writer, streamID string) (Snapshot, error) {
	crc := crc32.New(castagnoli)
	w := bufio.NewWriterSize(io.MultiWriter(f, crc), 1<<20)
	x.mu.Lock()
	snap := Snapshot{StreamID: streamID, Horizon: x.horizon, Frontier: x.frontier}
	marks := append([]checkpoint(nil), x.marks...)
	expired := x.expired.Load()
	x.mu.Unlock()
	var b [binary.MaxVarintLen64]byte
	u := func(v uint64) { _, _ = w.Write(b[:binary.PutUvarint(b[:], v)]) }
	_, _ = w.WriteString(snapshotMagic)
	u(uint64(len(streamID)))
	_, _ = w.WriteString(streamID)
	u(uint64(snap.Horizon))
	u(snap.Frontier)
	u(expired)
	u(uint64(len(marks)))
	for _, m := range marks {
		u(m.Seq)
		u(uint64(m.Time))
	}
	// Each shard: its count, then digest and sequence per key.
	for i := range x.shards {
		s := &x.shards[i]
		var rec [24]byte
		s.mu.RLock()
		u(uint64(len(s.m)))
		for d, seq := range s.m {
			copy(rec[:16], d[:])
			binary.LittleEndian.PutUint64(rec[16:], seq)
			_, _ = w.Write(rec[:])
		}
		snap.Keys += len(s.m)
		s.mu.RUnlock()
	}
	if err := w.Flush(); err != nil {
		return Snapshot{}, err
	}
	var sum [4]byte
	binary.LittleEndian.PutUint32(sum[:], crc.Sum32())
	if _, err := f.Write(sum[:]); err != nil {
		return Snapshot{}, err
	}
	return snap, nil
}

// ReadFile loads an index from a snapshot at path. streamID must match the
// one it was written with, and its horizon must cover the one asked for
// (a longer horizon needs keys it dropped). Keys of events above the
// snapshot's frontier are not loaded. It returns os.ErrNotExist
// (wrapped) when there is no file, ErrSnapshot (wrapped) when it cannot be
// used.
func ReadFile(path, streamID string, horizon time.Duration) (*Index, Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, Snapshot{}, fmt.Errorf("key index snapshot: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, Snapshot{}, err
	}
	switch {
	case info.IsDir():
		return nil, Snapshot{}, fmt.Errorf("%w: %s is a directory (remove it: snapshots cannot be written either)", ErrSnapshot, path)
	case !info.Mode().IsRegular():
		return nil, Snapshot{}, fmt.Errorf("%w: %s is not a regular file", ErrSnapshot, path)
	}
	if info.Size() < int64(len(snapshotMagic))+4 {
		return nil, Snapshot{}, fmt.Errorf("%w: %s is %d bytes", ErrSnapshot, path, info.Size())
	}
	crc := crc32.New(castagnoli)
	r := &countingReader{r: bufio.NewReaderSize(io.TeeReader(io.LimitReader(f, info.Size()-4), crc), 1<<20)}
	x, snap, err := read(r, info.Size()-4, streamID, horizon)
	if err != nil {
		return nil, Snapshot{}, fmt.Errorf("%w: %s: %w", ErrSnapshot, path, err)
	}
	if r.n != info.Size()-4 {
		return nil, Snapshot{}, fmt.Errorf("%w: %s: %d bytes after the keys", ErrSnapshot, path, info.Size()-4-r.n)
	}
	var sum [4]byte
	if _, err := io.ReadFull(f, sum[:]); err != nil {
		return nil, Snapshot{}, fmt.Errorf("%w: %s: %w", ErrSnapshot, path, err)
	}
	if binary.LittleEndian.Uint32(sum[:]) != crc.Sum32() {
		return nil, Snapshot{}, fmt.Errorf("%w: %s: checksum mismatch", ErrSnapshot, path)
	}
	return x, snap, nil
}

type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

func read(r *countingReader, size int64, streamID string, horizon time.Duration) (*Index, Snapshot, error) {
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(r, magic); err != nil {
		return nil, Snapshot{}, err
	}
	if string(magic) != snapshotMagic {
		return nil, Snapshot{}, errors.New("not a key index snapshot")
	}
	var err error
	u := func() uint64 {
		if err != nil {
			return 0
		}
		var v uint64
		v, err = binary.ReadUvarint(r)
		return v
	}
	idLen := u()
	if err != nil || idLen > maxStreamIDSize {
		return nil, Snapshot{}, fmt.Errorf("bad stream id length (%v)", err)
	}
	id := make([]byte, idLen)
	if _, err := io.ReadFull(r, id); err != nil {
		return nil, Snapshot{}, err
	}
	snap := Snapshot{StreamID: string(id)}
	if snap.StreamID != streamID {
		return nil, Snapshot{}, fmt.Errorf("written for stream %q, not %q (the stream was recreated)", snap.StreamID, streamID)
	}
	snap.Horizon = time.Duration(u())
	snap.Frontier = u()
	expired := u()
	nmarks := u()
	if err != nil {
		return nil, Snapshot{}, err
	}
	if snap.Horizon < horizon {
		return nil, Snapshot{}, fmt.Errorf("written for a horizon of %s, shorter than %s", snap.Horizon, horizon)
	}
	if nmarks > uint64(size-r.n)/2 {
		return nil, Snapshot{}, fmt.Errorf("%d checkpoints", nmarks)
	}
	x := New(horizon, 0)
	x.frontier = snap.Frontier
	x.marks = make([]checkpoint, 0, nmarks)
	for range nmarks {
		c := checkpoint{Seq: u(), Time: int64(u())}
		if n := len(x.marks); n > 0 && (c.Seq <= x.marks[n-1].Seq || c.Time < x.marks[n-1].Time) {
			return nil, Snapshot{}, errors.New("checkpoints out of order")
		}
		// Like keys, checkpoints above the frontier are left out: the
		// stream may have lost those events, and would date new ones
		// by them (too early). The first one still dates the events up
		// to the frontier that no earlier checkpoint covers (its time is
		// at or after theirs): it is kept at the frontier, else those
		// keys would expire only with a later event.
		n := len(x.marks)
		switch {
		case c.Seq <= snap.Frontier:
			x.marks = append(x.marks, c)
		case snap.Frontier > 0 && (n == 0 || x.marks[n-1].Seq < snap.Frontier):
			x.marks = append(x.marks, checkpoint{Seq: snap.Frontier, Time: c.Time})
		}
	}
	x.expired.Store(min(expired, snap.Frontier))
	if err != nil {
		return nil, Snapshot{}, err
	}
	var rec [24]byte
	for i := range x.shards {
		n := u()
		if err != nil {
			return nil, Snapshot{}, err
		}
		if n > uint64(size-r.n)/24 {
			return nil, Snapshot{}, fmt.Errorf("a shard of %d keys in %d bytes left", n, size-r.n)
		}
		m := make(map[Digest]uint64, n)
		for range n {
			if _, err := io.ReadFull(r, rec[:]); err != nil {
				return nil, Snapshot{}, fmt.Errorf("keys cut short: %w", err)
			}
			var d Digest
			copy(d[:], rec[:16])
			if byte(i) != d[15] {
				return nil, Snapshot{}, errors.New("a key in the wrong shard")
			}
			// Keys above the frontier are left out: their events may be
			// lost with the stream's unsynced tail (a power loss), and
			// the owner reads back what the stream holds past the
			// frontier anyway.
			if seq := binary.LittleEndian.Uint64(rec[16:]); seq <= snap.Frontier {
				m[d] = seq
			}
		}
		x.shards[i].m = m
		snap.Keys += len(m)
	}
	return x, snap, nil
}
