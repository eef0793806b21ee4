package consumer_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
)

// A full DLQ holds up only the events that need it (review L). An event
// whose forward is refused with a 400 is dead-lettered at once; when DLQ
// is full (DiscardNew) the DLQ write fails and the event is kept (not
// acked). It was retried in place (100 ms doubling to 3.2 s, ~6 s a
// worker) and again after each wait, like the GRANTS design taken back
// in review D, so a provider that never dead-letters waited behind them.
// Now it waits without a worker, and once DLQ has room it is
// dead-lettered, once, without its forward POSTed again.
func TestFullDLQDoesNotStarveOtherProviders(t *testing.T) {
	streams := jstest.Streams()
	streams.DLQ.MaxBytes = 64 // full: no letter fits
	env := jstest.StartWith(t, "", streams)
	refused, refusedHits := countingForward(t, http.StatusBadRequest)
	fine, _ := countingForward(t, http.StatusNoContent)
	fx := jetstream.NewEffects(env.Conn)
	rules := map[string]consumer.Rule{
		"bad":   {Watermark: true, OneAccount: true, Effects: []consumer.Effect{refused}},
		"plain": {Watermark: true, OneAccount: true, Effects: []consumer.Effect{fine}},
	}
	audit := &auditLog{}
	proc := consumer.NewProcessor(rules, env.Marks, env.Applied, fx, audit, slog.New(slog.NewTextHandler(io.Discard, nil)), nil,
		consumer.Options{Owner: "a", MaxDeliver: 3, Backoff: []time.Duration{50 * time.Millisecond}, LeaseTTL: 5 * time.Second})
	const workers = 2
	for i := range 3 * workers {
		storeAs(t, env, "bad", fmt.Sprintf("k-b%d", i), fmt.Sprintf("B-%d", i), "2026-11-30T10:00:00Z")
	}
	storeAs(t, env, "plain", "k-plain", "P-1", "2026-11-30T10:00:00Z")
	begin := time.Now()
	start(t, env, proc, workers)

	const limit = 15 * time.Second // same bound as TestFullGrantsDoesNotStarveProvidersWithoutGrants
	for audit.appliedOf("plain") == 0 {
		if time.Since(begin) > limit {
			t.Fatalf("the other provider's event not applied %s after start (refused forward POSTed %d times, %d letters in DLQ): "+
				"the workers are held by in-place retries of events waiting for a full DLQ", limit, refusedHits.Load(), letterCount(t, env))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("other provider applied after %s", time.Since(begin).Round(time.Millisecond))

	// The waiting events are not lost: once DLQ has room, each is
	// dead-lettered once, its refused forward never POSTed again.
	dlq, err := env.Conn.JS.Stream(t.Context(), jetstream.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	cfg := dlq.CachedInfo().Config
	cfg.MaxBytes = -1
	if _, err := env.Conn.JS.UpdateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(30 * time.Second); letterCount(t, env) < 3*workers; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d of %d letters in DLQ 30 s after it had room", letterCount(t, env), 3*workers)
		}
	}
	if n, hits := letterCount(t, env), refusedHits.Load(); n != 3*workers || hits != 3*workers {
		t.Fatalf("%d letters, the refused forward POSTed %d times; want %d each", n, hits, 3*workers)
	}
}
