package jetstream

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// A lost connection's warning says what its loss stops, as its caller
// put it (ConnectOptions.Lost), and nothing more without it.
func TestDisconnectWarningSaysWhatStops(t *testing.T) {
	for lost, want := range map[string]string{
		"this serve applies no event meanwhile": `"nats disconnected; reconnecting (this serve applies no event meanwhile)"`,
		"":                                      `"nats disconnected; reconnecting"`,
	} {
		var logged syncLog
		disconnectLogger(slog.New(slog.NewJSONHandler(&logged, nil)), "c", lost)(&nats.Conn{}, nil)
		if !strings.Contains(logged.String(), want) {
			t.Errorf("lost %q: %s; want %s", lost, logged.String(), want)
		}
	}
}
