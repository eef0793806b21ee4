package jetstream

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// copyTree copies the regular files under src to dst (dst must not exist).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
}

// The snapshot is fsynced (tmp, Sync, rename, dir sync) but with
// nats.embedded.sync: interval (the default) the stream's file store is
// fsynced only every 2 minutes: after a power loss the snapshot can hold
// events the stream lost (the same happens when data_dir is restored from a
// live file-level backup that copied the snapshot after jetstream/). Such a
// snapshot must not make the index answer "duplicate" for a key whose event
// is not in WEBHOOKS (promise 3): the sender's retry of it would be dropped.
// Here the stream's store is put back to a state before the last event, the
// snapshot (frontier past the stream's last sequence) is kept.
func TestReviewKeyIndexDoesNotTrustASnapshotAheadOfTheStream(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "jetstream")
	backup := filepath.Join(t.TempDir(), "jetstream")

	e, c := startEmbedded(t, dir, keyIndexStreams())
	k := openTestKeyIndex(t, c, dir)
	if _, err := k.Publisher(NewPublisher(c, 5*time.Second)).Publish(t.Context(), keyMsg("p:a:evt:kept")); err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	e.Shutdown()
	copyTree(t, store, backup) // the stream as the disk last had it

	e, c = startEmbedded(t, dir, keyIndexStreams())
	k = openTestKeyIndex(t, c, dir)
	lost, err := k.Publisher(NewPublisher(c, 5*time.Second)).Publish(t.Context(), keyMsg("p:a:evt:lost"))
	if err != nil || lost.Duplicate {
		t.Fatalf("publish: %+v, %v", lost, err)
	}
	if err := k.Close(); err != nil { // the snapshot now holds p:a:evt:lost
		t.Fatal(err)
	}
	c.Close()
	e.Shutdown()

	// Power loss: the stream's unsynced tail (p:a:evt:lost) is gone, the
	// fsynced snapshot is not.
	if err := os.RemoveAll(store); err != nil {
		t.Fatal(err)
	}
	copyTree(t, backup, store)

	e, c = startEmbedded(t, dir, keyIndexStreams())
	defer e.Shutdown()
	defer c.Close()
	if _, err := GetMsg(t.Context(), c, StreamWebhooks, lost.Seq); err == nil {
		t.Fatalf("setup: seq %d still stored", lost.Seq)
	}
	k = openTestKeyIndex(t, c, dir)
	before := webhooksMsgs(t, c)
	again, err := k.Publisher(NewPublisher(c, 5*time.Second)).Publish(t.Context(), keyMsg("p:a:evt:lost"))
	if err != nil {
		t.Fatal(err)
	}
	if again.Duplicate {
		t.Fatalf("the sender's retry of an event WEBHOOKS does not hold was answered duplicate of seq %d (WEBHOOKS holds %d messages, last frontier in the snapshot %d): the event is lost",
			again.Seq, before, k.Stats().Frontier)
	}
}

// A key index whose snapshot was written before some events (a kill -9
// less than SnapshotEvery after them), reopened after those events aged
// out of WEBHOOKS (hookgate down longer than retention.webhooks.max_age),
// finds no message above its frontier while the stream's last sequence is
// above it. OpenKeyIndex must skip to the stream's end; it refuses instead,
// and since the snapshot stays, serve can never start again without an
// operator deleting the file.
func TestReviewKeyIndexOpensWhenTheEventsAfterItsSnapshotAgedOut(t *testing.T) {
	dir := t.TempDir()
	sc := keyIndexStreams()
	sc.Webhooks.MaxAge = 2 * time.Second // max_age >= horizon, as config check requires
	const horizon = time.Second
	open := func(c *Conn) (*KeyIndex, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		return OpenKeyIndex(ctx, c, KeyIndexOptions{Path: filepath.Join(dir, "keys.idx"), Horizon: horizon, Window: keyIndexWindow})
	}
	e, c := startEmbedded(t, dir, sc)
	if _, err := open(c); err != nil { // writes the snapshot (frontier 0)
		t.Fatal(err)
	}
	plain := NewPublisher(c, 5*time.Second)
	for _, key := range []string{"p:a:evt:1", "p:a:evt:2", "p:a:evt:3"} {
		// Through the plain publisher: as if hookgate was killed before
		// its next snapshot (the index is never closed).
		if _, err := plain.Publish(t.Context(), keyMsg(key)); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	e.Shutdown() // kill -9: no snapshot

	e, c = startEmbedded(t, dir, sc)
	defer e.Shutdown()
	defer c.Close()
	waitAgedOut(t, c)
	k, err := open(c)
	if err != nil {
		t.Fatalf("open after the events aged out: %v (ErrUnavailable: %t)", err, errors.Is(err, ErrUnavailable))
	}
	if got := k.Stats().Frontier; got != 3 {
		t.Fatalf("frontier %d, want 3", got)
	}
}

// Keys of a snapshot that are past the horizon at the next start must not
// be duplicates: with retention.webhooks.max_age = dedup.horizon (allowed
// by config check) their events are gone, and a "duplicate" answer for a
// key whose event is not stored drops the delivery (promise 3). The index
// applies the horizon only in Run, a minute after the start.
func TestReviewKeyIndexAppliesTheHorizonToASnapshotAtOpen(t *testing.T) {
	dir := t.TempDir()
	sc := keyIndexStreams()
	const horizon = 2 * time.Second
	sc.Webhooks.MaxAge = horizon
	open := func(c *Conn) *KeyIndex {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		k, err := OpenKeyIndex(ctx, c, KeyIndexOptions{Path: filepath.Join(dir, "keys.idx"), Horizon: horizon, Window: keyIndexWindow})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	e, c := startEmbedded(t, dir, sc)
	k := open(c)
	first, err := k.Publisher(NewPublisher(c, 5*time.Second)).Publish(t.Context(), keyMsg("p:a:evt:old"))
	if err != nil || first.Duplicate {
		t.Fatalf("publish: %+v, %v", first, err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	e.Shutdown() // a clean stop; hookgate stays down longer than the horizon

	e, c = startEmbedded(t, dir, sc)
	defer e.Shutdown()
	defer c.Close()
	waitAgedOut(t, c)
	k = open(c)
	runKeyIndex(t, k)
	res, err := k.Publisher(NewPublisher(c, 5*time.Second)).Publish(t.Context(), keyMsg("p:a:evt:old"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Duplicate {
		t.Fatalf("a key stored more than the horizon ago, whose event WEBHOOKS no longer holds, was answered duplicate of seq %d", res.Seq)
	}
}

// Rolling back to the release before the key index (embedded, no index,
// WEBHOOKS's window = the horizon): its first start recovers WEBHOOKS with
// the short window this release left, so the server rebuilds only that
// window's ids, then Provision widens the window to the horizon, which
// does not re-read the stream: until that process restarts, a key stored
// more than dedup.window ago is stored again. The README tells operators
// to restart it once more at once; this checks that the second start
// knows the keys again (the review's test showed the first one does not).
func TestRollbackToTheHorizonWindowKnowsKeysAfterASecondStart(t *testing.T) {
	dir := t.TempDir()
	e, c := startEmbedded(t, dir, keyIndexStreams())
	k := openTestKeyIndex(t, c, dir)
	plain := NewPublisher(c, 5*time.Second)
	storeOutlastingTheWindow(t, plain, k.Publisher(plain), keyMsg("p:a:evt:1"))
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	e.Shutdown()

	// The previous release: StartEmbedded, then its Provision, which knew
	// no key-index mark and widened the window to the horizon, then the
	// plain publisher.
	old := testStreams()
	e, c = startEmbedded(t, dir, keyIndexStreams())
	st, err := c.JS.Stream(t.Context(), StreamWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.Duplicates, cfg.Metadata = old.Horizon, nil
	if _, err := c.JS.UpdateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	c.Close()
	e.Shutdown()
	e, c = startEmbedded(t, dir, old) // the restart the README asks for
	defer e.Shutdown()
	defer c.Close()
	before := webhooksMsgs(t, c)
	res, err := NewPublisher(c, 5*time.Second).Publish(t.Context(), keyMsg("p:a:evt:1"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Duplicate {
		t.Fatalf("after a rollback and a restart the key was stored again at seq %d (WEBHOOKS %d -> %d messages)", res.Seq, before, webhooksMsgs(t, c))
	}
}

// With the key index, WEBHOOKS's duplicate window is dedup.window, which
// config check accepts down to 1 s, while the Publisher's own retries of a
// timed-out attempt (same Nats-Msg-Id, "retrying is safe because the same
// Nats-Msg-Id makes the second attempt a duplicate") run for up to the
// gateway's publish limit (10 s) with a 5 s attempt timeout. The index is
// asked once, before the first attempt: a retry sent after the window,
// of an attempt that was stored but answered late, is stored again.
// Scaled down here: window 1 s, attempt timeout 1.5 s, ack 3 s late.
func TestReviewKeyIndexPublisherRetryAfterTheWindowStoresOnce(t *testing.T) {
	dir := t.TempDir()
	addr, direct := keyIndexServer(t, dir)
	k := openTestKeyIndex(t, direct, dir)
	runKeyIndex(t, k)

	px := newDelayProxy(t, addr, 3*time.Second)
	c := connectThrough(t, px, "gateway")
	pub := k.Publisher(NewPublisher(c, 1500*time.Millisecond))
	m := keyMsg("p:a:evt:slow-ack")
	m.Deadline = time.Now().Add(5 * time.Second)
	if err := c.NC.Flush(); err != nil { // idle: the next chunk is the ack
		t.Fatal(err)
	}
	px.armed.Store(true)
	res, err := pub.Publish(context.WithoutCancel(t.Context()), m)
	if px.armed.Load() {
		t.Fatal("no answer was held back: the fault did not hit the publish")
	}
	t.Logf("publish: %+v, %v", res, err)
	if n := countSubject(t, direct, "webhooks.p.a"); n != 1 {
		t.Fatalf("WEBHOOKS holds %d messages of one key, want 1", n)
	}
}

// newMatchDelayProxy is a delayProxy that, once armed, holds back the
// first server-to-client chunk containing match (a slow first delivery:
// cold cache, busy disk or CPU at start) and notes the hit.
func newMatchDelayProxy(t *testing.T, target string, match string, wait time.Duration) *delayProxy {
	p := newDelayProxy(t, target, wait)
	p.match = []byte(match)
	return p
}

// Without a snapshot, OpenKeyIndex reads every event stored within the
// horizon. When its first fetch brings nothing within its 1 s wait (the
// server slow to deliver the first message), it concludes that nothing is
// stored within the horizon and sets the frontier to the stream's last
// sequence: every key of the horizon is then unknown for good, and a
// repeat sent after dedup.window is stored again (promise 2), with no
// warning logged. It should tell "nothing there" (the stream's state) from
// "nothing came" (retry, or ErrUnavailable).
func TestReviewKeyIndexFullReadDoesNotTakeASlowFirstFetchForAnEmptyHorizon(t *testing.T) {
	dir := t.TempDir()
	addr, direct := keyIndexServer(t, dir)
	plain := NewPublisher(direct, 5*time.Second)
	// Stored by the previous release (no index, no snapshot): an upgrade.
	first := storeOutlastingTheWindow(t, plain, plain, keyMsg("p:a:evt:upgraded"))

	px := newMatchDelayProxy(t, addr, "$JS.ACK."+StreamWebhooks+".", 2500*time.Millisecond)
	c := connectThrough(t, px, "gateway")
	px.armed.Store(true)
	k := openTestKeyIndex(t, c, dir)
	if !px.hit.Load() {
		t.Fatal("no delivery was held back: the fault did not hit the read")
	}
	again, err := k.Publisher(NewPublisher(direct, 5*time.Second)).Publish(t.Context(), keyMsg("p:a:evt:upgraded"))
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate {
		t.Fatalf("a key stored within the horizon (seq %d) was stored again at seq %d after a slow first read", first.Seq, again.Seq)
	}
}

// A kill -9 while a snapshot is being written (every SnapshotEvery, and
// the file is 24 bytes a key: ~840 MB at 35 M keys) leaves its temporary
// file in data_dir; nothing removes it later, so each such crash leaks a
// snapshot's worth of disk next to the stream's files.
func TestReviewKeyIndexRemovesTheTemporaryFileOfAnInterruptedSnapshot(t *testing.T) {
	dir := t.TempDir()
	// What WriteFile's os.CreateTemp leaves when the process dies before
	// its rename.
	stale := filepath.Join(dir, "keys.idx.tmp1234567")
	if err := os.WriteFile(stale, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	e, c := startEmbedded(t, dir, keyIndexStreams())
	defer e.Shutdown()
	defer c.Close()
	k := openTestKeyIndex(t, c, dir)
	if _, err := k.Publisher(NewPublisher(c, 5*time.Second)).Publish(t.Context(), keyMsg("p:a:evt:1")); err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Fatalf("%s is still there after an open and a snapshot", filepath.Base(stale))
	}
}

// waitAgedOut waits until every WEBHOOKS event aged out (max_age).
func waitAgedOut(t *testing.T, c *Conn) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for webhooksMsgs(t, c) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("WEBHOOKS's events did not age out in 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
