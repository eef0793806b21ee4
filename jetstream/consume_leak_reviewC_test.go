package jetstream_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	js "github.com/nats-io/nats.go/jetstream"
)

// reviewCSourceGoroutines counts the goroutines of the source's pull loop
// and of nats.go's pulls.
func reviewCSourceGoroutines() (int, string) {
	buf := make([]byte, 16<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	var seen []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "nats.go/jetstream.(*pullConsumer).Consume") ||
			strings.Contains(g, "nats.go/jetstream.(*pullConsumer).fetch") ||
			strings.Contains(g, "nats.go/jetstream.(*pullSubscription)") ||
			strings.Contains(g, "hookgate/jetstream.(*Source).pull") {
			n++
			seen = append(seen, g)
		}
	}
	return n, strings.Join(seen, "\n\n")
}

// Whatever ends the source (Stop with its callback blocked, its connection
// closed, its durable consumer deleted under a waiting pull), Next returns
// an error within 10 s and none of the source's goroutines is left behind.
// Guard test (passes on the reviewed code).
func TestReviewCSourceEndsWithoutLeaks(t *testing.T) {
	for _, how := range []string{"stop-while-blocked", "connection-closed", "consumer-deleted"} {
		t.Run(how, func(t *testing.T) {
			env := jstest.Start(t, "")
			ctx := t.Context()
			if how == "stop-while-blocked" {
				reviewCPublish(t, env, 0, 10)
			}
			src, err := jetstream.OpenSource(ctx, env.Conn, jetstream.SourceOptions{MaxAckPending: 1000, Prefetch: 4, AckWait: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(src.Stop)
			// The pull loop, and its fetch while one is under way: the count
			// must see them.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if n, _ := reviewCSourceGoroutines(); n >= 1 {
					break
				} else if time.Now().After(deadline) {
					t.Fatalf("only %d goroutines of the running source found: the count does not see them", n)
				}
			}
			switch how {
			case "stop-while-blocked":
				reviewCWaitInfo(t, env, "4 delivered", func(i *js.ConsumerInfo) bool { return i.NumAckPending == 4 })
				src.Stop()
			case "connection-closed":
				reviewCWaitInfo(t, env, "a pull waits", func(i *js.ConsumerInfo) bool { return i.NumWaiting > 0 })
				env.Conn.NC.Close()
			case "consumer-deleted":
				reviewCWaitInfo(t, env, "a pull waits", func(i *js.ConsumerInfo) bool { return i.NumWaiting > 0 })
				if err := env.Conn.JS.DeleteConsumer(ctx, jetstream.StreamWebhooks, jetstream.DurableApply); err != nil {
					t.Fatal(err)
				}
			}
			nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			for {
				_, err := src.Next(nctx)
				if err == nil {
					continue
				}
				if !errors.Is(err, js.ErrMsgIteratorClosed) {
					t.Fatalf("Next: %v, want the closed iterator's error within 10 s", err)
				}
				break
			}
			// What the runner does then.
			_ = src.Unread()
			src.Stop()
			var left int
			var stacks string
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if left, stacks = reviewCSourceGoroutines(); left == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("10 s after the end: %d goroutines of the source left:\n%s", left, stacks)
				}
			}
		})
	}
}
