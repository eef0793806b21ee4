package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
)

// Deliveries handed back untried (here: the subject in doubt after another
// instance died holding it, a 1 s nak each, for up to LeaseTTL +
// InDoubtWait) are not attempts: afterwards the event's first failure is
// retried, after the first backoff step. Counted as attempts, it was
// dead-lettered at once (max_deliver 3) or retried after the last step
// (max_deliver 10).
func TestHandBacksAreNotAttempts(t *testing.T) {
	for _, maxDeliver := range []int{3, 10} {
		t.Run(fmt.Sprint("max_deliver=", maxDeliver), func(t *testing.T) {
			e := newBugEnv()
			attempts := 0
			flaky := consumer.EffectFunc(func(context.Context, consumer.Event) error {
				if attempts++; attempts == 1 {
					return errors.New("forward: 503 Service Unavailable")
				}
				return nil
			})
			rules := map[string]consumer.Rule{provWatermark: {Watermark: true, Effects: []consumer.Effect{flaky,
				consumer.GrantsEffect{Template: "grants.{provider}.{subject}", Grants: e.grants}}}}
			backoff := []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute}
			p := consumer.NewProcessor(rules, e.marks, e.applied, noLetters{}, nopAuditor{}, slog.New(slog.DiscardHandler), nil,
				consumer.Options{Owner: "b", MaxDeliver: maxDeliver, LeaseTTL: time.Minute, Backoff: backoff, Now: func() time.Time { return e.now }})
			k := spec{key: "k-new", provider: provWatermark, subject: "G-1", at: at(11)}
			doubt := consumer.Mark{At: at(9), Lease: &consumer.Lease{Owner: "a", Key: "k-doubt", Until: e.now.Add(-time.Second)}}
			if _, err := e.marks.Put(t.Context(), k.markKey(), doubt, 0); err != nil {
				t.Fatal(err)
			}
			delivery := 0
			deliver := func() (consumer.Outcome, *countingDelivery) {
				delivery++
				d := &countingDelivery{}
				return p.Process(t.Context(), &consumer.Message{Event: k.event(1), Deliveries: delivery, Delivery: d}), d
			}
			for range maxDeliver {
				if out, d := deliver(); out.Decision != consumer.Retry || len(d.delays) != 1 || d.delays[0] != time.Second {
					t.Fatalf("delivery %d: %+v, naks %v; want handed back (in doubt) after 1 s", delivery, out, d.delays)
				}
				e.now = e.now.Add(time.Second)
			}
			if attempts != 0 {
				t.Fatalf("effects tried %d times while the subject was in doubt", attempts)
			}
			e.now = e.now.Add(2 * time.Minute) // the in-doubt wait is over
			out, d := deliver()
			if attempts != 1 || out.Decision != consumer.Retry {
				t.Fatalf("first attempt (503) with max_deliver %d: %q (%s) after %d attempts, want a retry", maxDeliver, out.Decision, out.Reason, attempts)
			}
			if len(d.delays) != 1 || d.delays[0] < 800*time.Millisecond || d.delays[0] > 1200*time.Millisecond {
				t.Fatalf("retry after the first attempt in %v, want the first backoff step (1 s +-20%%)", d.delays)
			}
			if out, _ := deliver(); out.Decision != consumer.Applied {
				t.Fatalf("second attempt: %q (%s), want applied", out.Decision, out.Reason)
			}
		})
	}
}

// A receiver's Retry-After (on a 429 or 503) is honoured: the retry waits
// at least that long, never longer than the longest backoff step; without
// one, or asking less, the backoff decides. A 409 (the receiver still
// processing the first request with this Idempotency-Key) is retried, not
// dead-lettered.
func TestForwardRetryAfterSetsTheRetryDelay(t *testing.T) {
	backoff := []time.Duration{time.Second, 2 * time.Minute}
	for _, tt := range []struct {
		status          int
		retryAfter      string
		atLeast, atMost time.Duration
	}{
		{http.StatusTooManyRequests, "90", 90 * time.Second, 90 * time.Second},
		{http.StatusServiceUnavailable, "3600", 2 * time.Minute, 2 * time.Minute},
		{http.StatusServiceUnavailable, "", 800 * time.Millisecond, 1200 * time.Millisecond},
		{http.StatusTooManyRequests, "0", 800 * time.Millisecond, 1200 * time.Millisecond},
		{http.StatusConflict, "", 800 * time.Millisecond, 1200 * time.Millisecond},
	} {
		t.Run(fmt.Sprint(tt.status, " ", tt.retryAfter), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				w.WriteHeader(tt.status)
			}))
			t.Cleanup(srv.Close)
			fwd, err := consumer.NewForward(consumer.ForwardOptions{URL: srv.URL, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			e := newBugEnv()
			rules := map[string]consumer.Rule{provWatermark: {Watermark: true, Effects: []consumer.Effect{fwd,
				consumer.GrantsEffect{Template: "grants.{provider}.{subject}", Grants: e.grants}}}}
			p := consumer.NewProcessor(rules, e.marks, e.applied, noLetters{}, nopAuditor{}, slog.New(slog.DiscardHandler), nil,
				consumer.Options{Owner: "b", MaxDeliver: 5, LeaseTTL: time.Minute, Backoff: backoff, Now: func() time.Time { return e.now }})
			k := spec{key: "k-ra", provider: provWatermark, subject: "G-1", at: at(11)}
			d := &countingDelivery{}
			out := p.Process(t.Context(), &consumer.Message{Event: k.event(1), Deliveries: 1, Delivery: d})
			if out.Decision != consumer.Retry || len(d.delays) != 1 {
				t.Fatalf("%d answered: %q (%s), naks %v; want one retry", tt.status, out.Decision, out.Reason, d.delays)
			}
			if d.delays[0] < tt.atLeast || d.delays[0] > tt.atMost {
				t.Fatalf("%d with Retry-After %q: retried after %v, want %v to %v", tt.status, tt.retryAfter, d.delays[0], tt.atLeast, tt.atMost)
			}
		})
	}
}

// A Retry-After beyond the longest backoff step never shortens the
// backoff's own wait, nor takes its jitter away (review D2: capped at the
// step exactly, it came back sooner than asking nothing did, all at once).
func TestRetryAfterNeverShortensTheBackoff(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	t.Cleanup(srv.Close)
	fwd, err := consumer.NewForward(consumer.ForwardOptions{URL: srv.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const step = time.Minute
	above := 0
	for i := range 40 {
		e := newBugEnv()
		rules := map[string]consumer.Rule{provWatermark: {Watermark: true, Effects: []consumer.Effect{fwd}}}
		p := consumer.NewProcessor(rules, e.marks, e.applied, noLetters{}, nopAuditor{}, slog.New(slog.DiscardHandler), nil,
			consumer.Options{Owner: "b", MaxDeliver: 5, LeaseTTL: time.Minute, Backoff: []time.Duration{step}, Now: func() time.Time { return e.now }})
		d := &countingDelivery{}
		k := spec{key: fmt.Sprintf("k-%d", i), provider: provWatermark, subject: "G-1", at: at(11)}
		p.Process(t.Context(), &consumer.Message{Event: k.event(1), Deliveries: 1, Delivery: d})
		if len(d.delays) != 1 || d.delays[0] < step || d.delays[0] > step*12/10 {
			t.Fatalf("delivery %d: naks %v; want one, between the step %v and its +20%% jitter", i, d.delays, step)
		}
		if d.delays[0] > step {
			above++
		}
	}
	if above == 0 {
		t.Fatalf("40 retries after a Retry-After beyond the step all waited exactly %v: the jitter was taken away", step)
	}
}
