package jetstream

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
)

// retryWaits are the events a Source's deliveries handed back to the
// durable consumer (a negative acknowledgement, with a retry's backoff or
// without) and that have not come again: by stream sequence. Safe for
// concurrent use; a nil *retryWaits tracks nothing.
//
// The server redelivers such an event once its delay has passed, unless
// WEBHOOKS no longer holds it: an event whose retry comes after it reached
// retention.webhooks.max_age is gone without a word (the consumer does not
// hand out what the stream deleted). OnLost told only of events never
// delivered; an event first delivered late in its life, whose try failed,
// was lost with no error line, no metric, no AUDIT record (audit 42).
type retryWaits struct {
	mu    sync.Mutex
	seqs  map[uint64]struct{}
	swept time.Time // the last look at WEBHOOKS' first sequence
}

// wait records that seq was handed back.
func (r *retryWaits) wait(seq uint64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seqs == nil {
		r.seqs = map[uint64]struct{}{}
	}
	r.seqs[seq] = struct{}{}
}

// came records that seq was delivered again, or settled.
func (r *retryWaits) came(seq uint64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.seqs, seq)
}

// due returns the waiting sequences when a sweep is due (every
// retrySweepEvery while some wait), and marks it done.
func (r *retryWaits) due(now time.Time) []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seqs) == 0 || now.Sub(r.swept) < retrySweepEvery {
		return nil
	}
	r.swept = now
	out := make([]uint64, 0, len(r.seqs))
	for seq := range r.seqs {
		out = append(out, seq)
	}
	slices.Sort(out)
	return out
}

// Retrying is how many events this source handed back and has not seen
// again yet: each waits for its retry after a failed try (or, handed back
// untried, for its subject). Safe for concurrent use.
func (s *Source) Retrying() int { return s.retries.count() }

// count is how many wait.
func (r *retryWaits) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seqs)
}

// retrySweeper is what sweepRetries needs of OpenSource's settings.
type retrySweeper struct {
	tell func(first, last uint64)
	js   js.JetStream
}

// retrySweepEvery is how often a Source looks whether events waiting for
// their retry have left WEBHOOKS.
const retrySweepEvery = 5 * time.Second

// sweepRetries tells OnLost of the events waiting for their retry that
// WEBHOOKS no longer stores (below its first sequence: max_age is the only
// way out), one at a time, and forgets them. Called from the pull loop.
func (s *Source) sweepRetries(ctx context.Context) {
	sw := s.sweeper.Load()
	if sw == nil {
		return
	}
	waiting := s.retries.due(time.Now())
	if len(waiting) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := sw.js.Stream(ctx, StreamWebhooks)
	if err != nil {
		s.health.log.Debug("could not check whether events waiting for their retry left WEBHOOKS", slog.String("error", err.Error()))
		return
	}
	state := st.CachedInfo().State
	gone := state.FirstSeq - 1 // stored sequences are contiguous
	if state.Msgs == 0 {
		gone = state.LastSeq
	}
	for _, seq := range waiting {
		if seq > gone {
			break
		}
		s.retries.came(seq)
		sw.tell(seq, seq)
	}
}
