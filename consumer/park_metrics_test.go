package consumer_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// failingGrants fails every GRANTS publish of key (a failed attempt).
type failingGrants struct {
	*jetstream.Effects
	key string
}

func (f failingGrants) PublishGrantAfter(ctx context.Context, subject, key string, last uint64, h http.Header, body []byte) (uint64, error) {
	if key == f.key {
		return 0, errors.New("GRANTS publish failed")
	}
	return f.Effects.PublishGrantAfter(ctx, subject, key, last, h, body)
}

// An event kept waiting several times whose next run then really fails
// (counted toward max_deliver, handed back with its backoff) counts that
// retry: only the runs that find a kept event still waiting are left out
// (found by review: every retry after the second wait was left out).
func TestRunParkedThenFailedAttemptIsCounted(t *testing.T) {
	s := newSeqEnv(t)
	fx := jetstream.NewEffects(s.env.Conn)
	s.applyThenCrash(t, s.proc("a", fx, &auditLog{}), ev{}, ev{"d", "G-1", "2026-11-30T10:00:00Z", "a"})
	s.advance(90 * time.Second) // past d's lease, within the in-doubt wait
	reg := prometheus.NewRegistry()
	b := s.procWith("b", failingGrants{fx, "e"}, &auditLog{}, slog.New(slog.NewTextHandler(io.Discard, nil)), consumer.NewMetrics(reg), nil)
	e := s.event(t, ev{"e", "G-1", "2026-11-30T11:00:00Z", "a"})
	e.Seq = 2
	del := &countingDelivery{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- b.Run(ctx, newList(&consumer.Message{Event: e, Deliveries: 2, Delivery: del}), 4)
	}()
	waitFor(t, "e kept three times", func() bool { return consumer.Parks(b) >= 3 })
	s.advance(time.Hour) // the in-doubt wait is over: e's next run tries its effects, and fails
	waitFor(t, "e's failed attempt negatively acknowledged", func() bool { del.mu.Lock(); defer del.mu.Unlock(); return del.naks > 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("naks before the stop: delays %v", del.delays)
	if got := retries(t, reg); got != 2 {
		t.Fatalf("hookgate_consumer_events_total{decision=retry} = %v, want 2 (the first wait, then the failed attempt)", got)
	}
}
