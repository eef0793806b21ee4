package jetstream

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookgate/hookgate/keyindex"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// KeyIndexOptions configure OpenKeyIndex.
type KeyIndexOptions struct {
	// Path of the snapshot file (in the embedded server's data_dir).
	Path string
	// Horizon: how long a key stays a duplicate.
	Horizon time.Duration
	// Window is WEBHOOKS's own duplicate window (dedup.window): it covers
	// the events the index has not learnt yet. When the index falls
	// behind the stream by half of it, new events are refused (503)
	// until it caught up.
	Window time.Duration
	// SnapshotEvery: the least time between two snapshots Run writes (0:
	// 2 minutes). A restart after a crash reads back what came after the
	// last one.
	SnapshotEvery time.Duration
	// SnapshotAfter: Run writes a snapshot once this many events were
	// stored since the last one (0: 50 000, about a second of reading back
	// at a restart after a crash), or a sixteenth of the keys held if
	// fewer: a snapshot rewrites every key (24 bytes each), so a large
	// index is not rewritten every SnapshotEvery for a few new keys.
	SnapshotAfter uint64
	// StreamLastSeq, when set, is WEBHOOKS's last sequence as found before
	// anything was published through this process (serve reads it before
	// listening: an upgrade takes webhooks while the index opens). A
	// snapshot knowing more events than that is not used, though new
	// events may since have reused the sequences the stream lost.
	StreamLastSeq *uint64
	Log           *slog.Logger
}

// KeyIndex keeps the keys of WEBHOOKS's events within the dedup horizon in
// memory (keyindex.Index), in step with the stream, and saves it to a
// snapshot file so that a restart reads back only what came after it.
// With it, WEBHOOKS's own duplicate window can be dedup.window instead of
// the horizon: the server's map of message ids is rebuilt at every start
// by reading each message inside its window (about 60 s at 10 M events),
// and costs 150-180 bytes per key; the index loads from its snapshot and
// costs about 40.
//
// Used on the embedded server, whose single serve process (the data_dir
// lock) is WEBHOOKS's only writer; events written by anyone else are read
// back from the stream like events whose ack was lost.
//
// Safe for concurrent use.
type KeyIndex struct {
	c        *Conn
	o        KeyIndexOptions
	idx      *keyindex.Index
	streamID string
	// tick: how often Run looks at the stream, and how long an event the
	// stream has may stay unknown before it is read back; a sixteenth of
	// the window, within 50 ms to 1 s.
	tick time.Duration

	mu      sync.Mutex
	saved   uint64    // frontier of the last snapshot
	savedAt time.Time // when it was written
	// clearAt: every event stored before it is known (the index had
	// caught up with what the stream held then). The lag is measured from
	// it, whatever Run is doing: a look at the stream that hangs or fails,
	// a slow read-back, Run not running, all count.
	clearAt  time.Time
	target   uint64 // the stream's last sequence at targetAt, not yet all known
	targetAt time.Time
	running  atomic.Bool // Run is running (it must not run twice)
	chores   sync.WaitGroup
	busy     atomic.Bool // a snapshot or sweep is under way
}

// KeyIndexStats says what the index holds.
type KeyIndexStats struct {
	Keys     int
	Frontier uint64
	// Behind: how long since the index last knew every stored event (a
	// tick or two while it keeps up), or since a gap in what it saw
	// opened, if longer.
	Behind time.Duration
}

const keyIndexStreamIDLayout = time.RFC3339Nano

// OpenKeyIndex loads the snapshot at o.Path (or, without a usable one,
// reads every WEBHOOKS event stored within the horizon) and reads back
// the events stored after it. It returns once the index knows every event
// the stream held when it was called. Errors: ErrUnavailable (wrapped)
// when WEBHOOKS cannot be read.
func OpenKeyIndex(ctx context.Context, c *Conn, o KeyIndexOptions) (*KeyIndex, error) {
	if o.SnapshotEvery <= 0 {
		o.SnapshotEvery = 2 * time.Minute
	}
	if o.SnapshotAfter == 0 {
		o.SnapshotAfter = defaultSnapshotAfter
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	s, err := c.JS.Stream(ctx, StreamWebhooks)
	if err != nil {
		return nil, classify("stream "+StreamWebhooks, err)
	}
	info := s.CachedInfo()
	k := &KeyIndex{c: c, o: o, streamID: info.Created.UTC().Format(keyIndexStreamIDLayout)}
	k.tick = min(max(o.Window/16, 50*time.Millisecond), time.Second)
	// A snapshot interrupted by a crash leaves its temporary file.
	stale, _ := filepath.Glob(o.Path + ".tmp*")
	for _, f := range stale {
		_ = os.Remove(f)
	}
	start := time.Now()
	k.clearAt = start
	held := info.State.LastSeq
	if o.StreamLastSeq != nil {
		held = min(held, *o.StreamLastSeq)
	}
	idx, snap, err := keyindex.ReadFile(o.Path, k.streamID, o.Horizon)
	if err == nil && snap.Frontier > held {
		// The stream lost its unsynced tail (a power loss with sync:
		// interval) or was restored from an older copy: the snapshot
		// knows events it no longer holds.
		err = fmt.Errorf("%w: it knows events up to %d, %s held up to %d", keyindex.ErrSnapshot, snap.Frontier, StreamWebhooks, held)
	}
	switch {
	case err == nil:
		k.idx, k.saved, k.savedAt = idx, snap.Frontier, time.Now()
		k.o.Log.Info("key index snapshot loaded", slog.Int("keys", snap.Keys), slog.Uint64("seq", snap.Frontier),
			slog.Duration("took", time.Since(start)))
	case errors.Is(err, fs.ErrNotExist):
		k.o.Log.Info("no key index snapshot: reading the keys of WEBHOOKS's events within the horizon", slog.Duration("horizon", o.Horizon))
	default:
		k.o.Log.Warn("key index snapshot not used: reading the keys of WEBHOOKS's events within the horizon", slog.String("error", err.Error()))
	}
	read, err := k.catchUp(ctx, true)
	if err != nil {
		if read > 0 {
			// A stop (or the stream's trouble) while reading: what was read
			// is known up to the frontier, and the next start goes on
			// from there.
			k.saveProgress(read, 0)
		}
		return nil, err
	}
	// The horizon applies from the first lookup on, not from Run's first
	// sweep: after a long stop a snapshot's keys may all be past it.
	k.idx.Expire(time.Now())
	// What came while it read: the lag counts from now on only if the
	// stream holds nothing more.
	if err := k.confirm(ctx); err != nil {
		if read > 0 {
			k.saveProgress(read, 0)
		}
		return nil, err
	}
	k.o.Log.Info("key index ready", slog.Int("keys", k.idx.Len()), slog.Int("read_back", read),
		slog.Uint64("seq", k.idx.Frontier()), slog.Duration("took", time.Since(start)))
	if k.saved == 0 || read > 0 {
		// A full read is not to be repeated after a crash.
		if err := k.Snapshot(); err != nil {
			k.o.Log.Warn("key index snapshot", slog.String("error", err.Error()))
		}
	}
	return k, nil
}

// catchUp reads the keys of the events after the frontier (for a new
// index: of those stored within the horizon) up to the stream's last one
// when called. With save (the read before the index is open, up to
// 210 s at 10 M keys) it saves what it read every SnapshotEvery, so a
// crash meanwhile does not start it over (OpenKeyIndex saves it when the
// read stops early).
func (k *KeyIndex) catchUp(ctx context.Context, save bool) (int, error) {
	s, err := k.c.JS.Stream(ctx, StreamWebhooks)
	if err != nil {
		return 0, classify("stream "+StreamWebhooks, err)
	}
	state := s.CachedInfo().State
	last := state.LastSeq
	if k.idx == nil {
		// Where the horizon starts, asked of the stream itself: a read
		// that brings nothing may only be slow.
		from := last + 1
		if state.Msgs > 0 {
			seq, _, found, err := firstSeqSince(ctx, k.c, StreamWebhooks, time.Now().Add(-k.o.Horizon))
			if err != nil {
				return 0, err
			}
			if found {
				from = seq
			}
		}
		k.idx = keyindex.New(k.o.Horizon, from)
	}
	if state.FirstSeq > k.idx.Frontier()+1 {
		// What lay between aged out of the stream (max_age) while
		// hookgate was down.
		k.idx.SkipTo(state.FirstSeq)
	}
	if k.idx.Frontier() >= last {
		return 0, nil
	}
	// Headers only, with a seqReader: an event stored with a `Status`
	// request header reads back as a status message through nats.go's
	// fetch, which stopped the read-back at it for good.
	rd := newSeqReader(k.c, StreamWebhooks, js.ConsumerConfig{
		HeadersOnly: true, InactiveThreshold: 10 * time.Second,
		DeliverPolicy: js.DeliverByStartSequencePolicy, OptStartSeq: k.idx.Frontier() + 1,
	}, readBackStall)
	defer rd.close()
	read := 0
	next := time.Now().Add(10 * time.Second)
	saved := time.Now()
	for k.idx.Frontier() < last {
		msgs, done, err := rd.batch(ctx, int(min(4096, last-k.idx.Frontier())))
		if err != nil {
			if ctx.Err() != nil {
				return read, ctx.Err()
			}
			return read, fmt.Errorf("reading %s back at %d of %d: %w", StreamWebhooks, k.idx.Frontier(), last, err)
		}
		if done {
			// What was left was removed (aged out) while it read.
			k.idx.SkipTo(last + 1)
			break
		}
		for _, m := range msgs {
			seq := m.Meta.Sequence.Stream
			// The consumer delivers in stream order: a sequence it skipped
			// does not exist (aged out while it read).
			k.idx.SkipTo(seq)
			if key := m.Header.Get(nats.MsgIdHdr); key != "" {
				k.idx.Add(key, seq, m.Meta.Timestamp)
			} else {
				k.idx.Resolve(seq, m.Meta.Timestamp)
			}
			read++
		}
		if time.Now().After(next) {
			k.o.Log.Info("key index: reading back", slog.Int("read", read), slog.Uint64("seq", k.idx.Frontier()), slog.Uint64("last", last))
			next = time.Now().Add(10 * time.Second)
		}
		if err := ctx.Err(); err != nil {
			return read, err
		}
		if save && time.Since(saved) >= k.o.SnapshotEvery {
			k.saveProgress(read, last)
			saved = time.Now()
		}
	}
	return read, nil
}

// readBackStall is how long catchUp waits for a message it knows is
// pending before it gives up (the server stopped answering).
const readBackStall = 30 * time.Second

// Run keeps the index in step until ctx ends: events stored but not yet
// known a tick (a sixteenth of the window, at most a second) after the
// stream had them (an ack lost to a timeout, a
// write by another client) are read back; keys past the horizon are
// dropped; a snapshot is written when enough events were stored since the
// last one (snapshotDue), at most every SnapshotEvery.
// It returns nil when ctx ends; a failed read or snapshot is logged and
// tried again.
func (k *KeyIndex) Run(ctx context.Context) error {
	if !k.running.CompareAndSwap(false, true) {
		return errors.New("key index: Run is already running")
	}
	defer k.running.Store(false)
	defer k.chores.Wait()
	tick := time.NewTicker(k.tick)
	defer tick.Stop()
	lastExpire := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if err := k.keepUp(ctx); err != nil && ctx.Err() == nil {
			k.o.Log.Warn("key index: reading back WEBHOOKS", slog.String("error", err.Error()))
		}
		k.idx.MoveExpiry(time.Now())
		k.mu.Lock()
		snapshot := time.Since(k.savedAt) >= k.o.SnapshotEvery &&
			snapshotDue(k.idx.Len(), k.idx.Frontier()-min(k.saved, k.idx.Frontier()), k.o.SnapshotAfter)
		k.mu.Unlock()
		sweep := time.Since(lastExpire) >= time.Minute
		if (snapshot || sweep) && k.busy.CompareAndSwap(false, true) {
			if sweep {
				lastExpire = time.Now()
			}
			// Off the ticking goroutine: at 10 M keys a snapshot takes
			// about a second, and the lag clock would count it.
			k.chores.Go(func() {
				defer k.busy.Store(false)
				if sweep {
					if n := k.idx.Expire(time.Now()); n > 0 {
						k.o.Log.Debug("key index: keys past the horizon dropped", slog.Int("keys", n))
					}
				}
				if snapshot {
					if err := k.Snapshot(); err != nil {
						// Tried again after SnapshotEvery, not every tick:
						// each try rewrites every key.
						k.mu.Lock()
						k.savedAt = time.Now()
						k.mu.Unlock()
						k.o.Log.Warn("key index snapshot", slog.String("error", err.Error()),
							slog.Duration("next_try_in", k.o.SnapshotEvery))
					}
				}
			})
		}
	}
}

// defaultSnapshotAfter is KeyIndexOptions.SnapshotAfter's default: about a
// second of reading back (47 000 keys a second measured at 10 M keys).
const defaultSnapshotAfter = 50_000

// snapshotDue reports whether a snapshot is worth writing for an index of
// keys keys, fresh events stored since the last one: when reading them
// back at a restart would take longer than after events (a second by
// default), or when they are a sixteenth of the keys or more, so that
// rewriting every key costs at most 16 times the new ones. A small index
// is saved whenever anything is new; at 10 M keys and 100 new events a
// second, every 500 s instead of every SnapshotEvery.
func snapshotDue(keys int, fresh, after uint64) bool {
	return fresh > 0 && (fresh >= after || fresh >= uint64(keys)/16)
}

// keepUp reads back the events the stream has had for a tick that the
// index does not know yet, then notes the stream's last sequence.
func (k *KeyIndex) keepUp(ctx context.Context) error {
	f := k.idx.Frontier()
	k.mu.Lock()
	if k.target != 0 && f >= k.target {
		k.clearAt, k.target = k.targetAt, 0
	}
	target, at := k.target, k.targetAt
	k.mu.Unlock()
	_, gapSince, gap := k.idx.Gap()
	switch {
	case (target != 0 && time.Since(at) >= k.tick) || (gap && time.Since(gapSince) >= k.tick):
		began := time.Now()
		if _, err := k.catchUp(ctx, false); err != nil {
			return err
		}
		k.mu.Lock()
		// It read up to the stream's last sequence as of its start.
		k.clearAt, k.target = began, 0
		k.mu.Unlock()
	case target != 0:
		return nil // the acks of the target's events may still come
	}
	return k.confirm(ctx)
}

// confirm asks the stream for its last sequence: when the index knows it
// all, every event stored before the question is known (clearAt); else it
// becomes the target the next ticks wait for.
func (k *KeyIndex) confirm(ctx context.Context) error {
	asked := time.Now()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := k.c.JS.Stream(rctx, StreamWebhooks)
	if err != nil {
		return classify("stream "+StreamWebhooks, err)
	}
	last := s.CachedInfo().State.LastSeq
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case last <= k.idx.Frontier():
		if asked.After(k.clearAt) {
			k.clearAt = asked
		}
	case k.target == 0:
		k.target, k.targetAt = last, asked
	}
	return nil
}

// saveProgress saves a read-back under way (last: the sequence it reads
// to, 0 if not known).
func (k *KeyIndex) saveProgress(read int, last uint64) {
	if err := k.Snapshot(); err != nil {
		k.o.Log.Warn("key index snapshot", slog.String("error", err.Error()))
		return
	}
	k.o.Log.Info("key index: what was read back is saved", slog.Int("read", read), slog.Uint64("seq", k.idx.Frontier()), slog.Uint64("last", last))
}

// Snapshot writes the index to its file now.
func (k *KeyIndex) Snapshot() error {
	snap, err := k.idx.WriteFile(k.o.Path, k.streamID)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.saved, k.savedAt = snap.Frontier, time.Now()
	k.mu.Unlock()
	return nil
}

// Close writes a last snapshot, so that the next start reads nothing back.
// Call it once the gateway stopped publishing.
func (k *KeyIndex) Close() error {
	return k.Snapshot()
}

// Stats returns what the index holds.
func (k *KeyIndex) Stats() KeyIndexStats {
	return KeyIndexStats{Keys: k.idx.Len(), Frontier: k.idx.Frontier(), Behind: k.behind()}
}

// behind returns how long an event stored in WEBHOOKS may have waited to
// be known to the index: since the last moment it knew every stored event
// (Run moves that moment about every tick; under load it trails by one or
// two), or since a gap in the sequences it saw opened, if longer.
func (k *KeyIndex) behind() time.Duration {
	k.mu.Lock()
	d := time.Since(k.clearAt)
	k.mu.Unlock()
	if _, since, ok := k.idx.Gap(); ok {
		d = max(d, time.Since(since))
	}
	return d
}

// indexBehind is KeyIndexPublisher's refusal while the index has not caught
// up with WEBHOOKS: ErrUnavailable to callers (a 503 the sender retries),
// but read by an operator it does not say JetStream is away, which it
// need not be (the cosmetic list of stop 41's operations audit: "jetstream
// unavailable: the key index has been behind WEBHOOKS", logged at error
// through a read-back while JetStream answered).
type indexBehind struct{ lag time.Duration }

func (e indexBehind) Error() string {
	return fmt.Sprintf("key index not caught up: it has been behind %s for %s (reading back stored events, or JetStream not answering its reads)", StreamWebhooks, e.lag.Round(time.Millisecond))
}

func (indexBehind) Is(target error) bool { return target == ErrUnavailable }

// KeyIndexPublisher answers a key the index knows as a duplicate without a
// write, and publishes the others through Publisher, whose duplicate
// window covers the events the index has not learnt yet.
type KeyIndexPublisher struct {
	pub *Publisher
	k   *KeyIndex
}

// Publisher returns a publisher that consults the index first.
func (k *KeyIndex) Publisher(p *Publisher) *KeyIndexPublisher {
	return &KeyIndexPublisher{pub: p, k: k}
}

// Known reports whether the index knows key as stored (its event is in
// WEBHOOKS). False says only that the index does not know it (yet).
func (p *KeyIndexPublisher) Known(key string) bool {
	_, ok := p.k.idx.LookupDigest(keyindex.DigestOf(key))
	return ok
}

// Publish is Publisher.Publish with the index in front. It returns
// ErrUnavailable (wrapped) without publishing when the index has fallen
// behind the stream by half of its duplicate window: a key stored that
// long ago and not yet known might be stored again.
func (p *KeyIndexPublisher) Publish(ctx context.Context, m Message) (PublishResult, error) {
	d := keyindex.DigestOf(m.Key)
	// A key found is always right (its event is stored), even while the
	// index lags.
	if seq, ok := p.k.idx.LookupDigest(d); ok {
		return PublishResult{Duplicate: true, Seq: seq}, nil
	}
	// An event is seen missing up to a tick after it was stored.
	limit := max(p.k.o.Window/2-p.k.tick, p.k.tick)
	if b := p.k.behind(); b > limit {
		return PublishResult{}, indexBehind{b}
	}
	// Look again: the lag was checked after the first look, and a
	// read-back that ended between the two (and moved the lag clock) may
	// have brought this key. Every event stored before the lag limit is
	// known by now.
	if seq, ok := p.k.idx.LookupDigest(d); ok {
		return PublishResult{Duplicate: true, Seq: seq}, nil
	}
	// The publisher retries an attempt whose answer did not come with the
	// same Nats-Msg-Id: safe only while the stream's window still holds
	// the first attempt's write. Past that, 503: the sender retries later,
	// when the index has read the write back if it landed.
	if end := time.Now().Add(limit); m.Deadline.IsZero() || m.Deadline.After(end) {
		m.Deadline = end
	}
	res, err := p.pub.Publish(ctx, m)
	// A duplicate answer (the write of an earlier attempt whose answer was
	// lost) is not added: its event's store time is not known here, and an
	// undated key would outlive the horizon. Run reads that event back
	// within a tick, dated; until then a repeat asks the stream again.
	if err == nil && !res.Duplicate {
		p.k.idx.AddDigest(d, res.Seq, time.Now())
	}
	return res, err
}
