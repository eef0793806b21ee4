package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
)

// A reset of the durable consumer that failed before the store said how
// many deliveries are outstanding logs no count: after a whole-cluster
// restart serve logged "outstanding":0 with "consumer info: jetstream
// unavailable: context deadline exceeded", which reads as nothing lost.
func TestRedeliverOutstandingLogsNoCountItDoesNotKnow(t *testing.T) {
	c, err := jetstream.Connect(jetstream.ConnectOptions{Name: t.Name(), URL: review10aNoJetStream(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	// The store never answers here: the test's second ends the retries
	// (serve's end after 30 s).
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	redeliverOutstanding(ctx, c, 128, time.Hour, nil, logger)
	line := buf.String()
	if !strings.Contains(line, "deliveries a stopped process had fetched come back after the ack wait") {
		t.Fatalf("no warning logged: %q", line)
	}
	if strings.Contains(line, `"outstanding"`) {
		t.Fatalf("the warning gives an outstanding count the store never told: %s", line)
	}
}
