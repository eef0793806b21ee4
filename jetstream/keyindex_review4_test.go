package jetstream

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Review 4. KeyIndexPublisher.Publish looks the key up first and checks
// the lag (behind) afterwards. The two are not one step: when Run's
// read-back learns an old unknown event E and moves clearAt (keepUp:
// clearAt = began) between a publish's lookup (E not known yet: miss) and
// its lag check (clearAt now fresh: pass), the publish goes ahead although
// E was stored long before the stream's duplicate window: E's key is stored
// a second time within the horizon (promise 2), where a lookup after the
// check would have answered "duplicate" and a check before it 503.
//
// The interleaving is made deterministic: the retry of E parks on k.mu in
// behind() (as it does whenever k.mu is contended: every publish's lag
// check, Stats, keepUp take it), after its lookup missed; meanwhile Run's
// read-back runs (k.catchUp, which takes no k.mu) and keepUp's update of
// clearAt is applied as keepUp writes it.
func TestReview4KeyIndexLookupBeforeLagCheckStoresAnOldKeyAgain(t *testing.T) {
	dir := t.TempDir()
	_, c := startEmbedded(t, dir, keyIndexStreams())
	k := openTestKeyIndex(t, c, dir)
	plain := NewPublisher(c, 5*time.Second)
	pub := k.Publisher(plain)

	// E: stored, its answer lost to the index (a timed-out publish); Run
	// could not read it back for longer than the window (here: not
	// running), so the index is behind and says so.
	ev, err := plain.Publish(t.Context(), keyMsgOn("p:a:evt:e", "webhooks.p.e"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Publish(t.Context(), keyMsg("p:a:evt:probe")); err != nil {
		t.Fatal(err)
	}
	waitServerForgot(t, plain, "p:a:evt:probe") // the stream forgot E's id
	if _, err := pub.Publish(t.Context(), keyMsgOn("p:a:evt:e", "webhooks.p.e")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a retry of E while the index is behind: %v, want ErrUnavailable", err)
	}

	// The sender's next retry of E races the read-back that learns E.
	k.mu.Lock()
	locked := true
	defer func() {
		if locked {
			k.mu.Unlock()
		}
	}()
	type result struct {
		res PublishResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := pub.Publish(t.Context(), keyMsgOn("p:a:evt:e", "webhooks.p.e"))
		done <- result{res, err}
	}()
	// Wait until it looked E up (miss) and waits for k.mu in behind().
	deadline := time.Now().Add(10 * time.Second)
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if strings.Contains(string(buf[:n]), "(*KeyIndex).behind") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the retry did not reach its lag check within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	// Run's keepUp: the read-back, then clearAt = began.
	began := time.Now()
	if _, err := k.catchUp(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	if _, ok := k.idx.Lookup("p:a:evt:e"); !ok {
		t.Fatal("the read-back did not learn E")
	}
	k.clearAt, k.target = began, 0
	k.mu.Unlock()
	locked = false

	var r result
	select {
	case r = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the retry did not return within 15 s")
	}
	t.Logf("retry of E (stored at seq %d): %+v, %v", ev.Seq, r.res, r.err)
	if n := countSubject(t, c, "webhooks.p.e"); n != 1 {
		t.Fatalf("WEBHOOKS holds E's key %d times (seq %d and %d): the retry's lookup ran before the read-back learnt E and its lag check after clearAt moved, so it was neither answered duplicate nor 503",
			n, ev.Seq, r.res.Seq)
	}
}
