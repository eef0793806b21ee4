package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream"
)

// flakyMarks fails its first fails Gets the way a store in a leader
// election does (or every one with fails < 0), with err.
type flakyMarks struct {
	fails int
	err   error
	gets  int
}

func (f *flakyMarks) Get(context.Context, string) (consumer.Mark, uint64, error) {
	f.gets++
	if f.fails < 0 || f.gets <= f.fails {
		return consumer.Mark{}, 0, f.err
	}
	return consumer.Mark{}, 0, nil
}

func (f *flakyMarks) Put(context.Context, string, consumer.Mark, uint64) (uint64, error) {
	return 0, errors.New("not used")
}

type nothingApplied struct{}

func (nothingApplied) Seen(context.Context, string) (bool, error) { return false, nil }
func (nothingApplied) Remember(context.Context, string) error     { return nil }

// A replay's judgement waits out stores that do not answer (an election)
// for up to judgeRideOut after their last answer, not per event, and
// never waits on an answer that refuses.
func TestReplayRidesOutUnansweredStores(t *testing.T) {
	unavailable := fmt.Errorf("get watermark p.default.G-1: %w: %w", jetstream.ErrUnavailable, context.DeadlineExceeded)
	ev := consumer.Event{Key: "p:default:evt:1", Provider: "p", Account: "default", Subject: "G-1", OccurredRaw: "2026-12-01T10:00:00Z"}
	judge := func(marks consumer.Watermarks, ro *rideOut) (consumer.Outcome, time.Duration, error) {
		proc := consumer.NewProcessor(map[string]consumer.Rule{"p": {Watermark: true}}, marks, nothingApplied{}, nil, nil,
			slog.New(slog.DiscardHandler), nil, consumer.Options{Owner: "test"})
		start := time.Now()
		out, err := ro.judge(context.Background(), proc, ev, 0)
		return out, time.Since(start), err
	}
	t.Run("an election", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := &flakyMarks{fails: 3, err: unavailable}
			out, took, err := judge(m, &rideOut{})
			if err != nil || out.Decision != consumer.Applied || m.gets != 4 {
				t.Fatalf("judge = %+v, %v after %d reads; want applied on the 4th", out, err, m.gets)
			}
			t.Logf("answered after %s", took)
		})
	})
	t.Run("a store that stays down", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := &flakyMarks{fails: -1, err: unavailable}
			ro := &rideOut{}
			_, took, err := judge(m, ro)
			if !errors.Is(err, jetstream.ErrUnavailable) || took > judgeRideOut || took < judgeRideOut-3*time.Second {
				t.Fatalf("first event: %v after %s; want the store's error after about %s", err, took, judgeRideOut)
			}
			gets := m.gets
			_, took, err = judge(m, ro)
			if !errors.Is(err, jetstream.ErrUnavailable) || took != 0 || m.gets != gets+1 {
				t.Fatalf("next event: %v after %s, %d reads; want the error at once, one read", err, took, m.gets-gets)
			}
		})
	})
	t.Run("a refusal", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := &flakyMarks{fails: -1, err: fmt.Errorf("get watermark: %w", jetstream.ErrAuthorization)}
			_, took, err := judge(m, &rideOut{})
			if !errors.Is(err, jetstream.ErrAuthorization) || took != 0 || m.gets != 1 {
				t.Fatalf("%v after %s, %d reads; want the refusal at once", err, took, m.gets)
			}
		})
	})
}
