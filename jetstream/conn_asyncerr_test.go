package jetstream_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/nats-io/nats.go"
)

// A subscription that drops messages is reported nowhere by nats.go unless
// the connection has an error handler: Connect logs it, naming the
// connection, the subject, the kind of subscription (a channel's or a
// callback's) and how many it dropped.
func TestConnectLogsSlowConsumer(t *testing.T) {
	env := jstest.Start(t, "")
	logger, logged := captureLog()
	c, err := jetstream.Connect(jetstream.ConnectOptions{Name: "watched", Embedded: env.Embedded, Log: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch := make(chan *nats.Msg, 1) // nobody reads it
	if _, err := c.NC.ChanSubscribe("overflow.here", ch); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := c.NC.Publish("overflow.here", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logged(), "slow consumer"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no slow-consumer line within 10 s; log: %q", logged())
		}
	}
	for _, want := range []string{`"level":"WARN"`, `"connection":"watched"`, `"subject":"overflow.here"`, `"subscription":"channel"`, `"dropped":`} {
		if !strings.Contains(logged(), want) {
			t.Errorf("log lacks %s: %q", want, logged())
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// captureLog returns a logger writing JSON lines (debug and up) to memory,
// and a function returning what it wrote so far; safe for concurrent use.
func captureLog() (*slog.Logger, func() string) {
	var mu sync.Mutex
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	return logger, func() string {
		mu.Lock()
		defer mu.Unlock()
		return buf.String()
	}
}
