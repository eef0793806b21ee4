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
