package consumer_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookgate/hookgate/consumer"
)

// gateEffect blocks the events of one subject until gate closes.
type gateEffect struct {
	subject string
	gate    chan struct{}
}

func (g gateEffect) Apply(ctx context.Context, ev consumer.Event) error {
	if ev.Subject == g.subject {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Options.Held bounds what Run keeps in memory: with a subject's first
// event stuck in its effect, Run takes that subject's next events from
// the source (they queue behind it) only until it holds Held deliveries,
// then takes nothing more; once the stuck event finishes it takes the rest
// and every event is applied. (So serve can widen the durable consumer's
// window for events waiting out a retry's backoff without events piling
// up in memory behind a slow subject.)
func TestRunHoldsAtMostHeldDeliveries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const held, stuckSubject, total = 4, "G-1", 12
		gate := make(chan struct{})
		grants := &grantLog{}
		rules := map[string]consumer.Rule{provWatermark: {Watermark: true, Effects: []consumer.Effect{
			gateEffect{subject: stuckSubject, gate: gate},
			consumer.GrantsEffect{Template: "grants.{provider}.{subject}", Grants: grants},
		}}}
		proc := consumer.NewProcessor(rules, newMemMarks(), newMemApplied(), noLetters{}, nopAuditor{}, slog.New(slog.DiscardHandler), nil,
			consumer.Options{Owner: "me", MaxDeliver: 3, LeaseTTL: time.Hour, Now: time.Now, Held: held})
		var msgs []*consumer.Message
		deliveries := make([]*countingDelivery, total)
		for i := range total {
			subject := stuckSubject // the first 8 queue behind the stuck one
			if i >= 8 {
				subject = fmt.Sprintf("G-%d", i)
			}
			deliveries[i] = &countingDelivery{}
			ev := spec{key: fmt.Sprintf("k%d", i), provider: provWatermark, subject: subject, at: at(1 + i)}.event(uint64(i + 1))
			msgs = append(msgs, &consumer.Message{Event: ev, Deliveries: 1, Delivery: deliveries[i]})
		}
		src := newList(msgs...)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- proc.Run(ctx, src, 2) }()

		synctest.Wait() // every goroutine blocked: the stuck event, Run waiting for room
		if taken := total - src.left(); taken != held {
			t.Fatalf("with one event stuck and Held %d, Run took %d deliveries from the source, want %d", held, taken, held)
		}
		close(gate)
		synctest.Wait()
		if left := src.left(); left != 0 {
			t.Fatalf("after the stuck event finished %d deliveries were never taken", left)
		}
		for i, d := range deliveries {
			if acks, naks := d.acked(); acks != 1 || naks != 0 {
				t.Errorf("event %d: %d acks, %d naks; want applied once", i, acks, naks)
			}
		}
		if n := len(grants.deduped()); n != total {
			t.Errorf("GRANTS holds %d events, want %d", n, total)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}
