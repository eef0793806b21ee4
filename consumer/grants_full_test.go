package consumer_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
)

// countingGrants is the real GRANTS store, counting the publishes a rule
// makes through it (sequenced ones included).
type countingGrants struct {
	*jetstream.Effects
	publishes atomic.Int32
}

func (c *countingGrants) PublishGrant(ctx context.Context, subject, key string, h http.Header, body []byte) (uint64, error) {
	c.publishes.Add(1)
	return c.Effects.PublishGrant(ctx, subject, key, h, body)
}

func (c *countingGrants) PublishGrantAfter(ctx context.Context, subject, key string, last uint64, h http.Header, body []byte) (uint64, error) {
	c.publishes.Add(1)
	return c.Effects.PublishGrantAfter(ctx, subject, key, last, h, body)
}

// A full GRANTS is the store's trouble, not the event's: the event waits,
// its attempts not counted, never dead-lettered for it, its forward POSTed
// once; once GRANTS has room it applies. Before, each refused publish was
// a counted attempt: the forward was POSTed max_deliver times and the
// event dead-lettered, though its receiver had taken it (review C).
func TestFullGrantsWaitsWithoutDeadLetteringOrForwardingAgain(t *testing.T) {
	for _, tc := range []struct{ name, template string }{
		{"sequenced", "grants.{provider}.{subject}.{type}"},
		{"deduplicated", "grants.{provider}.{type}"}, // no {subject}: Nats-Msg-Id deduplication
	} {
		t.Run(tc.name, func(t *testing.T) {
			streams := jstest.Streams()
			streams.Grants.MaxBytes = 64 // full: no message fits
			env := jstest.StartWith(t, "", streams)
			var hits atomic.Int32
			target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				w.WriteHeader(http.StatusNoContent)
			}))
			t.Cleanup(target.Close)
			fwd, err := consumer.NewForward(consumer.ForwardOptions{URL: target.URL, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			store := &countingGrants{Effects: jetstream.NewEffects(env.Conn)}
			rules := map[string]consumer.Rule{"grants": {Watermark: true, OneAccount: true,
				Effects: []consumer.Effect{fwd, consumer.GrantsEffect{Template: tc.template, Grants: store}}}}
			audit := &auditLog{}
			const maxDeliver = 3
			proc := consumer.NewProcessor(rules, env.Marks, env.Applied, store.Effects, audit, slog.New(slog.NewTextHandler(io.Discard, nil)), nil,
				consumer.Options{Owner: "a", MaxDeliver: maxDeliver, Backoff: []time.Duration{50 * time.Millisecond}, LeaseTTL: time.Second})
			storeAs(t, env, "grants", "k-full", "G-1", "2026-11-30T10:00:00Z")
			start(t, env, proc, 1)

			// The fault hits while the event is pending: wait until GRANTS
			// refused it twice as often as max_deliver allows attempts.
			for deadline := time.Now().Add(30 * time.Second); store.publishes.Load() < 2*maxDeliver; time.Sleep(20 * time.Millisecond) {
				if n := letterCount(t, env); n != 0 {
					t.Fatalf("%d letters in DLQ after %d GRANTS publishes (forward POSTed %d times), want none: a full GRANTS is not the event's failure",
						n, store.publishes.Load(), hits.Load())
				}
				if time.Now().After(deadline) {
					t.Fatalf("GRANTS publish tried %d times in 30 s, want %d (forward POSTed %d times, %d letters in DLQ)",
						store.publishes.Load(), 2*maxDeliver, hits.Load(), letterCount(t, env))
				}
			}
			if n := letterCount(t, env); n != 0 {
				t.Fatalf("%d letters in DLQ while GRANTS was full, want none: a full GRANTS is not the event's failure", n)
			}
			if n := hits.Load(); n != 1 {
				t.Fatalf("forward POSTed %d times while GRANTS was full, want 1", n)
			}

			s, err := env.Conn.JS.Stream(t.Context(), jetstream.StreamGrants)
			if err != nil {
				t.Fatal(err)
			}
			cfg := s.CachedInfo().Config
			cfg.MaxBytes = 1 << 20
			if _, err := env.Conn.JS.UpdateStream(t.Context(), cfg); err != nil {
				t.Fatal(err)
			}
			waitSettled(t, env)
			if got := grants(t, env); len(got) != 1 || !slices.ContainsFunc(got, func(l string) bool { return l == "grants.grants.t k-full" || l == "grants.grants.G-1.t k-full" }) {
				t.Fatalf("GRANTS = %q, want k-full once", got)
			}
			if n := hits.Load(); n != 1 {
				t.Fatalf("forward POSTed %d times in all, want 1", n)
			}
			if n := letterCount(t, env); n != 0 {
				t.Fatalf("%d letters in DLQ, want none", n)
			}
			if n := audit.count(consumer.Applied); n != 1 {
				t.Fatalf("%d applied records, want 1", n)
			}
		})
	}
}

func letterCount(t testing.TB, env *jstest.Env) uint64 {
	t.Helper()
	s, err := env.Conn.JS.Stream(t.Context(), jetstream.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}
