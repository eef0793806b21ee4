package jetstream_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/nats-io/nats.go"
)

// lostLog records what a Source's OnLost was told.
type lostLog struct {
	mu     sync.Mutex
	ranges [][2]uint64
}

func (l *lostLog) add(first, last uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ranges = append(l.ranges, [2]uint64{first, last})
}

func (l *lostLog) get() [][2]uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ranges)
}

// shortLived starts a server whose WEBHOOKS keeps events for 2 s.
func shortLived(t *testing.T) *jstest.Env {
	t.Helper()
	return jstest.StartWith(t, "", shortLivedStreams())
}

// shortLivedStreams are the streams of shortLived.
func shortLivedStreams() jetstream.StreamsConfig {
	streams := jstest.Streams()
	streams.Webhooks.MaxAge = 2 * time.Second
	streams.Horizon = time.Second
	streams.DedupWindow = time.Second
	return streams
}

// applyFirst opens a source, stores event 1, takes and acknowledges its
// delivery, and stops the source: a consumer that delivered seq 1.
func applyFirst(t *testing.T, env *jstest.Env, opts jetstream.SourceOptions) {
	t.Helper()
	src, err := jetstream.OpenSource(t.Context(), env.Conn, opts)
	if err != nil {
		t.Fatal(err)
	}
	storeEvent(t, env, 1)
	if seq := nextSeq(t, src); seq != 1 {
		t.Fatalf("first delivery: seq %d", seq)
	}
	src.Stop()
	src.Unread()
}

func storeEvent(t *testing.T, env *jstest.Env, n int) {
	t.Helper()
	m := nats.NewMsg("webhooks.p.default")
	m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("p:default:evt:%d", n))
	m.Data = []byte(`{}`)
	if _, err := env.Conn.JS.PublishMsg(t.Context(), m); err != nil {
		t.Fatal(err)
	}
}

// waitGone polls until WEBHOOKS's first stored sequence is past seq.
func waitGone(t *testing.T, env *jstest.Env, seq uint64) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); ; {
		s, err := env.Conn.JS.Stream(t.Context(), jetstream.StreamWebhooks)
		if err != nil {
			t.Fatal(err)
		}
		if s.CachedInfo().State.FirstSeq > seq {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("WEBHOOKS still holds seq %d after 20 s (max_age 2 s)", seq)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func nextSeq(t *testing.T, src *jetstream.Source) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	m, err := src.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Delivery.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	return m.Event.Seq
}

// Events that left WEBHOOKS at max_age before anything delivered them
// (serve stopped, or gateway-only, past max_age) are told when the source
// opens, from the consumer's last delivery to the stream's first stored
// sequence, and not again at the next delivery.
func TestSourceTellsEventsGoneWhileStopped(t *testing.T) {
	env := shortLived(t)
	var lost lostLog
	opts := jetstream.SourceOptions{MaxAckPending: 16, AckWait: 30 * time.Second, OnLost: lost.add}
	applyFirst(t, env, opts)
	storeEvent(t, env, 2)
	storeEvent(t, env, 3)
	waitGone(t, env, 3)
	// An event after them is stored (with none, they are told at the
	// next delivery: TestSourceTellsLossOnceAcrossRestarts).
	storeEvent(t, env, 4)
	src, err := jetstream.OpenSource(t.Context(), env.Conn, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Stop()
	if got := lost.get(); !slices.Equal(got, [][2]uint64{{2, 3}}) {
		t.Fatalf("told at open: %v, want [[2 3]]", got)
	}
	if seq := nextSeq(t, src); seq != 4 {
		t.Fatalf("next delivery: seq %d, want 4", seq)
	}
	if got := lost.get(); len(got) != 1 {
		t.Fatalf("told again at the next delivery: %v", got)
	}
}

// While the source runs but the server delivers nothing new (the
// consumer's ack-pending limit reached: a receiver down for longer than
// max_age), events that leave the stream undelivered are told at the
// first delivery after them; a consumer that never delivered anything
// tells nothing at open.
func TestSourceTellsEventsGoneUndelivered(t *testing.T) {
	env := shortLived(t)
	var lost lostLog
	src, err := jetstream.OpenSource(t.Context(), env.Conn, jetstream.SourceOptions{MaxAckPending: 1, AckWait: 30 * time.Second, OnLost: lost.add})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Stop()
	storeEvent(t, env, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	held, err := src.Next(ctx)
	if err != nil || held.Event.Seq != 1 {
		t.Fatalf("first delivery: %v %v", held, err)
	}
	storeEvent(t, env, 2)
	storeEvent(t, env, 3)
	waitGone(t, env, 3) // 1 too: acknowledged late, as a stuck event is
	storeEvent(t, env, 4)
	if err := held.Delivery.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if seq := nextSeq(t, src); seq != 4 {
		t.Fatalf("delivery after the ack: seq %d, want 4", seq)
	}
	if got := lost.get(); !slices.Equal(got, [][2]uint64{{2, 3}}) {
		t.Fatalf("told: %v, want [[2 3]]", got)
	}
}
