package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookgate/hookgate/jetstream"
)

// pauseGate lets `hookgate backup` stop this serve's consumer while it
// reads the streams, so that they hold one moment of the applying: a
// stream read while an event was applied would hold its effects and
// another not (an event acknowledged without its mark, a mark behind a
// GRANTS message: reviews AS, AT and BA). A pause stops the running
// consumer as a stop does (the events under way finish, the rest is
// handed back) and keeps it from starting again until the pause ends: it
// is resumed, or its time runs out (a backup that died leaves nothing
// held). Safe for concurrent use.
type pauseGate struct {
	instance string
	told     *atomic.Bool // paused now, for hookgate.instances (may be nil)
	mu       sync.Mutex
	// pauses in force, by the ID of the backup that asked, to when each
	// ends unless extended: two backups at once each hold their own, and
	// the consumer runs again only when none is left.
	pauses map[string]time.Time
	ended  []string // the last pauses resumed: a renewal of one that comes late is not a new one
	wake   chan struct{}
	cancel context.CancelFunc // the running consumer's; nil when none runs
	idle   chan struct{}      // closed while no consumer runs
	// byPause: the running consumer was stopped by a pause
	byPause bool
}

const (
	// maxPause bounds one request's pause (a backup extends it while it
	// reads).
	maxPause = 2 * time.Minute
	// pauseQuiesceWait bounds the wait for the events under way.
	pauseQuiesceWait = 2 * time.Minute
	// keptEnded is how many resumed pauses are remembered.
	keptEnded = 16
)

func newPauseGate(instance string, told *atomic.Bool) *pauseGate {
	idle := make(chan struct{})
	close(idle)
	return &pauseGate{instance: instance, told: told, pauses: map[string]time.Time{}, wake: make(chan struct{}), idle: idle}
}

// handle answers one request on jetstream.SubjectPause: a pause is
// answered once no consumer runs here (at once on a standby, which keeps
// the pause for when it takes the consumer lock).
func (g *pauseGate) handle(req jetstream.PauseRequest) jetstream.PauseAnswer {
	a := jetstream.PauseAnswer{Instance: g.instance}
	g.mu.Lock()
	if req.Resume {
		delete(g.pauses, req.ID)
		if !slices.Contains(g.ended, req.ID) {
			g.ended = append(g.ended, req.ID)
			if len(g.ended) > keptEnded {
				g.ended = g.ended[1:]
			}
		}
		g.signal()
		g.mu.Unlock()
		return a
	}
	if slices.Contains(g.ended, req.ID) {
		// Each request is handled on its own goroutine: a renewal sent
		// before the resume may be handled after it.
		g.mu.Unlock()
		a.Err = "this pause has ended"
		return a
	}
	d := min(max(req.For, 0), maxPause)
	g.pauses[req.ID] = time.Now().Add(d)
	g.signal()
	// Told paused until the pause ends, also on a standby, which does
	// not wait on the gate (review BD).
	time.AfterFunc(d, func() {
		g.mu.Lock()
		g.pausedUntil()
		g.mu.Unlock()
	})
	if g.cancel != nil {
		a.Applying = true
		g.byPause = true
		g.cancel()
	}
	idle := g.idle
	g.mu.Unlock()
	select {
	case <-idle:
		a.Paused = true
	case <-time.After(pauseQuiesceWait):
		a.Err = fmt.Sprintf("the events under way did not finish within %s", pauseQuiesceWait)
	}
	return a
}

// pausedUntil drops the pauses that ran out (their backup is gone) and
// returns when the last one left ends, zero when none is. g.mu held.
func (g *pauseGate) pausedUntil() time.Time {
	var last time.Time
	now := time.Now()
	for id, until := range g.pauses {
		if !now.Before(until) {
			delete(g.pauses, id)
			continue
		}
		if until.After(last) {
			last = until
		}
	}
	if g.told != nil {
		g.told.Store(!last.IsZero())
	}
	return last
}

// signal wakes wait. g.mu held.
func (g *pauseGate) signal() {
	close(g.wake)
	g.wake = make(chan struct{})
	g.pausedUntil()
}

// wait returns once no pause is in force; false when ctx ended first.
func (g *pauseGate) wait(ctx context.Context) bool {
	for {
		g.mu.Lock()
		until, wake := g.pausedUntil(), g.wake
		g.mu.Unlock()
		if until.IsZero() {
			return true
		}
		t := time.NewTimer(time.Until(until))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// start registers a consumer run under ctx; ok is false when a pause came
// since wait (wait again). done ends the run and reports whether a pause
// stopped it.
func (g *pauseGate) start(ctx context.Context) (runCtx context.Context, done func() (byPause bool), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.pausedUntil().IsZero() {
		return nil, nil, false
	}
	runCtx, cancel := context.WithCancel(ctx)
	g.cancel, g.byPause = cancel, false
	idle := make(chan struct{})
	g.idle = idle
	return runCtx, func() bool {
		cancel()
		g.mu.Lock()
		defer g.mu.Unlock()
		g.cancel = nil
		close(idle)
		return g.byPause
	}, true
}

// instanceName names this process in `hookgate status` and pause answers.
func instanceName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

// announceApplying, for an operator command that applies events (replay,
// dlq replay), refuses to run while a `hookgate backup` reads the streams
// (they would hold part of the run), and tells a backup that starts later
// that this run applies (jetstream.SubjectOperatorApplying) until stop.
// Where NATS permissions deny the subjects, it says so on stderr and runs.
func announceApplying(ctx context.Context, sys *system, command string, stderr io.Writer) (stop func(), err error) {
	run := jetstream.OperatorRun{Command: command, Instance: instanceName(), Started: time.Now().UTC()}
	stop, err = jetstream.Announce(sys.conn, jetstream.SubjectOperatorApplying, run)
	if err != nil {
		fmt.Fprintf(stderr, "hookgate: %s: a backup started during this run will not see it: %v\n", command, err)
		stop = func() {}
	}
	backups, err := jetstream.Running[jetstream.PauseRequest](ctx, sys.conn, jetstream.SubjectBackupRunning)
	switch {
	case errors.Is(err, jetstream.ErrPermissionDenied):
		fmt.Fprintf(stderr, "hookgate: %s: cannot ask whether a backup runs: %v\n", command, err)
	case err != nil:
		stop()
		return nil, fmt.Errorf("%s: asking whether a hookgate backup runs: %w; nothing changed, try again", command, err)
	case len(backups) > 0:
		stop()
		return nil, fmt.Errorf("%s: a hookgate backup is reading the streams (%s); nothing changed: run %s after it ends (the backup would hold part of this run)", command, backups[0].ID, command)
	}
	return stop, nil
}
