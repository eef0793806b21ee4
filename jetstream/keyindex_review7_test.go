package jetstream

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// Review 7. The index dates keys only by checkpoints (marks): a publish
// answered new marks its sequence with time.Now(), a read-back with the
// stored message's time. A publish answered DUPLICATE by the server
// (AddDigest with the zero time) marks nothing, yet Resolve moves the
// frontier past its sequence, so the read-back never reads that event
// and never dates it either. That happens when the gateway's own publish
// of an event timed out after the write landed (the sender got 503) and
// the sender's retry, within dedup.window and before Run's read-back
// (a tick), is answered duplicate by the server: the event's sequence
// then has no checkpoint at or above it until another event is stored.
//
// MoveExpiry can only expire through the newest checkpoint older than the
// cut, so that key never expires while no later event comes (a quiet
// provider, a quiet night), and the snapshot carries the same undated
// state across a restart. Its event, though, ages out of WEBHOOKS
// (retention.webhooks.max_age = dedup.horizon is allowed): the gateway
// then answers "duplicate" for a key stored longer than the horizon ago
// whose event WEBHOOKS no longer holds (the contract: "same key seen
// before (within the horizon)"; promise 1: never "duplicate" for an event
// not stored).
func TestReview7KeyOfAnEventAnsweredDuplicateExpiresAfterTheHorizon(t *testing.T) {
	dir := t.TempDir()
	const horizon = 2 * time.Second
	sc := keyIndexStreams()
	sc.Webhooks.MaxAge = horizon // config check: max_age >= dedup.horizon
	_, c := startEmbedded(t, dir, sc)
	path := filepath.Join(dir, "keys.idx")
	open := func() *KeyIndex {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		k, err := OpenKeyIndex(ctx, c, KeyIndexOptions{Path: path, Horizon: horizon, Window: keyIndexWindow})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k := open()
	plain := NewPublisher(c, 5*time.Second)
	pub := k.Publisher(plain)

	// An ordinary event first: its key expires as it should (the control).
	if res, err := pub.Publish(t.Context(), keyMsg("p:a:evt:ordinary")); err != nil || res.Duplicate {
		t.Fatalf("ordinary publish: %+v, %v", res, err)
	}
	// E: stored, its answer lost to the index (the gateway's publish timed
	// out after the write landed; the sender got 503) ...
	stored, err := plain.Publish(t.Context(), keyMsg("p:a:evt:e"))
	if err != nil || stored.Duplicate {
		t.Fatalf("E: %+v, %v", stored, err)
	}
	storedAt := time.Now()
	// ... and the sender's retry, before Run read E back (Run is not
	// running yet: in serve, a retry within a tick), is answered duplicate
	// by the server's window.
	retry, err := pub.Publish(t.Context(), keyMsg("p:a:evt:e"))
	if err != nil {
		t.Fatal(err)
	}
	if !retry.Duplicate || retry.Seq != stored.Seq {
		t.Fatalf("retry of E within the window: %+v, want a duplicate of seq %d (setup)", retry, stored.Seq)
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	// Both events age out of WEBHOOKS, and the index expires the control.
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, ordinary := k.idx.Lookup("p:a:evt:ordinary")
		if webhooksMsgs(t, c) == 0 && !ordinary {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 15 s: WEBHOOKS holds %d messages, control key still a duplicate: %v", webhooksMsgs(t, c), ordinary)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Give E's key the horizon plus a margin of seconds (Run moves the
	// expiry every tick, 62.5 ms here).
	deadline = storedAt.Add(horizon + 3*time.Second)
	for {
		if _, ok := k.idx.Lookup("p:a:evt:e"); !ok {
			break
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	res, err := pub.Publish(t.Context(), keyMsg("p:a:evt:e"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Duplicate {
		t.Errorf("E (seq %d) stored %s ago, horizon %s, WEBHOOKS holds %d messages: answered duplicate of seq %d, want accepted",
			stored.Seq, time.Since(storedAt).Round(time.Millisecond), horizon, webhooksMsgs(t, c), res.Seq)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Across a clean restart (Close, open) the key is the new event's, if
	// it was accepted again, never the old event's: the snapshot must not
	// carry the old event's key undated.
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	seq, ok := open().idx.Lookup("p:a:evt:e")
	switch {
	case ok && seq == stored.Seq:
		t.Errorf("after a clean restart, %s after E was stored: still a duplicate of seq %d", time.Since(storedAt).Round(time.Millisecond), seq)
	case !res.Duplicate && (!ok || seq != res.Seq):
		t.Errorf("after a clean restart: E's new event (seq %d) is not known (lookup: %d, %v)", res.Seq, seq, ok)
	}
}
