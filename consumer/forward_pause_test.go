package consumer

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// A 429 or 503 with Retry-After pauses the forward (through the metrics
// wrapper too): PausedUntil says until when, fresh once per pause; one
// without Retry-After does not.
func TestForwardRetryAfterPauses(t *testing.T) {
	var answer atomic.Value
	answer.Store([2]string{"429", "30"})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := answer.Load().([2]string)
		if a[1] != "" {
			w.Header().Set("Retry-After", a[1])
		}
		code, _ := strconv.Atoi(a[0])
		w.WriteHeader(code)
	}))
	defer srv.Close()
	f, err := NewForward(ForwardOptions{URL: srv.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e := NewForwardMetrics(nil).Wrap("p", f)
	pauser, ok := e.(Pauser)
	if !ok {
		t.Fatal("the metrics wrapper hides the forward's pause")
	}
	ev := Event{Key: "p:default:evt:1", Provider: "p", Body: []byte(`{}`)}
	if until, _ := pauser.PausedUntil(time.Now(), 0); !until.IsZero() {
		t.Fatalf("paused before any answer: until %v", until)
	}
	before := time.Now()
	if err := e.Apply(context.Background(), ev); err == nil {
		t.Fatal("a 429 applied")
	}
	until, fresh := pauser.PausedUntil(time.Now(), 0)
	if !fresh || until.Before(before.Add(29*time.Second)) || until.After(time.Now().Add(31*time.Second)) {
		t.Fatalf("after 429 Retry-After: 30: until %v (fresh %v), want about 30 s from now, fresh", until, fresh)
	}
	if _, fresh := pauser.PausedUntil(time.Now(), 0); fresh {
		t.Error("the same pause reported fresh twice")
	}
	if until, _ := pauser.PausedUntil(time.Now().Add(31*time.Second), 0); !until.IsZero() {
		t.Errorf("still paused after its end: until %v", until)
	}

	g, err := NewForward(ForwardOptions{URL: srv.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	answer.Store([2]string{"503", ""})
	if err := g.Apply(context.Background(), ev); err == nil {
		t.Fatal("a 503 applied")
	}
	if until, _ := g.PausedUntil(time.Now(), 0); !until.IsZero() {
		t.Errorf("a 503 without Retry-After paused the forward until %v", until)
	}
}

// At a pause's end the workers all try at once and each gets a Retry-After
// of its own: one pause's news, not one a worker (the line was logged once
// a worker; an operations audit, stop 41). A pause asked after the last
// announced one ended is news again.
func TestForwardPausesAskedTogetherAreOneNews(t *testing.T) {
	f, err := NewForward(ForwardOptions{URL: "http://127.0.0.1:1", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	f.pause(t0, t0.Add(10*time.Second))
	if _, fresh := f.PausedUntil(t0.Add(time.Second), 0); !fresh {
		t.Fatal("the first pause was not news")
	}
	// The pause ended at t0+10s; two workers' answers come in together.
	news := 0
	for i, at := range []time.Duration{10100 * time.Millisecond, 10150 * time.Millisecond, 10200 * time.Millisecond} {
		f.pause(t0.Add(at), t0.Add(at+10*time.Second))
		if _, fresh := f.PausedUntil(t0.Add(at+time.Millisecond), 0); fresh {
			news++
		} else if i == 0 {
			t.Error("the pause after the first one ended was not news")
		}
	}
	if news != 1 {
		t.Errorf("three answers asking together for a pause were news %d times, want once", news)
	}
	// Capped by the limit: the first pause, asked for 10 s, ends at 2 s;
	// one asked at 3 s is news.
	g, _ := NewForward(ForwardOptions{URL: "http://127.0.0.1:1", Timeout: time.Second})
	g.pause(t0, t0.Add(10*time.Second))
	g.PausedUntil(t0.Add(time.Second), 2*time.Second)
	g.pause(t0.Add(3*time.Second), t0.Add(13*time.Second))
	if _, fresh := g.PausedUntil(t0.Add(3*time.Second+time.Millisecond), 2*time.Second); !fresh {
		t.Error("a pause asked after the last one's capped end was not news")
	}
}
