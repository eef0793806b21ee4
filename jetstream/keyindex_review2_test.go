package jetstream

import (
	"testing"
	"time"
)

// keyMsgOn is keyMsg on its own subject, so a test can count one key's
// stored events.
func keyMsgOn(key, subject string) Message {
	m := keyMsg(key)
	m.Subject = subject
	return m
}

// behind() measures an unknown event from the tick that first sees it
// (target/targetAt). While a read-back (catchUp) is under way, target is
// the sequence the stream had before it; when it ends, target is reset and
// an event stored DURING the read-back is seen only at the next tick, so
// its clock starts then, not when it was stored. A read-back longer than
// half the window therefore lets an event stay unknown past the stream's
// duplicate window while behind() reads ~0: a retry of its key is
// published, the server has forgotten it, and WEBHOOKS stores the key a
// second time (promise 2) instead of 503 (promise 4).
//
// Here: E1 is stored by a write whose answer the index never got; the
// read-back that learns it is slow (its delivery held 2.5 s, a busy disk or
// CPU); E2 (also unknown to the index) is stored while that read-back
// runs. Right after it ends, a retry of E2's key comes through the index's
// publisher.
func TestReviewKeyIndexEventStoredDuringASlowReadBackIsNotMeasuredFromItsStore(t *testing.T) {
	dir := t.TempDir()
	addr, direct := keyIndexServer(t, dir)
	// The index reads WEBHOOKS through a proxy that can hold back a
	// delivery (a slow read-back); the publishes go direct.
	px := newMatchDelayProxy(t, addr, "$JS.ACK."+StreamWebhooks+".", 2500*time.Millisecond)
	k := openTestKeyIndex(t, connectThrough(t, px, "index"), dir)
	runKeyIndex(t, k)

	plain := NewPublisher(direct, 5*time.Second)
	pub := k.Publisher(plain)

	px.armed.Store(true)
	// E1: stored, its answer lost to the index (a timed-out publish).
	e1, err := plain.Publish(t.Context(), keyMsgOn("p:a:evt:e1", "webhooks.p.e1"))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !px.hit.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the read-back of E1 did not start within 10 s")
		}
		time.Sleep(2 * time.Millisecond)
	}
	// The read-back of E1 has fixed its last sequence and waits for its
	// delivery. E2 is stored now, also unknown to the index.
	e2, err := plain.Publish(t.Context(), keyMsgOn("p:a:evt:e2", "webhooks.p.e2"))
	if err != nil {
		t.Fatal(err)
	}
	e2Stored := time.Now()
	for k.Stats().Frontier < e1.Seq {
		if time.Now().After(deadline) {
			t.Fatal("E1 was not read back within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	// The next read-back (of E2) is slow too.
	px.armed.Store(true)
	if k.Stats().Frontier >= e2.Seq {
		t.Skip("E2 was read back before the retry: timing not reproduced")
	}
	st := k.Stats()
	t.Logf("E2 (seq %d) stored %s ago, unknown to the index (frontier %d); behind() says %s; window %s",
		e2.Seq, time.Since(e2Stored).Round(time.Millisecond), st.Frontier, st.Behind, keyIndexWindow)
	// The sender's retry of E2, after the stream's window forgot it.
	res, err := pub.Publish(t.Context(), keyMsgOn("p:a:evt:e2", "webhooks.p.e2"))
	t.Logf("retry of E2: %+v, %v", res, err)
	if n := countSubject(t, direct, "webhooks.p.e2"); n != 1 {
		t.Fatalf("WEBHOOKS holds E2's key %d times (first at seq %d, again at seq %d): an event stored during a slow read-back stayed unknown for %s, past the %s window, with behind() at %s (limit %s), so no 503",
			n, e2.Seq, res.Seq, time.Since(e2Stored).Round(time.Millisecond), keyIndexWindow, st.Behind, keyIndexWindow/2-k.tick)
	}
}
