package main

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookgate/hookgate/jetstream"
)

// TestPauseGate: a pause stops the running consumer and is answered only
// once it has stopped; no consumer starts while it is in force; a resume
// of another pause changes nothing, its own ends it; and a pause nobody
// resumes (the backup died) runs out by itself.
func TestPauseGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var told atomic.Bool
		g := newPauseGate("host/1", &told)
		ctx := t.Context()
		runCtx, done, ok := g.start(ctx)
		if !ok {
			t.Fatal("no pause, yet the consumer may not start")
		}
		answered := make(chan jetstream.PauseAnswer, 1)
		go func() { answered <- g.handle(jetstream.PauseRequest{ID: "b1", For: time.Minute}) }()
		<-runCtx.Done() // the pause stops the running consumer
		synctest.Wait()
		select {
		case a := <-answered:
			t.Fatalf("answered %+v while the consumer still ran", a)
		default:
		}
		if !done() {
			t.Fatal("the run's end was not told as a pause's")
		}
		if a := <-answered; !a.Paused || !a.Applying || a.Instance != "host/1" || !told.Load() {
			t.Fatalf("answer %+v (told paused: %v), want paused, applying, host/1", a, told.Load())
		}
		if _, _, ok := g.start(ctx); ok {
			t.Fatal("a consumer started while paused")
		}
		if a := g.handle(jetstream.PauseRequest{ID: "other", Resume: true}); a.Paused {
			t.Fatalf("a resume answered %+v", a)
		}
		waited := make(chan bool, 1)
		start := time.Now()
		go func() { waited <- g.wait(ctx) }()
		synctest.Wait()
		select {
		case <-waited:
			t.Fatal("another pause's resume ended this one")
		default:
		}
		if a := g.handle(jetstream.PauseRequest{ID: "b1", For: time.Minute}); !a.Paused || a.Applying {
			t.Fatalf("a second pause with nothing running: %+v, want paused at once, not applying", a)
		}
		g.handle(jetstream.PauseRequest{ID: "b1", Resume: true})
		if !<-waited || time.Since(start) != 0 {
			t.Fatalf("the pause's own resume did not end the wait at once (%s)", time.Since(start))
		}
		// A renewal handled after its resume (requests are handled
		// concurrently) does not pause again.
		if a := g.handle(jetstream.PauseRequest{ID: "b1", For: time.Minute}); a.Paused || told.Load() {
			t.Fatalf("a late renewal of a resumed pause: %+v, told paused %v", a, told.Load())
		}
		if _, done, ok := g.start(ctx); !ok {
			t.Fatal("resumed, yet the consumer may not start")
		} else if done() {
			t.Fatal("a run stopped without a pause told as a pause's")
		}

		g.handle(jetstream.PauseRequest{ID: "b2", For: 30 * time.Second})
		start = time.Now()
		if !g.wait(ctx) || time.Since(start) != 30*time.Second || told.Load() {
			t.Fatalf("an unresumed pause ended after %s (still told paused: %v), want 30s", time.Since(start), told.Load())
		}
		g.handle(jetstream.PauseRequest{ID: "b3", For: 24 * time.Hour})
		start = time.Now()
		if !g.wait(ctx) || time.Since(start) != maxPause {
			t.Fatalf("a day's pause ended after %s, want it capped at %s", time.Since(start), maxPause)
		}
		cctx, cancel := context.WithCancel(ctx)
		g.handle(jetstream.PauseRequest{ID: "b4", For: time.Minute})
		cancel()
		if g.wait(cctx) {
			t.Fatal("wait reported the pause over when its ctx ended")
		}
	})
}
