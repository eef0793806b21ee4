package jetstream

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// An event taken ends a streak of failed pulls: pulls that end refused
// (409 "Exceeds MaxBytes" with large bodies) while other pulls bring
// events are no "no event is taken" (a resource audit, stop 39: that
// warning for 30 s while 10-16 events a second were applied).
func TestTakenEventEndsAPullFailureStreak(t *testing.T) {
	var logged syncLog
	s := &Source{open: map[string]*openPull{}, deliveries: make(chan *nats.Msg, 1),
		health: pullHealth{log: slog.New(slog.NewJSONHandler(&logged, nil)), warnAfter: 0}}
	s.health.fail(errPullStatus("Message Size Exceeds MaxBytes"))
	if !strings.Contains(logged.String(), "no event is taken") {
		t.Fatalf("setup: no warning after a failed pull: %s", logged.String())
	}
	if _, err := s.take(t.Context(), &nats.Msg{Subject: "_INBOX.x.1", Reply: "$JS.ACK.WEBHOOKS.hookgate-apply.1.1.1.0.0"}); err != nil {
		t.Fatal(err)
	}
	if !s.health.failing.IsZero() || !strings.Contains(logged.String(), "consumer pulls work again") {
		t.Fatalf("an event taken left the streak on (since %v): %s", s.health.failing, logged.String())
	}
}
