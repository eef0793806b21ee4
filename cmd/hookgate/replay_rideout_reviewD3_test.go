package main

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream"
)

// The ride-out counts from the last answer to a judgement only: time spent
// between two judgements (the previous event's apply, its forward taking
// its timeout while WATERMARKS and APPLIED answered the claim and the
// commit; Read riding out WEBHOOKS' own election for up to readStall)
// uses it up. An election that starts 31 s after the last judgement is
// not ridden out at all: the event is reported failed at once, though
// the stores answered a moment before (README/replay.go: "up to 30 s
// after its last answer").
func TestReviewD3ReplayRideOutIsNotUsedUpBetweenEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		unavailable := fmt.Errorf("get watermark p.default.G-1: %w: %w", jetstream.ErrUnavailable, context.DeadlineExceeded)
		m := &flakyMarks{err: unavailable}
		proc := consumer.NewProcessor(map[string]consumer.Rule{"p": {Watermark: true}}, m, nothingApplied{}, nil, nil,
			slog.New(slog.DiscardHandler), nil, consumer.Options{Owner: "test"})
		ro := &rideOut{}
		ev := consumer.Event{Key: "p:default:evt:1", Provider: "p", Account: "default", Subject: "G-1", OccurredRaw: "2026-12-01T10:00:00Z"}
		if _, err := ro.judge(context.Background(), proc, ev, 0); err != nil {
			t.Fatalf("first judgement: %v", err)
		}
		// The first event's apply: a forward answering after 31 s (its
		// stores answered the claim and the commit around it).
		time.Sleep(31 * time.Second)
		// Then the stores' leader is lost: three reads go unanswered.
		m.fails = m.gets + 3
		ev2 := ev
		ev2.Key = "p:default:evt:2"
		start := time.Now()
		out, err := ro.judge(context.Background(), proc, ev2, 0)
		t.Logf("second judgement: %+v, %v after %s, %d reads", out, err, time.Since(start), m.gets)
		if err != nil {
			t.Errorf("an election of a few hundred ms right after a long apply was not ridden out: %v", err)
		}
	})
}
