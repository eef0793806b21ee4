package jetstream_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
)

// Review AX: a loss told at open, with nothing stored after it, is told
// again at every later open (serve restarted, a lock handover) until a new
// event is delivered: nothing delivered moves the consumer's
// Delivered.Stream past the gone sequences. Each open added to
// hookgate_consumer_events_expired_total and wrote another AUDIT record.
func TestSourceTellsLossOnceAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	streams := shortLivedStreams()
	var lost lostLog
	opts := jetstream.SourceOptions{MaxAckPending: 16, AckWait: 30 * time.Second, OnLost: lost.add}
	t.Run("applied then lost", func(t *testing.T) {
		env := jstest.StartWith(t, dir, streams)
		applyFirst(t, env, opts)
		storeEvent(t, env, 2)
		storeEvent(t, env, 3)
		waitGone(t, env, 3)
	})
	told := func(t *testing.T, when string) {
		t.Helper()
		if got := lost.get(); len(got) > 1 || len(got) == 1 && got[0] != [2]uint64{2, 3} {
			t.Fatalf("%s told: %v, want [[2 3]] at most once", when, got)
		}
	}
	for i := range 2 {
		t.Run("restart, stream empty", func(t *testing.T) {
			env := jstest.StartWith(t, dir, streams)
			src, err := jetstream.OpenSource(t.Context(), env.Conn, opts)
			if err != nil {
				t.Fatal(err)
			}
			src.Stop()
			src.Unread()
			told(t, fmt.Sprintf("after start %d", i+1))
		})
	}
	t.Run("restart, a new event", func(t *testing.T) {
		env := jstest.StartWith(t, dir, streams)
		src, err := jetstream.OpenSource(t.Context(), env.Conn, opts)
		if err != nil {
			t.Fatal(err)
		}
		storeEvent(t, env, 4)
		if seq := nextSeq(t, src); seq != 4 {
			t.Fatalf("delivery: seq %d, want 4", seq)
		}
		src.Stop()
		src.Unread()
		if got := lost.get(); !slices.Equal(got, [][2]uint64{{2, 3}}) {
			t.Fatalf("told once event 4 came: %v, want [[2 3]]", got)
		}
	})
	t.Run("restart after", func(t *testing.T) {
		env := jstest.StartWith(t, dir, streams)
		src, err := jetstream.OpenSource(t.Context(), env.Conn, opts)
		if err != nil {
			t.Fatal(err)
		}
		src.Stop()
		src.Unread()
		if got := lost.get(); !slices.Equal(got, [][2]uint64{{2, 3}}) {
			t.Fatalf("told: %v, want [[2 3]]", got)
		}
	})
}

// Review AX: a durable consumer deleted and created again delivers the
// whole stream anew (DeliverAll); events its predecessor applied that
// leave at max_age before it gets to them (held back here by its
// ack-pending limit, as a long catch-up is) were told lost "before they
// were applied". The README says such a consumer tells nothing.
func TestSourceRecreatedConsumerTellsNoLoss(t *testing.T) {
	env := shortLived(t)
	var lost lostLog
	opts := jetstream.SourceOptions{MaxAckPending: 1, AckWait: 30 * time.Second, OnLost: lost.add}
	src, err := jetstream.OpenSource(t.Context(), env.Conn, opts)
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 3; n++ {
		storeEvent(t, env, n)
		if seq := nextSeq(t, src); seq != uint64(n) {
			t.Fatalf("delivery %d: seq %d", n, seq)
		}
	}
	src.Stop()
	src.Unread()
	if err := env.Conn.JS.DeleteConsumer(t.Context(), jetstream.StreamWebhooks, jetstream.DurableApply); err != nil {
		t.Fatal(err)
	}
	src, err = jetstream.OpenSource(t.Context(), env.Conn, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	held, err := src.Next(ctx)
	if err != nil || held.Event.Seq != 1 {
		t.Fatalf("first delivery of the new consumer: %v %v", held, err)
	}
	waitGone(t, env, 3)
	storeEvent(t, env, 4)
	if err := held.Delivery.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if seq := nextSeq(t, src); seq != 4 {
		t.Fatalf("delivery after the ack: seq %d, want 4", seq)
	}
	if got := lost.get(); len(got) != 0 {
		t.Fatalf("told %v: events 2 and 3 were applied before the consumer was deleted", got)
	}
}

// Review AY: the embedded server, restarted with each serve, gives a
// recovered consumer a new creation time (its restart), so every stored
// event counted as stored "before its creation" and events gone while
// only a gateway ran were never told at the next serve's open, though
// an event after them was stored.
func TestSourceTellsLossAfterServerRestart(t *testing.T) {
	dir := t.TempDir()
	streams := shortLivedStreams()
	var lost lostLog
	opts := jetstream.SourceOptions{MaxAckPending: 16, AckWait: 30 * time.Second, OnLost: lost.add}
	t.Run("applied", func(t *testing.T) {
		env := jstest.StartWith(t, dir, streams)
		applyFirst(t, env, opts)
	})
	t.Run("gateway only: lost, then a new event", func(t *testing.T) {
		env := jstest.StartWith(t, dir, streams)
		storeEvent(t, env, 2)
		waitGone(t, env, 2)
		storeEvent(t, env, 3)
	})
	t.Run("restart with the consumer", func(t *testing.T) {
		env := jstest.StartWith(t, dir, streams)
		src, err := jetstream.OpenSource(t.Context(), env.Conn, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Stop()
		if got := lost.get(); !slices.Equal(got, [][2]uint64{{2, 2}}) {
			t.Fatalf("told at open: %v, want [[2 2]]", got)
		}
	})
}
