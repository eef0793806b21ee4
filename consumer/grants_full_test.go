package consumer_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/nats-io/nats.go"
)

// appliedOf counts the applied records of one provider.
func (a *auditLog) appliedOf(provider string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, r := range a.recs {
		if r.Decision == consumer.Applied && r.Provider == provider {
			n++
		}
	}
	return n
}

// A full GRANTS must hold up only the events that publish there. (Review
// D, of a design built and taken back, 300c447: a full GRANTS made the
// store's trouble, not the event's, so each such event was tried again
// uncounted: in place for about
// 6 s (100 ms doubling to 3.2 s), then kept at its subject's head and, a
// second later, run again, in place for another 6 s, for as long as
// GRANTS stays full. So every kept event takes a worker for 6 of every 7
// seconds: a handful of them (one per worker) take every worker for good,
// and an event of a provider whose rule never touches GRANTS (forward
// only, `publish: ""`) waits behind them, its wait growing with the number
// of kept events (once max_ack_pending of them are kept, nothing is
// delivered at all). As released, a refused publish is a counted
// attempt, negatively acknowledged with its backoff, and the worker is
// free at once.)
func TestFullGrantsDoesNotStarveProvidersWithoutGrants(t *testing.T) {
	streams := jstest.Streams()
	streams.Grants.MaxBytes = 64 // full: no message fits
	env := jstest.StartWith(t, "", streams)
	fwd, hits := countingForward(t, http.StatusNoContent)
	fx := jetstream.NewEffects(env.Conn)
	rules := map[string]consumer.Rule{
		"grants": {Watermark: true, OneAccount: true,
			Effects: []consumer.Effect{consumer.GrantsEffect{Template: "grants.{provider}.{subject}.{type}", Grants: fx}}},
		// publish: "" in the config: a forward only, GRANTS never written.
		"plain": {Watermark: true, OneAccount: true, Effects: []consumer.Effect{fwd}},
	}
	audit := &auditLog{}
	proc := consumer.NewProcessor(rules, env.Marks, env.Applied, fx, audit, slog.New(slog.NewTextHandler(io.Discard, nil)), nil,
		consumer.Options{Owner: "a", MaxDeliver: 3, Backoff: []time.Duration{50 * time.Millisecond}, LeaseTTL: 5 * time.Second})
	const workers = 2
	for i := range 3 * workers {
		storeAs(t, env, "grants", fmt.Sprintf("k-g%d", i), fmt.Sprintf("G-%d", i), "2026-11-30T10:00:00Z")
	}
	storeAs(t, env, "plain", "k-plain", "P-1", "2026-11-30T10:00:00Z")
	begin := time.Now()
	start(t, env, proc, workers)

	const limit = 15 * time.Second // applied within 0.2 s as released; 25 s under 300c447
	for audit.appliedOf("plain") == 0 {
		if time.Since(begin) > limit {
			t.Fatalf("the forward-only provider's event not applied %s after start (forward POSTed %d times): "+
				"the workers are held by in-place retries of events waiting for a full GRANTS", limit, hits.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An event whose GRANTS message can never fit (larger than
// retention.grants.max_bytes, which `config check` lets equal
// http.max_body_bytes, though the message adds the Hookgate-* headers and
// the store's per-message overhead to the body) is refused with the same
// "maximum bytes exceeded" as a full stream. Under 300c447 (taken back)
// that was the store's trouble: the event waited at the head of its
// subject for ever, never dead-lettered, every later event of the subject
// queued behind it, though GRANTS was empty and nothing would ever make
// room for it (review D). As released it is dead-lettered after
// max_deliver attempts.
func TestGrantsMessageLargerThanMaxBytesIsDeadLettered(t *testing.T) {
	const maxBody = 1024 // http.max_body_bytes = retention.grants.max_bytes
	streams := jstest.Streams()
	streams.Grants.MaxBytes = maxBody
	env := jstest.StartWith(t, "", streams)
	fx := jetstream.NewEffects(env.Conn)
	rules := map[string]consumer.Rule{"grants": {Watermark: true, OneAccount: true,
		Effects: []consumer.Effect{consumer.GrantsEffect{Template: "grants.{provider}.{subject}.{type}", Grants: fx}}}}
	audit := &auditLog{}
	proc := consumer.NewProcessor(rules, env.Marks, env.Applied, fx, audit, slog.New(slog.NewTextHandler(io.Discard, nil)), nil,
		consumer.Options{Owner: "a", MaxDeliver: 2, Backoff: []time.Duration{50 * time.Millisecond}, LeaseTTL: 5 * time.Second})

	// A body of exactly http.max_body_bytes: the gateway takes it.
	prefix := `{"grant_id":"G-big","occurred_at":"2026-11-30T10:00:00Z","pad":"`
	body := prefix + strings.Repeat("x", maxBody-len(prefix)-2) + `"}`
	if len(body) != maxBody {
		t.Fatalf("body is %d bytes, want %d", len(body), maxBody)
	}
	h := nats.Header{}
	h.Set(event.HeaderKey, "k-big")
	h.Set(event.HeaderProvider, "grants")
	h.Set(event.HeaderAccount, "default")
	h.Set(event.HeaderReceivedAt, time.Now().UTC().Format(time.RFC3339Nano))
	h.Set(event.HeaderSubject, "G-big")
	h.Set(event.HeaderOccurredAt, "2026-11-30T10:00:00Z")
	h.Set(event.HeaderType, "t")
	if _, err := jetstream.NewPublisher(env.Conn, 5*time.Second).Publish(t.Context(),
		jetstream.Message{Subject: "webhooks.grants.default", Key: "k-big", Header: h, Body: []byte(body)}); err != nil {
		t.Fatal(err)
	}
	start(t, env, proc, 1)

	for deadline := time.Now().Add(20 * time.Second); letterCount(t, env) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("event whose GRANTS message is larger than GRANTS's max_bytes (GRANTS holds %d messages) not dead-lettered in 20 s "+
				"(%d applied records): it waits for room that can never be made", len(grants(t, env)), audit.count(consumer.Applied))
		}
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

// countingForward is a forward effect to a loopback receiver that answers
// status and counts the requests it got.
func countingForward(t *testing.T, status int) (*consumer.Forward, *atomic.Int32) {
	t.Helper()
	hits := new(atomic.Int32)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(status)
	}))
	t.Cleanup(target.Close)
	fwd, err := consumer.NewForward(consumer.ForwardOptions{URL: target.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return fwd, hits
}
