package main

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Review BE (commit 7a61994: the backup announces itself on
// hookgate.backup.running; replay and dlq replay announce themselves on
// hookgate.operator.applying).

// reviewBEEmbedded starts an embedded server and returns a connector to it.
func reviewBEEmbedded(t *testing.T) func(name string) *jetstream.Conn {
	t.Helper()
	env := jstest.Start(t, "")
	return func(name string) *jetstream.Conn {
		c, err := jetstream.Connect(jetstream.ConnectOptions{Name: name, Embedded: env.Embedded})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
}

// reviewBEStartingServe does what startConsumer's answerPauses does when a
// serve with the consumer role starts: subscribe to the pause, ask
// hookgate.backup.running, and take the pause of each backup that answers.
// told is the gate's "paused" flag (hookgate.instances' paused).
func reviewBEStartingServe(t *testing.T, c *jetstream.Conn) (told *atomic.Bool, took []jetstream.PauseRequest) {
	t.Helper()
	told = &atomic.Bool{}
	gate := newPauseGate("starting-serve", told)
	stop, err := jetstream.AnswerPauses(c, gate.handle)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	backups, err := jetstream.Running[jetstream.PauseRequest](t.Context(), c, jetstream.SubjectBackupRunning)
	if err != nil {
		t.Fatalf("ask %s: %v", jetstream.SubjectBackupRunning, err)
	}
	for _, b := range backups {
		if b.ID != "" && !b.Resume {
			gate.handle(b)
			took = append(took, b)
		}
	}
	return told, took
}

// TestReviewBERefusedBackupLeavesAStartingServePaused: pauseConsumers
// announces the backup on hookgate.backup.running before it asks
// hookgate.operator.applying and hookgate.instances. When either of those
// fails the backup (a replay runs; a serve is connected but none answered
// within 5 s; an interrupt), it only stops announcing (stopAnnounce) and
// returns: no resume goes out. A serve that started meanwhile took the
// announced pause (as answerPauses does) and applies nothing until the
// pause's lease (pauseLease, a minute) runs out, for a backup that never
// read anything. The resume path of every later failure (resume()) sends
// it; these two early returns do not.
// Expected: a backup that stops announcing sends the resume of the pause
// it announced.
func TestReviewBERefusedBackupLeavesAStartingServePaused(t *testing.T) {
	conn := reviewBEEmbedded(t)
	backup, replay, serve := conn("backup"), conn("replay"), conn("serve")

	// A replay runs: it answers on hookgate.operator.applying, a little
	// late (the serve starts meanwhile).
	asked := make(chan struct{}, 1)
	proceed := make(chan struct{})
	if _, err := replay.NC.Subscribe(jetstream.SubjectOperatorApplying, func(m *nats.Msg) {
		select {
		case asked <- struct{}{}:
		default:
		}
		select {
		case <-proceed:
		case <-time.After(1500 * time.Millisecond):
		}
		b, _ := json.Marshal(jetstream.OperatorRun{Command: "replay", Instance: "h/1", Started: time.Now().UTC()})
		_ = m.Respond(b)
	}); err != nil {
		t.Fatal(err)
	}
	if err := replay.NC.Flush(); err != nil {
		t.Fatal(err)
	}

	errc := make(chan error, 1)
	go func() {
		_, resume, err := pauseConsumers(t.Context(), &system{conn: backup}, io.Discard)
		if err == nil {
			resume()
		}
		errc <- err
	}()
	select {
	case <-asked: // the backup announces itself and asks whether a replay runs
	case <-time.After(10 * time.Second):
		t.Fatal("the backup never asked hookgate.operator.applying")
	}

	// A serve with the consumer role starts now.
	told, took := reviewBEStartingServe(t, serve)
	if len(took) != 1 || !told.Load() {
		t.Fatalf("the starting serve did not take the announced pause: took %+v, paused %v", took, told.Load())
	}
	close(proceed)

	err := <-errc
	if err == nil || !strings.Contains(err.Error(), "applies events") {
		t.Fatalf("the backup during a replay: %v; want its refusal", err)
	}
	// The backup is over (nothing announced any more) ...
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if b, err := jetstream.Running[jetstream.PauseRequest](t.Context(), serve, jetstream.SubjectBackupRunning); err == nil && len(b) == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the refused backup still announces itself")
		}
	}
	// ... so the serve must go on: a resume, or at the latest the next
	// renewal period, not the pause's minute.
	for end := time.Now().Add(2 * pauseRenew); told.Load(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the backup refused (%v) and announces nothing, yet the serve that started during its check is still paused %s later: no resume was sent for the pause %s it announced, so the serve applies nothing until the lease (%s) runs out", err, 2*pauseRenew, took[0].ID, took[0].For)
		}
	}
}

// TestReviewBENoAnswerMessagesBlameAServe: jetstream.Running reuses ask,
// whose ErrNoAnswer reads "no hookgate serve answered within 2s". On
// hookgate.backup.running (replay's check) and hookgate.operator.applying
// (the backup's check) what did not answer is a backup or a replay (one
// that is just ending, or a connection too slow to answer), never a serve:
// the replay's "asking whether a hookgate backup runs: no hookgate serve
// answered within 2s" and the backup's "asking whether an operator's
// replay applies events: no hookgate serve answered within 2s" send the
// operator looking at the serves.
// Expected: the message names what was asked (a backup, a replay), not a
// serve.
func TestReviewBENoAnswerMessagesBlameAServe(t *testing.T) {
	conn := reviewBEEmbedded(t)
	c, mute := conn("cli"), conn("mute")
	for _, subject := range []string{jetstream.SubjectBackupRunning, jetstream.SubjectOperatorApplying} {
		if _, err := mute.NC.Subscribe(subject, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
	}
	if err := mute.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	var msgs []string
	if _, err := announceApplying(t.Context(), &system{conn: c}, "replay", io.Discard); err == nil {
		t.Fatal("replay ran with something on hookgate.backup.running that did not answer")
	} else {
		msgs = append(msgs, err.Error())
	}
	b := conn("backup")
	if _, _, err := pauseConsumers(t.Context(), &system{conn: b}, io.Discard); err == nil {
		t.Fatal("the backup ran with something on hookgate.operator.applying that did not answer")
	} else {
		msgs = append(msgs, err.Error())
	}
	for _, m := range msgs {
		if strings.Contains(m, "serve") {
			t.Errorf("blames a serve for a silent backup/replay: %q", m)
		}
	}
}

// TestReviewBEBackupDeniedTheOperatorSubjectSaysTryAgain: a backup whose
// NATS user may not publish to hookgate.operator.applying (a deployment
// whose permissions predate this release; the README now lists it) fails
// with "asking whether an operator's replay applies events: nats refused
// the credentials: ... Permissions Violation ...; nothing written. Try
// again": trying again fails the same way every time (the replay, denied
// the same subjects, says so and runs). Expected: a refusal by the
// permissions names the permission to grant, not "Try again". (Fixed:
// jetstream.ErrPermissionDenied, "nats permissions deny the subject",
// where the review's version of this test expected ErrAuthorization,
// whose text speaks of credentials the server had accepted.)
func TestReviewBEBackupDeniedTheOperatorSubjectSaysTryAgain(t *testing.T) {
	srv := reviewTNATS(t, &server.Options{
		JetStream: true,
		StoreDir:  t.TempDir(),
		Users: []*server.User{{
			Username: "backup", Password: "pw",
			Permissions: &server.Permissions{
				Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{jetstream.SubjectOperatorApplying}},
			},
		}},
	})
	url := strings.Replace(srv.ClientURL(), "nats://", "nats://backup:pw@", 1)
	c, err := jetstream.Connect(jetstream.ConnectOptions{Name: "backup", URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _, err = pauseConsumers(t.Context(), &system{conn: c}, io.Discard)
	if err == nil {
		t.Fatal("the backup ran without asking whether a replay runs")
	}
	if !errors.Is(err, jetstream.ErrPermissionDenied) {
		t.Fatalf("not told the permissions refused it: %v", err)
	}
	if strings.Contains(err.Error(), "Try again") {
		t.Fatalf("a permission refusal, which fails every time, is told to try again: %v", err)
	}
}
