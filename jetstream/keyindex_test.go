package jetstream

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// keyIndexWindow is the least dedup.window config check allows.
const keyIndexWindow = time.Second

// keyIndexStreams is testStreams as the embedded serve sets them: WEBHOOKS
// keeps the window, the index the hour.
func keyIndexStreams() StreamsConfig {
	sc := testStreams()
	sc.KeyIndex, sc.DedupWindow = true, keyIndexWindow
	return sc
}

func openTestKeyIndex(t *testing.T, c *Conn, dir string) *KeyIndex {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	k, err := OpenKeyIndex(ctx, c, KeyIndexOptions{
		Path: filepath.Join(dir, "keys.idx"), Horizon: time.Hour, Window: keyIndexWindow,
	})
	if err != nil {
		t.Fatalf("open key index: %v", err)
	}
	return k
}

func webhooksMsgs(t *testing.T, c *Conn) uint64 {
	t.Helper()
	s, err := c.JS.Stream(t.Context(), StreamWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().State.Msgs
}

func keyMsg(key string) Message {
	return Message{Subject: "webhooks.p.a", Key: key, Header: nats.Header{"Hookgate-Key": {key}}, Body: []byte(`{}`)}
}

// keyPublisher is Publisher or KeyIndexPublisher.
type keyPublisher interface {
	Publish(ctx context.Context, m Message) (PublishResult, error)
}

// storeOutlastingTheWindow stores m through via, then waits until the
// server's own duplicate window has forgotten it (a probe stored after it
// is stored again): from then on only the key index knows the key.
func storeOutlastingTheWindow(t *testing.T, plain *Publisher, via keyPublisher, m Message) PublishResult {
	t.Helper()
	res, err := via.Publish(t.Context(), m)
	if err != nil || res.Duplicate {
		t.Fatalf("store %s: %+v, %v", m.Key, res, err)
	}
	if _, err := plain.Publish(t.Context(), keyMsg("probe")); err != nil {
		t.Fatal(err)
	}
	waitServerForgot(t, plain, "probe")
	return res
}

// keyIndexServer starts an embedded server listening on loopback (for
// proxies in front of it) with the streams as the embedded serve sets
// them, and returns its address and a direct connection.
func keyIndexServer(t *testing.T, dir string) (addr string, direct *Conn) {
	t.Helper()
	addr, e := listeningEmbedded(t, dir)
	direct, err := Connect(ConnectOptions{Name: "direct", Embedded: e})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(direct.Close)
	if err := Provision(t.Context(), direct.JS, keyIndexStreams()); err != nil {
		t.Fatal(err)
	}
	return addr, direct
}

// connectThrough connects to the server behind px.
func connectThrough(t *testing.T, px *delayProxy, name string) *Conn {
	t.Helper()
	c, err := Connect(ConnectOptions{Name: name, URL: "nats://" + px.ln.Addr().String(), Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// runKeyIndex runs k's Run until the test ends (stopped and waited for
// before the cleanups registered earlier, its connection's among them).
func runKeyIndex(t *testing.T, k *KeyIndex) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// waitServerForgot publishes probe (stored once before) with the plain
// publisher until the server stores it again: its duplicate window has
// dropped what was stored when probe was.
func waitServerForgot(t *testing.T, pub *Publisher, probe string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := pub.Publish(t.Context(), keyMsg(probe))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Duplicate {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the server's duplicate window still holds the probe after 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The point of the index: a key stays a duplicate after the stream's own
// window forgot it, within the running process and after a restart, clean
// or not, without a second stored event.
func TestKeyIndexKeepsKeysBeyondTheStreamsWindow(t *testing.T) {
	for _, restart := range []string{"none", "clean", "crash"} {
		t.Run(restart, func(t *testing.T) {
			dir := t.TempDir()
			e, c := startEmbedded(t, dir, keyIndexStreams())
			k := openTestKeyIndex(t, c, dir)
			plain := NewPublisher(c, 5*time.Second)
			pub := k.Publisher(plain)
			first := storeOutlastingTheWindow(t, plain, pub, keyMsg("p:a:evt:1"))
			switch restart {
			case "clean":
				if err := k.Close(); err != nil {
					t.Fatal(err)
				}
				fallthrough
			case "crash": // no snapshot since the open: read back
				c.Close()
				e.Shutdown()
				e, c = startEmbedded(t, dir, keyIndexStreams())
				k = openTestKeyIndex(t, c, dir)
				pub = k.Publisher(NewPublisher(c, 5*time.Second))
			}
			defer e.Shutdown()
			defer c.Close()
			before := webhooksMsgs(t, c)
			again, err := pub.Publish(t.Context(), keyMsg("p:a:evt:1"))
			if err != nil {
				t.Fatal(err)
			}
			if !again.Duplicate || again.Seq != first.Seq {
				t.Fatalf("repeat after the window: %+v, want a duplicate of seq %d", again, first.Seq)
			}
			if after := webhooksMsgs(t, c); after != before {
				t.Fatalf("WEBHOOKS went from %d to %d messages", before, after)
			}
		})
	}
}

// An event stored without the index seeing its ack (a lost answer, a write
// by another client) is read back from the stream while Run runs.
func TestKeyIndexReadsBackEventsItDidNotPublish(t *testing.T) {
	dir := t.TempDir()
	e, c := startEmbedded(t, dir, keyIndexStreams())
	defer e.Shutdown()
	defer c.Close()
	k := openTestKeyIndex(t, c, dir)
	runKeyIndex(t, k)
	plain := NewPublisher(c, 5*time.Second)
	var last uint64
	for i := range 5 {
		res, err := plain.Publish(t.Context(), keyMsg(fmt.Sprintf("p:a:evt:other-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		last = res.Seq
	}
	deadline := time.Now().Add(20 * time.Second)
	for k.Stats().Frontier < last {
		if time.Now().After(deadline) {
			t.Fatalf("frontier %d, want %d after 20 s", k.Stats().Frontier, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := range 5 {
		if _, ok := k.idx.Lookup(fmt.Sprintf("p:a:evt:other-%d", i)); !ok {
			t.Errorf("key %d not read back", i)
		}
	}
}

// While an event stored for longer than half the stream's window may not
// be in the index, a new key is refused (503): the server may have
// forgotten it, and a repeat would be stored twice. Here Run is not
// running yet, so nothing reads the unseen event back and the lag grows;
// once Run runs it reads it back and the refusals end.
func TestKeyIndexRefusesNewKeysWhileBehind(t *testing.T) {
	dir := t.TempDir()
	e, c := startEmbedded(t, dir, keyIndexStreams())
	defer e.Shutdown()
	defer c.Close()
	k := openTestKeyIndex(t, c, dir)
	plain := NewPublisher(c, 5*time.Second)
	pub := k.Publisher(plain)
	// The plain publisher's event leaves a gap the next indexed publish
	// shows: its sequence is the frontier's second next.
	if _, err := plain.Publish(t.Context(), keyMsg("p:a:evt:unseen")); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Publish(t.Context(), keyMsg("p:a:evt:seen")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		_, err := pub.Publish(t.Context(), keyMsg(fmt.Sprintf("p:a:evt:new-%d", i)))
		if errors.Is(err, ErrUnavailable) {
			if !strings.HasPrefix(err.Error(), "key index not caught up: it has been behind WEBHOOKS for ") {
				t.Fatalf("refused while behind as %q: it should say the index is behind, not that JetStream is away", err)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("never refused while behind")
		}
		time.Sleep(20 * time.Millisecond)
	}
	runKeyIndex(t, k)
	deadline = time.Now().Add(20 * time.Second)
	for {
		_, err := pub.Publish(t.Context(), keyMsg("p:a:evt:after"))
		if err == nil {
			break
		}
		if !errors.Is(err, ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("after Run: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, ok := k.idx.Lookup("p:a:evt:unseen"); !ok {
		t.Fatal("the unseen event's key was not read back")
	}
}

// A snapshot of a stream that was deleted and created again is not used.
func TestKeyIndexIgnoresASnapshotOfAnotherStream(t *testing.T) {
	dir := t.TempDir()
	e, c := startEmbedded(t, dir, keyIndexStreams())
	defer e.Shutdown()
	defer c.Close()
	k := openTestKeyIndex(t, c, dir)
	if _, err := k.Publisher(NewPublisher(c, 5*time.Second)).Publish(t.Context(), keyMsg("p:a:evt:gone")); err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.JS.DeleteStream(t.Context(), StreamWebhooks); err != nil {
		t.Fatal(err)
	}
	if err := Provision(t.Context(), c.JS, keyIndexStreams()); err != nil {
		t.Fatal(err)
	}
	// As many events in the new stream as the snapshot knows, so that only
	// the stream's identity tells them apart (not a frontier past its end).
	if _, err := NewPublisher(c, 5*time.Second).Publish(t.Context(), keyMsg("p:a:evt:new")); err != nil {
		t.Fatal(err)
	}
	k = openTestKeyIndex(t, c, dir)
	if _, ok := k.idx.Lookup("p:a:evt:gone"); ok {
		t.Fatal("a key of the deleted stream is still a duplicate")
	}
}

func TestWebhooksWindow(t *testing.T) {
	sc := testStreams()
	if got := webhooksWindow(sc); got != sc.Horizon {
		t.Errorf("without a key index: %s, want the horizon %s", got, sc.Horizon)
	}
	sc.KeyIndex = true
	if got := webhooksWindow(sc); got != sc.DedupWindow {
		t.Errorf("with a key index: %s, want dedup.window %s", got, sc.DedupWindow)
	}
}

// BenchmarkKeyIndexReadBack: the first open of a key index on a stream of
// b.N events (no snapshot: every key read back).
func BenchmarkKeyIndexReadBack(b *testing.B) {
	dir := b.TempDir()
	e, c := startEmbedded(b, dir, keyIndexStreams())
	defer e.Shutdown()
	defer c.Close()
	body := make([]byte, 1024)
	h := nats.Header{"Hookgate-Provider": {"p"}, "Hookgate-Account": {"a"}, "Hookgate-Received-At": {"2026-01-02T03:04:05.123456789Z"},
		"Hookgate-Subject": {"G-1"}, "Hookgate-Occurred-At": {"2026-01-02T03:04:05Z"}, "Hookgate-Type": {"t"}, "Content-Type": {"application/json"}}
	for i := range b.N {
		key := fmt.Sprintf("p:a:evt:%030d", i)
		hh := nats.Header{"Hookgate-Key": {key}, nats.MsgIdHdr: {key}}
		for k, v := range h {
			hh[k] = v
		}
		if _, err := c.NC.RequestMsg(&nats.Msg{Subject: "webhooks.p.a", Header: hh, Data: body}, 5*time.Second); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	k, err := OpenKeyIndex(b.Context(), c, KeyIndexOptions{Path: filepath.Join(dir, "keys.idx"), Horizon: time.Hour, Window: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if got := k.Stats().Keys; got != b.N {
		b.Fatalf("%d keys read back, want %d", got, b.N)
	}
}
