package jetstream

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// A lost connection's warning says what its loss stops: the consumer's
// said webhooks were answered 503, which only the gateway's does (review
// BI).
func TestDisconnectWarningSaysWhatStops(t *testing.T) {
	for conn, want := range map[string]string{
		"hookgate-serve":    "webhooks this serve takes are answered 503",
		"hookgate-consumer": "applies no event meanwhile; webhooks are not affected",
		"hookgate-cli":      "nats disconnected; reconnecting\"",
	} {
		var logged syncLog
		disconnectLogger(slog.New(slog.NewJSONHandler(&logged, nil)), conn)(&nats.Conn{}, nil)
		if !strings.Contains(logged.String(), want) {
			t.Errorf("%s: %s; want %q", conn, logged.String(), want)
		}
	}
}
