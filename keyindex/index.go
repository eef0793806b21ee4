// Package keyindex holds the idempotency keys stored in WEBHOOKS within the
// dedup horizon, in the gateway's memory, so that the stream's own
// duplicate window can stay short (dedup.window) while every key stays a
// duplicate for the whole horizon.
//
// The index is derived from the stream, never ahead of it: a key enters it
// only with the stream sequence of its stored event (from the publish's
// ack, or read back from the stream). Its frontier is the sequence up to
// which every stored event's key is known; events above it are still
// covered by the stream's duplicate window, as long as the frontier does
// not fall behind by more than that window (the owner checks Behind).
//
// Keys are held as the first 16 bytes of their SHA-256: a 128-bit digest
// makes a false "duplicate" (a lost event) as unlikely as a SHA-256
// collision, and holds a key in about 40 bytes where the server's
// duplicate map takes 150-180.
package keyindex

import (
	"crypto/sha256"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

const shardCount = 256

// Digest is what the index keeps of a key.
type Digest [16]byte

// DigestOf returns the digest of key.
func DigestOf(key string) Digest {
	sum := sha256.Sum256([]byte(key))
	var d Digest
	copy(d[:], sum[:16])
	return d
}

type shard struct {
	mu sync.RWMutex
	m  map[Digest]uint64 // digest -> stream sequence of the stored event
}

// checkpoint says that the event at Seq was stored at Time (unix ns);
// events before it were stored no later.
type checkpoint struct {
	Seq  uint64
	Time int64
}

// Index is a set of keys with the stream sequence of their event. Safe for
// concurrent use.
type Index struct {
	horizon time.Duration
	shards  [shardCount]shard

	mu       sync.Mutex
	frontier uint64              // every sequence <= frontier is known
	ahead    map[uint64]struct{} // known sequences above the frontier
	stalled  time.Time           // since when ahead was non-empty (zero: not)
	marks    []checkpoint        // ascending in Seq and Time
	// expired: every sequence <= expired is older than the horizon; such
	// entries are not duplicates even before Expire removes them.
	expired atomic.Uint64
}

// New returns an empty index whose keys stay duplicates for horizon after
// their event was stored, and whose frontier is from-1 (the first sequence
// it has to learn is from).
func New(horizon time.Duration, from uint64) *Index {
	x := &Index{horizon: horizon, ahead: map[uint64]struct{}{}}
	if from > 0 {
		x.frontier = from - 1
	}
	for i := range x.shards {
		x.shards[i].m = map[Digest]uint64{}
	}
	return x
}

func (x *Index) shard(d Digest) *shard { return &x.shards[d[15]] }

// Lookup returns the sequence of key's event when it was stored within
// the horizon and is known to the index.
func (x *Index) Lookup(key string) (uint64, bool) {
	return x.LookupDigest(DigestOf(key))
}

// LookupDigest is Lookup by the key's digest.
func (x *Index) LookupDigest(d Digest) (uint64, bool) {
	s := x.shard(d)
	s.mu.RLock()
	seq, ok := s.m[d]
	s.mu.RUnlock()
	if !ok {
		return 0, false
	}
	return seq, seq > x.expired.Load()
}

// Add records that key's event is stored at seq, stored at the time given
// (or earlier). It moves the frontier. With the zero time the key is not
// dated: it expires only with a later event's checkpoint.
func (x *Index) Add(key string, seq uint64, stored time.Time) {
	x.AddDigest(DigestOf(key), seq, stored)
}

// AddDigest is Add by the key's digest.
func (x *Index) AddDigest(d Digest, seq uint64, stored time.Time) {
	x.add(d, seq)
	x.Resolve(seq, stored)
}

func (x *Index) add(d Digest, seq uint64) {
	s := x.shard(d)
	s.mu.Lock()
	if old, ok := s.m[d]; !ok || old < seq {
		// A key stored again after it expired keeps its newest event.
		s.m[d] = seq
	}
	s.mu.Unlock()
}

// Resolve records that the event at seq is known (its key added, or it
// has none: not a keyed event), stored at the time given (zero: unknown).
func (x *Index) Resolve(seq uint64, stored time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !stored.IsZero() {
		x.mark(seq, stored.UnixNano())
	}
	if seq <= x.frontier {
		return
	}
	if seq != x.frontier+1 {
		if len(x.ahead) == 0 {
			x.stalled = time.Now()
		}
		x.ahead[seq] = struct{}{}
		return
	}
	x.advance(seq)
}

// SkipTo records that no event below seq exists beyond those known (they
// aged out, or the stream skipped them): the frontier moves to seq-1.
func (x *Index) SkipTo(seq uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if seq == 0 || seq-1 <= x.frontier {
		return
	}
	for s := range x.ahead {
		if s < seq {
			delete(x.ahead, s)
		}
	}
	x.advance(seq - 1)
}

// advance moves the frontier to seq, then through the known sequences
// right after it; a gap left restarts the stall clock. x.mu held.
func (x *Index) advance(seq uint64) {
	x.frontier = seq
	for {
		if _, ok := x.ahead[x.frontier+1]; !ok {
			break
		}
		delete(x.ahead, x.frontier+1)
		x.frontier++
	}
	if len(x.ahead) == 0 {
		x.stalled = time.Time{}
	} else {
		x.stalled = time.Now()
	}
}

// mark keeps checkpoints at least a second apart, but for the newest,
// which moves forward (under two a second at most); x.mu held.
func (x *Index) mark(seq uint64, at int64) {
	n := len(x.marks)
	if n > 0 {
		last := x.marks[n-1]
		if seq <= last.Seq {
			return
		}
		if at < last.Time {
			at = last.Time // clocks may step back; times stay ascending
		}
		if n > 1 && at-x.marks[n-2].Time < int64(time.Second) {
			x.marks[n-1] = checkpoint{seq, at}
			return
		}
	}
	x.marks = append(x.marks, checkpoint{seq, at})
}

// Frontier returns the sequence up to which every stored event is known.
func (x *Index) Frontier() uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.frontier
}

// Gap returns the first unknown sequence below a known one and since when
// the frontier has waited for it (ok false: no gap).
func (x *Index) Gap() (next uint64, since time.Time, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.ahead) == 0 {
		return 0, time.Time{}, false
	}
	return x.frontier + 1, x.stalled, true
}

// MoveExpiry marks the keys of events stored more than the horizon before
// now as no longer duplicates (Lookup says so at once) and returns the
// sequence up to which they expired. Cheap: Run calls it every tick.
func (x *Index) MoveExpiry(now time.Time) uint64 {
	cut := now.Add(-x.horizon).UnixNano()
	x.mu.Lock()
	defer x.mu.Unlock()
	// The newest checkpoint stored before the cut bounds what expired.
	i := sort.Search(len(x.marks), func(i int) bool { return x.marks[i].Time >= cut })
	if i > 0 {
		if through := x.marks[i-1].Seq; through > x.expired.Load() {
			x.expired.Store(through)
		}
		// Keep the checkpoint at the cut: it still dates what follows.
		x.marks = append(x.marks[:0], x.marks[i-1:]...)
	}
	return x.expired.Load()
}

// Expire moves the expiry (MoveExpiry) and removes the expired keys; it
// returns how many it removed.
func (x *Index) Expire(now time.Time) int {
	through := x.MoveExpiry(now)
	if through == 0 {
		return 0
	}
	removed := 0
	for i := range x.shards {
		s := &x.shards[i]
		s.mu.Lock()
		for d, seq := range s.m {
			if seq <= through {
				delete(s.m, d)
				removed++
			}
		}
		s.mu.Unlock()
	}
	return removed
}

// Len returns how many keys the index holds.
func (x *Index) Len() int {
	n := 0
	for i := range x.shards {
		s := &x.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}

// Horizon returns how long a key stays a duplicate.
func (x *Index) Horizon() time.Duration { return x.horizon }
