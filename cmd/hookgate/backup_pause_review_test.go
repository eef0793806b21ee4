package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
)

// Review BB: the consumer pause that `hookgate backup` takes.

// reviewBBPause sends one request on hookgate.consumer.pause, as
// pauseConsumers does, and returns this process's serve's answer.
func reviewBBPause(t *testing.T, c *jetstream.Conn, req jetstream.PauseRequest) jetstream.PauseAnswer {
	t.Helper()
	inst := instanceName()
	got, err := jetstream.AskPause(t.Context(), c, req, []string{inst}, 30*time.Second)
	if err != nil {
		t.Fatalf("pause %+v: %v", req, err)
	}
	a, ok := got[inst]
	if !ok {
		t.Fatalf("pause %+v: no answer from %s", req, inst)
	}
	return a
}

// TestReviewBBOverlappingBackupsOneResumeEndsTheOther: two backups at once
// (a nightly cron and an operator's, or a slow one and a retry) each pause
// the consumer under their own ID; pauseGate keeps only the latest ID, so
// the second backup's resume ends the pause while the first is still
// reading its streams, and the consumer applies events in the middle of
// the first backup's cut (the very inconsistency the pause exists to
// prevent: a mark ahead of WEBHOOKS's consumer, a GRANTS message whose
// APPLIED key is not in the backup). PauseRequest's doc says "a resume
// ends only its own", and TestPauseGate checks only a resume of an ID
// that never paused.
// Expected: the consumer stays paused while any pause not resumed (and
// not run out) is in force: the gate keeps a set of pauses (ID -> until),
// a resume removes its own ID only.
func TestReviewBBOverlappingBackupsOneResumeEndsTheOther(t *testing.T) {
	listen := review9gFreeAddr(t)
	cfg := backupConfig(t, t.TempDir(), listen)
	s := review7Start(t, cfg, true)
	c := reviewBAConnect(t, listen)
	client := &http.Client{Timeout: 10 * time.Second}

	if a := reviewBBPause(t, c, jetstream.PauseRequest{ID: "backup-A", For: time.Minute}); !a.Paused {
		t.Fatalf("backup A's pause: %+v", a)
	}
	if a := reviewBBPause(t, c, jetstream.PauseRequest{ID: "backup-B", For: time.Minute}); !a.Paused {
		t.Fatalf("backup B's pause: %+v", a)
	}
	_, body := backupEvent(1)
	if code, st, err := backupPost(client, s.base, body); err != nil || code != 200 || st != "accepted" {
		t.Fatalf("post: %d %q %v", code, st, err)
	}
	// Each pause is answered once the consumer is idle, and it starts
	// again only when no pause is left in the gate, which the serve's
	// paused flag shows (set and cleared with the gate's pauses, before
	// a pause or resume is answered): read after each step, no window
	// to wait out.
	key := "p:default:evt:e-00001"
	if d := reviewBBDoc(t, c); !d.Paused || d.Applying || slices.Contains(streamKeys(t, c, jetstream.StreamGrants), key) {
		t.Fatalf("with two pauses in force: %+v", d)
	}
	// Backup B is done; backup A still reads its streams.
	reviewBBPause(t, c, jetstream.PauseRequest{ID: "backup-B", Resume: true})
	if d := reviewBBDoc(t, c); !d.Paused || d.Applying || slices.Contains(streamKeys(t, c, jetstream.StreamGrants), key) {
		t.Fatalf("backup B's resume ended backup A's pause (A, not resumed and 60 s from running out, still reads): %+v", d)
	}
	// Backup A is done: the event that waited is applied.
	reviewBBPause(t, c, jetstream.PauseRequest{ID: "backup-A", Resume: true})
	waitApplied(t, c, s)
	if !slices.Contains(streamKeys(t, c, jetstream.StreamGrants), key) {
		t.Fatalf("%s not applied after both backups resumed", key)
	}
}

// reviewBBDoc is this process's serve's answer on hookgate.instances.
func reviewBBDoc(t *testing.T, c *jetstream.Conn) instanceDoc {
	t.Helper()
	answers, err := jetstream.AskInstances(t.Context(), c, jetstream.AskOptions{Wait: 5 * time.Second, Quiet: 300 * time.Millisecond})
	for _, a := range answers {
		var d instanceDoc
		if json.Unmarshal(a, &d) == nil && d.Instance == instanceName() {
			return d
		}
	}
	t.Fatalf("no answer of %s on hookgate.instances: %q, %v", instanceName(), answers, err)
	return instanceDoc{}
}

// TestReviewBBPauseWhileTheConsumerReopensStopsServe: after a pause ends,
// runGated opens a new source under the run's context (OpenSource reads
// and re-creates the durable consumer). A pause that comes in that moment
// (the next backup right after one ended, a second backup's renewal, a
// resume-then-pause in a script) cancels that context; OpenSource fails
// with "context canceled" and runGated returns the error instead of
// treating it as a pause. On the embedded server the consumer's error
// ends serve's errgroup: the whole serve, gateway included, stops (exit
// 1) because a backup was taken. On a cluster Hold logs "consumer stopped"
// and releases the lock, and a standby takes over unpaused.
// Expected: a failure to open caused by the pause's cancel is a pause
// like any other (done() reports byPause: wait and go on); serve keeps
// running through any sequence of pauses and resumes.
func TestReviewBBPauseWhileTheConsumerReopensStopsServe(t *testing.T) {
	listen := review9gFreeAddr(t)
	cfg := backupConfig(t, t.TempDir(), listen)
	s := review7Start(t, cfg, true)
	c := reviewBAConnect(t, listen)
	client := &http.Client{Timeout: 10 * time.Second}
	exited := func() (error, bool) {
		select {
		case err := <-s.done:
			s.done <- err
			return err, true
		default:
			return nil, false
		}
	}
	id := func(i int) string { return fmt.Sprintf("backup-%d", i) }
	if a := reviewBBPause(t, c, jetstream.PauseRequest{ID: id(0), For: time.Minute}); !a.Paused {
		t.Fatalf("pause: %+v", a)
	}
	// Back-to-back backups: each resume is followed, a little later, by
	// the next one's pause; the delay sweeps the reopen.
	ask := func(req jetstream.PauseRequest) jetstream.PauseAnswer {
		got, _ := jetstream.AskPause(t.Context(), c, req, []string{instanceName()}, 30*time.Second)
		return got[instanceName()]
	}
	for i := range 200 {
		ask(jetstream.PauseRequest{ID: id(i), Resume: true})
		time.Sleep(time.Duration(i%25) * 100 * time.Microsecond)
		a := ask(jetstream.PauseRequest{ID: id(i + 1), For: time.Minute})
		if err, ok := exited(); ok {
			t.Fatalf("serve exited after %d back-to-back backups' pauses (last answer %+v): %v\n%s", i+1, a, err, tail(s.stderr.String(), 1500))
		}
		if !a.Paused {
			select {
			case err := <-s.done:
				s.done <- err
				t.Fatalf("serve exited after %d back-to-back backups' pauses (the last one unanswered): %v\n%s", i+1, err, tail(s.stderr.String(), 1500))
			case <-time.After(10 * time.Second):
			}
			t.Fatalf("pause %d: %+v\n%s", i+1, a, tail(s.stderr.String(), 1500))
		}
	}
	reviewBBPause(t, c, jetstream.PauseRequest{ID: id(200), Resume: true})
	_, body := backupEvent(1)
	if code, st, err := backupPost(client, s.base, body); err != nil || code != 200 || st != "accepted" {
		t.Fatalf("post after the pauses: %d %q %v", code, st, err)
	}
	waitApplied(t, c, s)
	if !slices.Contains(streamKeys(t, c, jetstream.StreamGrants), "p:default:evt:e-00001") {
		t.Fatal("not applied after the pauses")
	}
	if err, ok := exited(); ok {
		t.Fatalf("serve exited: %v\n%s", err, tail(s.stderr.String(), 1500))
	}
	if strings.Contains(s.stderr.String(), "context canceled") {
		t.Logf("log mentions context canceled:\n%s", tail(s.stderr.String(), 1500))
	}
}

// TestReviewBBStatusWhilePausedSaysNothingApplies: while a backup holds
// the consumer paused, the paused serve reports applying false (runSource
// set it, and hookgate_consumer_applying, back to 0 when the pause stopped
// the run) and nothing says why: `hookgate status` lists the problem "no
// instance applies events (1 with the consumer role answered, none
// applying)", the line meant for a stuck consumer lock, during every
// backup; an alert on the gauge fires the same way. An operator checking
// status during a long backup (README: a large WEBHOOKS takes minutes) is
// told the consumer is broken.
// Expected: the instance's doc says it is paused and by which backup (and
// until when); status lists it as paused for a backup, not as "no
// instance applies events".
func TestReviewBBStatusWhilePausedSaysNothingApplies(t *testing.T) {
	listen := review9gFreeAddr(t)
	cfg := backupConfig(t, t.TempDir(), listen)
	review7Start(t, cfg, true)
	c := reviewBAConnect(t, listen)
	if a := reviewBBPause(t, c, jetstream.PauseRequest{ID: "backup-status", For: time.Minute}); !a.Paused {
		t.Fatalf("pause: %+v", a)
	}
	defer reviewBBPause(t, c, jetstream.PauseRequest{ID: "backup-status", Resume: true})
	r := review9Run(t, "", "status", "--config", cfg)
	if strings.Contains(r.stdout, "no instance applies events") || !strings.Contains(strings.ToLower(r.stdout), "paus") {
		t.Fatalf("status while a backup pauses the consumer (exit %d):\n%s%s", r.code, r.stdout, r.stderr)
	}
}
