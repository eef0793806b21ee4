package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/nats-io/nats.go"
)

// Review BD.

// TestReviewBDFourthRoundNewServeIsNotWaitedFor: pauseConsumers looks for
// serves again after each round of answers, and when the look finds a new
// one it "waits for the pause of any it had not seen". But at round 3 it
// breaks out of the loop (`if !grew || round == 3 { break }`) right after
// appending the newly found serves to want, without sending them the
// pause or checking answered: it returns them as paused, prints "paused
// the consumer of ... sN", and the backup reads the streams while sN
// applies (until the next renewal, up to 5 s later). Serves that keep
// starting (a rolling deploy, an autoscaler) reach round 3.
// Expected: a serve found by the last look that has not answered fails
// the backup (or is waited for), never reported as paused.
func TestReviewBDFourthRoundNewServeIsNotWaitedFor(t *testing.T) {
	c := jstest.Start(t, "").Conn
	// Each look on hookgate.instances finds one serve more (s0, then s0
	// and s1, ...); each pause request is answered by the serves that
	// were running when it came.
	var mu sync.Mutex
	running := 0
	if _, err := c.NC.Subscribe(jetstream.SubjectInstances, func(m *nats.Msg) {
		mu.Lock()
		n := running
		running++
		mu.Unlock()
		for i := 0; i <= n; i++ {
			b, _ := json.Marshal(instanceDoc{Instance: fmt.Sprintf("s%d", i), Roles: []string{"consumer"}})
			_ = m.Respond(b)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NC.Subscribe(jetstream.SubjectPause, func(m *nats.Msg) {
		var req jetstream.PauseRequest
		_ = json.Unmarshal(m.Data, &req)
		mu.Lock()
		n := running
		mu.Unlock()
		for i := 0; i < n; i++ {
			b, _ := json.Marshal(jetstream.PauseAnswer{Instance: fmt.Sprintf("s%d", i), Paused: !req.Resume})
			_ = m.Respond(b)
		}
	}); err != nil {
		t.Fatal(err)
	}
	sys := &system{conn: c}
	paused, resume, err := pauseConsumers(t.Context(), sys, io.Discard)
	defer resume()
	if err != nil {
		t.Logf("refused (expected): %v", err)
		return
	}
	mu.Lock()
	n := running
	mu.Unlock()
	last := fmt.Sprintf("s%d", n-1)
	if slices.Contains(paused, last) {
		t.Fatalf("pauseConsumers reports %v paused, but %s (found by the last look) was never sent the pause nor answered: the streams are read while it applies", paused, last)
	}
}

// TestReviewBDStandbyToldPausedAfterLeaseRanOut: the told flag (the
// "paused (backup)" of hookgate status / hookgate.instances) is updated
// only inside pausedUntil, which runs on a request, in wait and in start.
// A standby (no runGated loop calling wait) whose backup died keeps
// reporting "paused" forever after the lease ran out, until some other
// backup sends a request: status lies about the instance that would
// apply on takeover.
func TestReviewBDStandbyToldPausedAfterLeaseRanOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var told atomic.Bool
		g := newPauseGate("standby/1", &told)
		if a := g.handle(jetstream.PauseRequest{ID: "dead-backup", For: time.Minute}); !a.Paused {
			t.Fatalf("pause: %+v", a)
		}
		time.Sleep(10 * time.Minute) // the backup died: no renewal, no resume
		if told.Load() {
			t.Fatal("10 minutes after a 1 minute pause ran out, the standby still reports paused (backup)")
		}
	})
}
