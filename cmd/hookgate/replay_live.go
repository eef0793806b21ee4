package main

import (
	"context"
	"fmt"
	"math"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream"
)

// liveConsumer is what a replay knows of serve's durable consumer
// (jetstream.DurableApply), which may hold some of the events the replay
// re-feeds: delivered to a serve and not settled, waiting out a retry's
// backoff. Both run an event's effects under its subject's lease, one
// after the other, so neither runs them twice; but each judged the event
// from its own view of DLQ, and audit 42 found a letter left behind for
// an applied event both ways: one serve wrote during the replay, for an
// event the replay then applied, and one the replay wrote, for an event
// serve's next try then applied.
type liveConsumer struct {
	sys *system
	// floor is the consumer's ack floor when the replay began: serve
	// settled every event up to it before, and leaves those alone.
	// math.MaxUint64 without a consumer.
	floor uint64
}

// newLiveConsumer reads the live consumer's ack floor. When it cannot, every
// event is taken as possibly in serve's hands (a look more each).
func newLiveConsumer(ctx context.Context, sys *system) *liveConsumer {
	floor, _, ok, err := jetstream.Unsettled(ctx, sys.conn)
	switch {
	case err != nil:
		floor = 0
	case !ok:
		floor = math.MaxUint64
	}
	return &liveConsumer{sys: sys, floor: floor}
}

// mayHaveLettered reports whether serve may have dead-lettered the stored
// event seq since the replay began.
func (l *liveConsumer) mayHaveLettered(seq uint64) bool { return l != nil && seq > l.floor }

// holds reports whether the live consumer has the stored event seq
// delivered and not settled now (as far as its ack floor tells).
func (l *liveConsumer) holds(ctx context.Context, seq uint64) (bool, error) {
	if !l.mayHaveLettered(seq) {
		return false, nil
	}
	floor, delivered, ok, err := jetstream.Unsettled(ctx, l.sys.conn)
	if err != nil {
		return false, err
	}
	return ok && seq > floor && seq <= delivered, nil
}

// replayLetters is the replay's DeadLetters: it writes no letter for an
// event the live consumer holds, whose fate serve's retries decide
// (consumer.ErrLeftToConsumer: the replay reports it failed).
type replayLetters struct {
	consumer.DeadLetters
	live *liveConsumer
}

// DeadLetter implements consumer.DeadLetters.
func (r replayLetters) DeadLetter(ctx context.Context, ev consumer.Event, reason string, deliveries int) (uint64, error) {
	held, err := r.live.holds(ctx, ev.Seq)
	if err != nil {
		return 0, fmt.Errorf("look at serve's consumer before writing the letter: %w", err)
	}
	if held {
		return 0, fmt.Errorf("%w: serve's consumer has it delivered and not settled, and its own retries decide it (it dead-letters it after consumer.max_deliver)", consumer.ErrLeftToConsumer)
	}
	return r.DeadLetters.DeadLetter(ctx, ev, reason, deliveries)
}
