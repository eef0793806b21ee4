package jetstream

import (
	"context"
	"testing"
	"time"

	"github.com/hookgate/hookgate/event"
	"github.com/nats-io/nats.go"
)

// The pin stays with a live instance that has nothing to do: an idle
// source keeps pulling (each pull expires and is renewed), so long after
// the pin's TTL the events still go to it, not to the standby. (Moved to
// the standby, a subject's events would split between two instances
// again.) Pulls expire after 1 s here, so the TTL is 2 s and the idle
// spell 6 s.
func TestPinStaysWithAnIdleLiveSource(t *testing.T) {
	expiry := pullExpiry
	pullExpiry = time.Second
	t.Cleanup(func() { pullExpiry = expiry })
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	t.Cleanup(func() { c.Close(); e.Shutdown() })
	ctx := t.Context()
	opts := SourceOptions{MaxAckPending: 128, AckWait: time.Second}
	pub := NewPublisher(c, 5*time.Second)
	publish := func(i int) {
		t.Helper()
		key := "p:default:evt:" + string(rune('a'+i))
		h := nats.Header{}
		h.Set(event.HeaderKey, key)
		h.Set(event.HeaderProvider, "p")
		if _, err := pub.Publish(ctx, Message{Subject: "webhooks.p.default", Key: key, Header: h, Body: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := OpenSource(ctx, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Stop()
	publish(0)
	nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	m, err := first.Next(nctx)
	cancel()
	if err != nil {
		t.Fatalf("the first source got nothing: %v", err)
	}
	_ = m.Delivery.Ack(ctx)
	// The first source holds the pin; a standby starts pulling.
	standby, err := OpenSource(ctx, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer standby.Stop()
	got := make(chan string, 10)
	for name, s := range map[string]*Source{"pinned": first, "standby": standby} {
		go func() {
			for {
				if _, err := s.Next(ctx); err != nil {
					return
				}
				got <- name
			}
		}()
	}
	select {
	case name := <-got:
		t.Fatalf("%s got an event while none was published", name)
	case <-time.After(3 * pinnedTTL(opts.AckWait)): // the idle spell
	}
	publish(1)
	select {
	case name := <-got:
		if name != "pinned" {
			t.Fatalf("after %s idle, the event went to the %s source: the pin left a live instance", 3*pinnedTTL(opts.AckWait), name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no source got the event within 10 s")
	}
}
