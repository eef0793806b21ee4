package jetstream_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	js "github.com/nats-io/nats.go/jetstream"
)

// After Unread, the source's pull request may still wait at the server
// (its expiry is 5 s): events stored right after the stop must not be
// delivered into the gone subscription (they would wait out the ack wait,
// unsettled, while another instance applies newer events of their
// subjects).
func TestReviewCNothingDeliveredAfterUnread(t *testing.T) {
	env := jstest.Start(t, "")
	ctx := t.Context()
	src, err := jetstream.OpenSource(ctx, env.Conn, jetstream.SourceOptions{MaxAckPending: 1000, Prefetch: 16, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	reviewCWaitInfo(t, env, "a pull request waits", func(i *js.ConsumerInfo) bool { return i.NumWaiting > 0 })
	if got := src.Unread(); len(got) != 0 {
		t.Fatalf("Unread returned %d deliveries, want none", len(got))
	}
	reviewCPublish(t, env, 0, 5)
	var info *js.ConsumerInfo
	for deadline := time.Now().Add(6 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		c, err := env.Conn.JS.Consumer(ctx, jetstream.StreamWebhooks, jetstream.DurableApply)
		if err != nil {
			t.Fatal(err)
		}
		if info = c.CachedInfo(); info.NumAckPending > 0 {
			t.Fatalf("after Unread: %d events delivered to the stopped source (pending %d, waiting pulls %d): they wait out the ack wait", info.NumAckPending, info.NumPending, info.NumWaiting)
		}
	}
	nctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := src.Next(nctx); err == nil {
		t.Fatal("Next returned a delivery after Unread")
	}
}

// Unread returns every delivery received and not returned by Next, oldest
// first, once each; Next then fails at once; the durable consumer counts
// exactly those outstanding. Unread also ends promptly when the
// connection is gone (the subscription then never drains).
func TestReviewCUnreadReturnsTheRestInOrder(t *testing.T) {
	for _, closed := range []bool{false, true} {
		name := "open"
		if closed {
			name = "closed-conn"
		}
		t.Run(name, func(t *testing.T) {
			env := jstest.Start(t, "")
			ctx := t.Context()
			reviewCPublish(t, env, 0, 8)
			src, err := jetstream.OpenSource(ctx, env.Conn, jetstream.SourceOptions{MaxAckPending: 1000, Prefetch: 8, AckWait: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Stop()
			for i := range 2 {
				nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				m, err := src.Next(nctx)
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				if string(m.Event.Body) != string(rune('0'+i)) {
					t.Fatalf("Next %d returned %q", i, m.Event.Body)
				}
			}
			reviewCWaitInfo(t, env, "all 8 delivered", func(i *js.ConsumerInfo) bool { return i.NumAckPending == 8 })
			if closed {
				env.Conn.NC.Close()
			}
			start := time.Now()
			got := src.Unread()
			took := time.Since(start)
			var bodies []string
			for _, m := range got {
				bodies = append(bodies, string(m.Event.Body))
			}
			want := []string{"2", "3", "4", "5", "6", "7"}
			if !closed && !slices.Equal(bodies, want) {
				t.Fatalf("Unread returned %v, want %v", bodies, want)
			}
			// A hang, not a timing (Unread's own bound is unreadWait, 10 s).
			if took > 15*time.Second {
				t.Fatalf("Unread took %v", took)
			}
			nctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			if m, err := src.Next(nctx); err == nil || nctx.Err() != nil {
				t.Fatalf("Next after Unread: %v, %v; want an error at once", m, err)
			}
			t.Logf("Unread: %v in %v", bodies, took.Round(time.Millisecond))
		})
	}
}
