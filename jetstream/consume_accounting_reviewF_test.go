package jetstream_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	js "github.com/nats-io/nats.go/jetstream"
)

// Whenever Unread comes (Next slow or fast, called concurrently with
// Unread or not, events trickling in or a backlog, Stop before it), every
// delivery the server made is returned once: by Next or by Unread; and Next
// fails afterwards. Guard test.
func TestReviewFPatternEveryDeliveryAccountedAtUnread(t *testing.T) {
	for i, c := range []struct {
		backlog, trickle int
		nextDelay        time.Duration
		unreadAfter      time.Duration
		stopFirst        bool
	}{
		{backlog: 40, nextDelay: 0, unreadAfter: 5 * time.Millisecond},
		{backlog: 40, nextDelay: 3 * time.Millisecond, unreadAfter: 50 * time.Millisecond},
		{backlog: 5, trickle: 30, nextDelay: time.Millisecond, unreadAfter: 300 * time.Millisecond},
		{trickle: 30, nextDelay: 0, unreadAfter: 700 * time.Millisecond},
		{backlog: 40, nextDelay: 20 * time.Millisecond, unreadAfter: 100 * time.Millisecond, stopFirst: true},
		{trickle: 20, unreadAfter: 1100 * time.Millisecond},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			env := jstest.Start(t, "")
			ctx := t.Context()
			reviewCPublish(t, env, 0, c.backlog)
			src, err := jetstream.OpenSource(ctx, env.Conn, jetstream.SourceOptions{MaxAckPending: 1000, Prefetch: 8, AckWait: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Stop()
			var (
				wg      sync.WaitGroup
				nexted  atomic.Int64
				seen    sync.Map
				dupe    atomic.Value
				pubDone = make(chan struct{})
			)
			record := func(body string) {
				if _, loaded := seen.LoadOrStore(body, true); loaded {
					dupe.Store(body)
				}
			}
			wg.Add(2)
			go func() {
				defer wg.Done()
				defer close(pubDone)
				for j := range c.trickle {
					if ctx.Err() != nil {
						return
					}
					if _, err := env.Conn.JS.Publish(ctx, "webhooks.p.a", []byte(fmt.Sprint(1000+j))); err != nil {
						return
					}
					time.Sleep(10 * time.Millisecond) // pacing, not synchronisation
				}
			}()
			go func() {
				defer wg.Done()
				nctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				for {
					m, err := src.Next(nctx)
					if err != nil {
						return
					}
					nexted.Add(1)
					record(string(m.Event.Body))
					if c.nextDelay > 0 {
						time.Sleep(c.nextDelay)
					}
				}
			}()
			time.Sleep(c.unreadAfter) // the moment of the stop: the parameter under test
			if c.stopFirst {
				src.Stop()
			}
			start := time.Now()
			un := src.Unread()
			took := time.Since(start)
			for _, m := range un {
				record(string(m.Event.Body))
			}
			wg.Wait()
			<-pubDone
			if d := dupe.Load(); d != nil {
				t.Fatalf("delivery %v returned twice (Next and Unread)", d)
			}
			total := int(nexted.Load()) + len(un)
			info := reviewCWaitInfo(t, env, "delivered settles", func(i *js.ConsumerInfo) bool { return i.NumAckPending == total })
			if int(info.Delivered.Consumer) != total {
				t.Fatalf("the server delivered %d, Next returned %d and Unread %d", info.Delivered.Consumer, nexted.Load(), len(un))
			}
			// A hang, not a timing (Unread's own bound is unreadWait, 10 s).
			if took > 15*time.Second {
				t.Fatalf("Unread took %v", took)
			}
			t.Logf("Next %d, Unread %d, Unread took %v", nexted.Load(), len(un), took)
		})
	}
}
