package jetstream_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
)

// Every answering process is heard (a cluster's serves), and the two
// ways of hearing nothing are told apart: nothing subscribed (the
// server's no-responders answer) and nobody answering in time.
func TestAskInstances(t *testing.T) {
	env := jstest.Start(t, "")
	ask := func(o jetstream.AskOptions) ([]string, error) {
		t.Helper()
		answers, err := jetstream.AskInstances(t.Context(), env.Conn, o)
		var got []string
		for _, a := range answers {
			got = append(got, string(a))
		}
		slices.Sort(got)
		return got, err
	}

	_, err := ask(jetstream.AskOptions{Wait: 5 * time.Second, Quiet: time.Second})
	if !errors.Is(err, jetstream.ErrNoAnswer) || !strings.Contains(err.Error(), "nothing subscribes") {
		t.Fatalf("with no serve: %v, want ErrNoAnswer naming no subscriber", err)
	}

	// Two serves, each on its own connection, as on a cluster.
	for _, name := range []string{"a", "b"} {
		c, err := jetstream.Connect(jetstream.ConnectOptions{Name: name, Embedded: env.Embedded})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		stop, err := jetstream.AnswerInstances(c, func() []byte { return []byte(name) })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		if err := c.NC.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ask(jetstream.AskOptions{Wait: 10 * time.Second, Quiet: 2 * time.Second})
	if err != nil || !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("two serves: %q, %v; want both", got, err)
	}

	// Something subscribed that never answers (a serve too busy, or a
	// stranger on the subject): no answer within Wait.
	env2 := jstest.Start(t, "")
	if _, err := env2.Conn.NC.SubscribeSync(jetstream.SubjectInstances); err != nil {
		t.Fatal(err)
	}
	if err := env2.Conn.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	_, err = jetstream.AskInstances(t.Context(), env2.Conn, jetstream.AskOptions{Wait: 300 * time.Millisecond, Quiet: 100 * time.Millisecond})
	if !errors.Is(err, jetstream.ErrNoAnswer) || !strings.Contains(err.Error(), "within 300ms") {
		t.Fatalf("with a silent subscriber: %v, want ErrNoAnswer within the wait", err)
	}
}
