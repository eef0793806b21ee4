package consumer_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
)

// pauseReceiver answers its first request 429 with Retry-After: retryAfter,
// then 200; it records the Idempotency-Key of every request it served.
type pauseReceiver struct {
	srv     *httptest.Server
	refused atomic.Bool
	mu      sync.Mutex
	served  []string
}

func newPauseReceiver(t *testing.T, retryAfter string) *pauseReceiver {
	r := &pauseReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.refused.CompareAndSwap(false, true) {
			w.Header().Set("Retry-After", retryAfter)
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		r.mu.Lock()
		r.served = append(r.served, req.Header.Get("Idempotency-Key"))
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *pauseReceiver) got(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.served, key)
}

// pauseRun runs a processor whose only rule forwards to recv over msgs
// (workers 1, so they start in order) until the test ends.
func pauseRun(t *testing.T, recv *pauseReceiver, now, procNow func() time.Time, watermark bool, marks *memMarks, applied *memApplied, audit *auditLog, backoff time.Duration, msgs ...*consumer.Message) {
	t.Helper()
	f, err := consumer.NewForward(consumer.ForwardOptions{URL: recv.srv.URL, Timeout: 5 * time.Second, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]consumer.Rule{"p": {Watermark: watermark, OneAccount: true, Effects: []consumer.Effect{f}}}
	proc := consumer.NewProcessor(rules, marks, applied, noLetters{}, audit, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, consumer.Options{
		Owner: "me", MaxDeliver: 5, Backoff: []time.Duration{backoff}, LeaseTTL: time.Minute, Now: procNow,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = proc.Run(ctx, newList(msgs...), 1) }()
	t.Cleanup(func() { cancel(); <-done })
}

func pauseMsg(key, subject string, at time.Time) *consumer.Message {
	ev := consumer.Event{Key: key, Provider: "p", Account: "default", Subject: subject, Type: "t", OccurredAt: at, Body: []byte(`{}`)}
	return &consumer.Message{Event: ev, Deliveries: 1, Delivery: &countingDelivery{}}
}

// pollFor waits up to d for cond.
func pollFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}

// A receiver's Retry-After of a day (forwardRetryAfter's clamp) pauses the
// provider for the longest backoff step (the README's "up to the longest
// consumer.backoff step"), not for the day: the cap bounded each park, and
// the event was parked again and again until the day was over.
func TestReviewAZForwardPauseEndsAfterTheLongestBackoff(t *testing.T) {
	recv := newPauseReceiver(t, "86400")
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	pauseRun(t, recv, nil, nil, false, newMemMarks(), newMemApplied(), &auditLog{}, 100*time.Millisecond,
		pauseMsg("p:default:e-1", "", at), pauseMsg("p:default:e-2", "", at))
	pollFor(t, 5*time.Second, "the 429", recv.refused.Load)
	pollFor(t, 5*time.Second, "e-2 forwarded after a pause of the longest backoff step (100ms)", func() bool { return recv.got("p:default:e-2") })
}

// A wall clock stepped back (NTP) after a receiver's Retry-After: 60 does
// not stretch the pause by the step: the pause was kept as a wall-clock
// instant, and every event of the provider waited, untried, for an hour.
func TestReviewAZForwardPauseSurvivesAClockStepBack(t *testing.T) {
	recv := newPauseReceiver(t, "60")
	var stepped atomic.Bool
	base := time.Now().Round(0)
	start := time.Now()
	// Wall clock only (no monotonic reading), as after a restart; the
	// forward read it before the step, the processor after.
	wall := func() time.Time { return base.Add(time.Since(start)) }
	procNow := func() time.Time {
		if stepped.Load() {
			return wall().Add(-time.Hour)
		}
		return wall()
	}
	fwdNow := func() time.Time {
		t := wall()
		if !stepped.Load() && recv.refused.Load() {
			stepped.Store(true) // the 429's answer is read before the step
		}
		return t
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	pauseRun(t, recv, fwdNow, procNow, false, newMemMarks(), newMemApplied(), &auditLog{}, 30*time.Second,
		pauseMsg("p:default:e-1", "", at), pauseMsg("p:default:e-2", "", at))
	pollFor(t, 5*time.Second, "the 429", recv.refused.Load)
	pollFor(t, 5*time.Second, "e-2 forwarded after the clock stepped back an hour", func() bool { return recv.got("p:default:e-2") })
}

// During a pause an event that needs no forward is decided at once: a
// stale one is acknowledged stale, not parked for the longest backoff step
// (the pause was checked before the watermark).
func TestReviewAZForwardPauseDoesNotHoldAStaleEvent(t *testing.T) {
	recv := newPauseReceiver(t, "3600")
	marks := newMemMarks()
	t1 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	stale := pauseMsg("p:default:old", "S", t1)
	if _, err := marks.Put(context.Background(), consumer.LeaseKey(stale.Event), consumer.Mark{At: t1.Add(time.Hour), Keys: []string{"p:default:new"}}, 0); err != nil {
		t.Fatal(err)
	}
	audit := &auditLog{}
	pauseRun(t, recv, nil, nil, true, marks, newMemApplied(), audit, 30*time.Second,
		pauseMsg("p:default:e-1", "T", t1), stale)
	pollFor(t, 5*time.Second, "the 429", recv.refused.Load)
	pollFor(t, 5*time.Second, "the stale event decided during the pause", func() bool { return audit.count("stale") == 1 })
}

// During a pause, a subject waiting for its in-doubt event (its holder died
// after applying it, before committing: the lease names it, APPLIED has it)
// still lets that event's redelivery settle it, ahead of the newer event,
// without a forward. Before, the newer event was parked for the pause
// before it looked at the mark, forgot the in-doubt key it waits for, and
// the in-doubt event queued behind it for the whole pause (past
// InDoubtWait, after which the newer one moves on without it).
func TestReviewAZForwardPauseLetsAnInDoubtEventSettle(t *testing.T) {
	recv := newPauseReceiver(t, "3600")
	marks, applied := newMemMarks(), newMemApplied()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	doubt := pauseMsg("p:default:d", "S", t0.Add(time.Minute))
	newer := pauseMsg("p:default:n", "S", t0.Add(2*time.Minute))
	lease := &consumer.Lease{Owner: "dead", Key: doubt.Event.Key, Until: time.Now().Add(-time.Second)}
	if _, err := marks.Put(context.Background(), consumer.LeaseKey(doubt.Event), consumer.Mark{At: t0, Lease: lease}, 0); err != nil {
		t.Fatal(err)
	}
	if err := applied.Remember(context.Background(), doubt.Event.Key); err != nil {
		t.Fatal(err)
	}
	audit := &auditLog{}
	pauseRun(t, recv, nil, nil, true, marks, applied, audit, 30*time.Second,
		pauseMsg("p:default:e-1", "T", t0), newer, doubt)
	pollFor(t, 5*time.Second, "the 429", recv.refused.Load)
	pollFor(t, 5*time.Second, "the in-doubt event settled during the pause", func() bool {
		return len(audit.of(doubt.Event.Key, "applied")) == 1
	})
	if recv.got(doubt.Event.Key) || recv.got(newer.Event.Key) {
		t.Error("a forward reached the receiver during its pause")
	}
	if len(audit.of(newer.Event.Key, "applied")) != 0 {
		t.Error("the newer event applied during the pause")
	}
}
