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
	"github.com/nats-io/nats.go"
)

// review8Bulk stores n keyed events p:a:evt:<prefix>-<i> in WEBHOOKS.
func review8Bulk(t *testing.T, c *Conn, prefix string, n int) {
	t.Helper()
	for i := range n {
		m := nats.NewMsg("webhooks.p.a")
		m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("p:a:evt:%s-%d", prefix, i))
		if _, err := c.JS.PublishMsgAsync(m); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 || i == n-1 {
			select {
			case <-c.JS.PublishAsyncComplete():
			case <-time.After(20 * time.Second):
				t.Fatal("async publishes not acknowledged in 20 s")
			}
		}
	}
}

// A read-back stopped part way (its partial snapshot), then the horizon
// passes for what it read (and for events it had not read yet), then new
// events come: the next open goes on from the partial snapshot; every key
// older than the horizon is new again (promise 4), every key stored within
// it is a duplicate (promise 2), none that WEBHOOKS does not hold
// (promise 1: max_age = horizon).
func TestReview8PartialSnapshotThenTheHorizonPasses(t *testing.T) {
	dir := t.TempDir()
	const horizon = 4 * time.Second
	sc := keyIndexStreams()
	sc.Webhooks.MaxAge = time.Hour
	e, c := startEmbedded(t, dir, sc)
	defer e.Shutdown()
	defer c.Close()
	const n = 12000
	review8Bulk(t, c, "old", n)
	oldStored := time.Now()
	path := filepath.Join(dir, "keys.idx")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var saves atomic.Int32
	if _, err := OpenKeyIndex(ctx, c, KeyIndexOptions{
		Path: path, Horizon: horizon, Window: keyIndexWindow, SnapshotEvery: time.Nanosecond,
		Log: slog.New(onMessage{func(r slog.Record) {
			if r.Message == "key index: what was read back is saved" && saves.Add(1) == 1 {
				cancel()
			}
		}}),
	}); err == nil {
		t.Fatal("setup: the open was not stopped")
	}
	s, err := c.JS.Stream(t.Context(), StreamWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	streamID := s.CachedInfo().Created.UTC().Format(keyIndexStreamIDLayout)
	_, snap, err := keyindex.ReadFile(path, streamID, horizon)
	if err != nil || snap.Frontier == 0 || snap.Frontier >= n {
		t.Fatalf("partial snapshot: %+v, %v", snap, err)
	}
	// The horizon passes for the old events.
	for time.Since(oldStored) < horizon+1500*time.Millisecond {
		time.Sleep(20 * time.Millisecond)
	}
	plain := NewPublisher(c, 5*time.Second)
	res, err := plain.Publish(t.Context(), keyMsg("p:a:evt:recent"))
	if err != nil || res.Duplicate {
		t.Fatalf("recent: %+v, %v", res, err)
	}
	k, err := OpenKeyIndex(t.Context(), c, KeyIndexOptions{Path: path, Horizon: horizon, Window: keyIndexWindow})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := k.idx.Lookup("p:a:evt:recent"); !ok {
		t.Error("an event stored within the horizon is not a duplicate after the resumed open")
	}
	for _, i := range []uint64{0, snap.Frontier - 1, snap.Frontier, n - 1} {
		if seq, ok := k.idx.Lookup(fmt.Sprintf("p:a:evt:old-%d", i)); ok {
			t.Errorf("old-%d (seq %d), stored %s ago, horizon %s: still a duplicate after the resumed open", i, seq, time.Since(oldStored).Round(time.Millisecond), horizon)
		}
	}
	pub := k.Publisher(plain)
	if res, err := pub.Publish(t.Context(), keyMsg("p:a:evt:old-1")); err != nil || res.Duplicate {
		t.Errorf("old-1 again past the horizon: %+v, %v; want stored", res, err)
	}
	if res, err := pub.Publish(t.Context(), keyMsg("p:a:evt:recent")); err != nil || !res.Duplicate {
		t.Errorf("recent again: %+v, %v; want duplicate", res, err)
	}
}
