package consumer_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookgate/hookgate/consumer"
)

// oneMessage is a Source that delivers m once, then waits for the end.
type oneMessage struct {
	mu   sync.Mutex
	m    *consumer.Message
	sent bool
}

func (s *oneMessage) Next(ctx context.Context) (*consumer.Message, error) {
	s.mu.Lock()
	if !s.sent {
		s.sent = true
		s.mu.Unlock()
		return s.m, nil
	}
	s.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

// Stopping Run does not wait out another holder's lease: an event waiting
// for its subject (nothing of it done yet) is handed back at once instead
// of holding the shutdown for up to LeaseTTL. (Seen in CI: a restart after
// kill -9 redelivered an event whose lease the dead process still held,
// and SIGTERM then took over 30 s.) Virtual time, so the elapsed time is
// exact.
func TestStopDoesNotWaitForAnotherHoldersLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		marks, grants := newMemMarks(), &grantLog{}
		ev := spec{key: "k", provider: provWatermark, subject: "G-1", at: at(10)}.event(1)
		held := consumer.Mark{Lease: &consumer.Lease{Owner: "other", Key: "k-other", Until: time.Now().Add(time.Hour)}}
		if _, err := marks.Put(t.Context(), consumer.MarkKey(ev), held, 0); err != nil {
			t.Fatal(err)
		}
		rules := map[string]consumer.Rule{provWatermark: {Watermark: true, Effects: []consumer.Effect{
			consumer.GrantsEffect{Template: "grants.{provider}.{subject}", Grants: grants},
		}}}
		proc := consumer.NewProcessor(rules, marks, newMemApplied(), noLetters{}, nopAuditor{}, slog.New(slog.DiscardHandler), nil,
			consumer.Options{Owner: "me", MaxDeliver: 3, LeaseTTL: time.Hour, Now: time.Now})
		d := &countingDelivery{}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- proc.Run(ctx, &oneMessage{m: &consumer.Message{Event: ev, Deliveries: 1, Delivery: d}}, 1)
		}()
		for { // until the lane waits for the lease (it keeps the delivery alive meanwhile)
			if d.count() > 0 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		stopAt := time.Now()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		if took := time.Since(stopAt); took > time.Second {
			t.Fatalf("Run took %s to stop: it held the event that waits for another holder's lease", took)
		}
		if acks, naks := d.acked(); acks != 0 || naks != 1 {
			t.Fatalf("acked %d, naked %d; want the event handed back once", acks, naks)
		}
		if got := grants.calls(); len(got) != 0 {
			t.Fatalf("effects ran: %v", got)
		}
	})
}
