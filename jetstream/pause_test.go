package jetstream_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/nats-io/nats.go"
)

// A serve whose consumer subscribes to the pause only after the backup's
// request went out (it was starting) still answers: AskPause sends the
// request again until every instance it waits for answered.
func TestAskPauseSendsAgainUntilAnswered(t *testing.T) {
	env := jstest.Start(t, "")
	first := make(chan struct{}, 1)
	spy, err := env.Conn.NC.Subscribe(jetstream.SubjectPause, func(*nats.Msg) {
		select {
		case first <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer spy.Unsubscribe()
	late, err := jetstream.Connect(jetstream.ConnectOptions{Name: "late", Embedded: env.Embedded})
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	go func() {
		<-first // the first request is out: only now does the serve subscribe
		// Unsubscribed when late closes.
		_, _ = jetstream.AnswerPauses(late, func(r jetstream.PauseRequest) jetstream.PauseAnswer {
			return jetstream.PauseAnswer{Instance: "late", Paused: true}
		})
	}()
	got, err := jetstream.AskPause(t.Context(), env.Conn, jetstream.PauseRequest{ID: "b", For: time.Minute}, []string{"late"}, 30*time.Second)
	if err != nil || !got["late"].Paused {
		t.Fatalf("answers %+v, %v; want the late serve's pause", got, err)
	}
}

// Running hears every announcement on a subject, and none at once when
// nothing announces.
func TestRunningHearsEveryAnnouncement(t *testing.T) {
	env := jstest.Start(t, "")
	runs, err := jetstream.Running[jetstream.OperatorRun](t.Context(), env.Conn, jetstream.SubjectOperatorApplying)
	if err != nil || len(runs) != 0 {
		t.Fatalf("nothing announced: %+v, %v; want none, from the server's no-responders answer", runs, err)
	}
	for _, cmd := range []string{"replay", "dlq replay"} {
		c, err := jetstream.Connect(jetstream.ConnectOptions{Name: cmd, Embedded: env.Embedded})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		stop, err := jetstream.Announce(c, jetstream.SubjectOperatorApplying, jetstream.OperatorRun{Command: cmd, Instance: "h/1"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
	}
	runs, err = jetstream.Running[jetstream.OperatorRun](t.Context(), env.Conn, jetstream.SubjectOperatorApplying)
	if err != nil || len(runs) != 2 {
		t.Fatalf("two announced: %+v, %v", runs, err)
	}
	// Something subscribed that does not answer: not "none".
	mute, err := env.Conn.NC.Subscribe(jetstream.SubjectBackupRunning, func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Unsubscribe()
	if _, err := jetstream.Running[jetstream.PauseRequest](t.Context(), env.Conn, jetstream.SubjectBackupRunning); !errors.Is(err, jetstream.ErrNoAnswer) {
		t.Fatalf("a mute subscriber: %v, want ErrNoAnswer", err)
	}
}

// With nothing subscribed to the pause (a serve that stopped after the
// backup found it), the server answers each request "no responders" at
// once: AskPause waits for its next send instead of asking again in a
// loop until its wait ends.
func TestAskPauseDoesNotSpinWithoutResponders(t *testing.T) {
	env := jstest.Start(t, "")
	before := env.Conn.NC.Stats().OutMsgs
	got, err := jetstream.AskPause(t.Context(), env.Conn, jetstream.PauseRequest{ID: "b", For: time.Minute}, []string{"gone"}, 2*time.Second)
	if err != nil || len(got) != 0 {
		t.Fatalf("answers %+v, %v; want none", got, err)
	}
	if sent := env.Conn.NC.Stats().OutMsgs - before; sent > 2 {
		t.Fatalf("%d requests sent within a 2 s wait (one, and again every 5 s, expected)", sent)
	}
}
