package consumer_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
)

// downGrants is GRANTS while the store cannot take writes (a full disk, no
// connection): every publish fails the way jetstream.Effects reports it.
type downGrants struct {
	*jetstream.Effects
	down atomic.Bool
}

func (g *downGrants) PublishGrantAfter(ctx context.Context, subject, key string, last uint64, h http.Header, body []byte) (uint64, error) {
	if g.down.Load() {
		return 0, fmt.Errorf("%w: jetstream unavailable: the event store stopped writing after a write error", consumer.ErrStoreUnavailable)
	}
	return g.Effects.PublishGrantAfter(ctx, subject, key, last, h, body)
}

// An event whose GRANTS publish fails because the store is down is not
// at fault: it is tried again in place, its subject held, no attempt
// counted. Counted, it released its subject: a newer event of it applied
// as soon as the store was back (or, after a restart, ahead of it), and
// the older one came back stale, never applied (a full disk lost 2-6
// events a run that way; a resource audit, stop 39).
func TestStoreUnavailableHoldsTheEventsPlace(t *testing.T) {
	s := newSeqEnv(t)
	g := &downGrants{Effects: jetstream.NewEffects(s.env.Conn)}
	g.down.Store(true)
	audit := &auditLog{}
	p := s.proc("a", g, audit)
	k1 := s.event(t, ev{"k1", "G-1", "2026-11-30T10:00:00Z", "a"})
	k1.Seq = 1
	k2 := s.event(t, ev{"k2", "G-1", "2026-11-30T11:00:00Z", "a"})
	k2.Seq = 2
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- p.Run(ctx, newList(&consumer.Message{Event: k1, Deliveries: 1, Delivery: &countingDelivery{}},
			&consumer.Message{Event: k2, Deliveries: 1, Delivery: &countingDelivery{}}), 4)
	}()
	// k1 waits at its subject's head (counted, it would have been handed
	// back with its backoff, and k2 would have taken the subject).
	waitFor(t, "k1 kept at its subject's head", func() bool { return consumer.Parks(p) >= 1 })
	if got := grants(t, s.env); len(got) != 0 {
		t.Fatalf("GRANTS while its store is down: %v", got)
	}
	g.down.Store(false)
	waitFor(t, "k1 and k2 applied", func() bool {
		return len(audit.of("k1", event.DecisionApplied)) == 1 && len(audit.of("k2", event.DecisionApplied)) == 1
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := grants(t, s.env); len(got) != 2 || !strings.HasSuffix(got[0], " k1") || !strings.HasSuffix(got[1], " k2") {
		t.Fatalf("GRANTS = %v, want k1 then k2", got)
	}
	if n := len(audit.of("k1", event.DecisionStale)); n != 0 {
		t.Fatalf("k1 stale %d times", n)
	}
}

// While GRANTS is down, the tries in place of one delivery do not POST
// its forward again (a cluster whose GRANTS lost its leader re-sent each
// head event's forward every second; found by review), and past
// storeTroubleMax the failure counts as an attempt, so a cause that never
// passes (a permission the NATS user lacks reads as no answer) does not
// hold the subject for good.
func TestStoreUnavailableSendsTheForwardOnceAndIsBounded(t *testing.T) {
	s := newSeqEnv(t)
	g := &downGrants{Effects: jetstream.NewEffects(s.env.Conn)}
	g.down.Store(true)
	var forwards atomic.Int32
	forward := consumer.EffectFunc(func(context.Context, consumer.Event) error { forwards.Add(1); return nil })
	rules := map[string]consumer.Rule{"grants": {Watermark: true, OneAccount: true, Effects: []consumer.Effect{
		forward, consumer.GrantsEffect{Template: "grants.{provider}.{subject}.{type}", Grants: g},
	}}}
	p := consumer.NewProcessor(rules, s.env.Marks, s.env.Applied, jetstream.NewEffects(s.env.Conn), &auditLog{}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, consumer.Options{
		Owner: "a", MaxDeliver: 5, Backoff: []time.Duration{time.Second}, LeaseTTL: time.Minute, Horizon: time.Hour, Now: s.now,
	})
	m := &consumer.Message{Event: s.event(t, ev{"k1", "G-1", "2026-11-30T10:00:00Z", "a"}), Deliveries: 1, Delivery: &countingDelivery{}}
	if out := p.Process(t.Context(), m); !consumer.Transient(out) {
		t.Fatalf("GRANTS down: %+v, want a retry in place", out)
	}
	if n := forwards.Load(); n != 1 {
		t.Fatalf("the forward ran %d times over the tries in place of one delivery, want 1", n)
	}
	s.advance(31 * time.Minute)
	if out := p.Process(t.Context(), m); out.Decision != consumer.Retry || consumer.Transient(out) {
		t.Fatalf("GRANTS down past the bound: %+v, want a counted retry", out)
	}
	g.down.Store(false)
	if out := p.Process(t.Context(), m); out.Decision != consumer.Applied {
		t.Fatalf("GRANTS back: %+v, want applied", out)
	}
}
