package jetstream

import (
	"errors"
	"testing"
	"time"
)

// Review 3. behind() counts the lag only while target is set, a read-back
// runs (unsure), or the index has a gap. Run's plain look at the stream
// (keepUp's Stream() call, 5 s timeout) sets none of them: while that
// request is slow, or fails, behind() reads 0, however long ago the index
// last knew every stored event (clearAt). An event stored meanwhile whose
// answer the index never got (a timed-out publish, another writer) stays
// unknown past the stream's duplicate window, and a retry of its key is
// stored a second time instead of answered 503 (promises 2 and 4). The
// same holds while Run is busy elsewhere (a long snapshot or Expire).
//
// Here the index reaches the server through a proxy that holds back the
// answer to its stream info request for 8 s (a busy server or machine);
// publishes go direct.
func TestReview3KeyIndexBlindWhileItsLookAtTheStreamHangs(t *testing.T) {
	dir := t.TempDir()
	addr, direct := keyIndexServer(t, dir)
	const hold = 8 * time.Second
	px := newMatchDelayProxy(t, addr, "stream_info_response", hold)
	k := openTestKeyIndex(t, connectThrough(t, px, "index"), dir)
	runKeyIndex(t, k)

	plain := NewPublisher(direct, 5*time.Second)
	pub := k.Publisher(plain)

	// Clean ticks first: the lag trails by about a tick (polled: through
	// the proxy on a loaded machine one look can take a few ticks).
	for start := time.Now(); ; time.Sleep(k.tick / 4) {
		b := k.Stats().Behind
		if b <= 3*k.tick {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("still behind %s 10 s into the test, before the fault", b)
		}
	}
	px.armed.Store(true)
	deadline := time.Now().Add(10 * time.Second)
	for !px.hit.Load() {
		if time.Now().After(deadline) {
			t.Fatal("Run did not look at the stream within 10 s")
		}
		time.Sleep(2 * time.Millisecond)
	}
	held := time.Now()
	// E: stored, its answer lost to the index (a timed-out publish).
	ev, err := plain.Publish(t.Context(), keyMsgOn("p:a:evt:e", "webhooks.p.e"))
	if err != nil {
		t.Fatal(err)
	}
	stored := time.Now()
	if _, err := plain.Publish(t.Context(), keyMsg("p:a:evt:probe")); err != nil {
		t.Fatal(err)
	}
	waitServerForgot(t, plain, "p:a:evt:probe")
	if time.Since(held) > hold-500*time.Millisecond {
		t.Skip("the server's window outlasted the held answer: timing not reproduced")
	}
	st := k.Stats()
	t.Logf("E (seq %d) stored %s ago, unknown to the index (frontier %d); behind() says %s; limit %s; window %s",
		ev.Seq, time.Since(stored).Round(time.Millisecond), st.Frontier, st.Behind, keyIndexWindow/2-k.tick, keyIndexWindow)
	// The sender's retry of E, after the stream's window forgot it.
	res, err := pub.Publish(t.Context(), keyMsgOn("p:a:evt:e", "webhooks.p.e"))
	t.Logf("retry of E: %+v, %v (unavailable: %v)", res, err, errors.Is(err, ErrUnavailable))
	if n := countSubject(t, direct, "webhooks.p.e"); n != 1 {
		t.Fatalf("WEBHOOKS holds E's key %d times (seq %d and %d): while the index's look at the stream hung, E stayed unknown for %s, past the %s window, and behind() read %s, so no 503",
			n, ev.Seq, res.Seq, time.Since(stored).Round(time.Millisecond), keyIndexWindow, st.Behind)
	}
}

// The embedded serve switched from gateway+consumer to consumer-only, for a
// gateway elsewhere (05505e1: "an embedded consumer-only serve keeps the
// horizon window for a gateway elsewhere"). At its start the server
// recovers WEBHOOKS with the dedup.window the gateway run left and
// rebuilds only that window's ids; Provision (KeyIndex false) widens the
// window to the horizon and drops the key-index mark, which does not make
// the server re-read the stream. The remote gateway then starts (the mark
// is gone, KeyIndexKept false) and stores again a key stored more than
// dedup.window earlier, within the horizon (promise 2). The README warns
// only about a rollback to the previous release; nothing refuses or warns
// here.
func TestReview3ConsumerOnlyEmbeddedKeepsTheKeyIndexMark(t *testing.T) {
	dir := t.TempDir()
	e, c := startEmbedded(t, dir, keyIndexStreams()) // serve with both roles
	k := openTestKeyIndex(t, c, dir)
	plain := NewPublisher(c, 5*time.Second)
	storeOutlastingTheWindow(t, plain, k.Publisher(plain), keyMsgOn("p:a:evt:1", "webhooks.p.one"))
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	e.Shutdown()

	// Restart as serve with roles { gateway: false } (streamsConfig:
	// KeyIndex false, External false).
	consumerOnly := keyIndexStreams()
	consumerOnly.KeyIndex = false
	e, c = startEmbedded(t, dir, consumerOnly)
	defer e.Shutdown()
	defer c.Close()
	kept, _, err := KeyIndexKept(t.Context(), c.JS)
	if err != nil {
		t.Fatal(err)
	}
	// The fix: the mark (and the short window) stay, so a remote gateway
	// refuses to start (cmd/hookgate's
	// TestServeGatewayRefusesAnEmbeddedServersKeyIndexedWebhooks); the
	// review's version of this test went on to show such a gateway
	// storing a repeat once the mark was gone.
	if !kept {
		t.Fatal("a consumer-only start of the embedded hookgate removed WEBHOOKS's key-index mark: a remote gateway could start and store repeats of keys older than dedup.window")
	}
	st, err := c.JS.Stream(t.Context(), StreamWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().Config.Duplicates; got != keyIndexWindow {
		t.Fatalf("WEBHOOKS's window %s after a consumer-only start, want it kept at %s", got, keyIndexWindow)
	}
}
