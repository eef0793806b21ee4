package consumer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Event is one stored webhook as the consumer applies it.
type Event struct {
	Key      string // idempotency key; effects must be idempotent on it
	Provider string //
	Account  string // raw account value
	Subject  string // raw subject value ("" when not configured or absent)
	Type     string // raw type value
	// OccurredRaw is the provider timestamp as extracted; OccurredAt is it
	// parsed (zero when absent or unparseable).
	OccurredRaw string
	OccurredAt  time.Time
	ReceivedAt  time.Time   // when the gateway stored it
	Seq         uint64      // WEBHOOKS stream sequence
	Header      http.Header // stored headers (request headers plus Hookgate-*)
	Body        []byte      // the original body, unmodified
}

// Effect is one thing applying an event does. Apply must be idempotent on
// ev.Key: after a crash the consumer may call it again for the same event
// (a database effect writes "insert ... on conflict (key) do nothing").
// An error is retried with backoff unless wrapped with Permanent, which
// dead-letters the event at once. Implementations must be safe for
// concurrent use across subjects; the consumer never runs two effects of
// one subject at once.
type Effect interface {
	Apply(ctx context.Context, ev Event) error
}

// EffectFunc adapts a function to Effect.
type EffectFunc func(ctx context.Context, ev Event) error

// Apply calls f.
func (f EffectFunc) Apply(ctx context.Context, ev Event) error { return f(ctx, ev) }

// ErrPermanent marks an error that retrying cannot fix.
var ErrPermanent = errors.New("permanent failure")

// ErrStoreFull marks a write its stream refuses until an operator acts
// (the stream full, or the message larger than it may ever hold), where
// the event can be neither settled nor given up: a dead letter DLQ does
// not take. The event waits, not holding a worker, and is tried again
// every few seconds.
var ErrStoreFull = errors.New("store full")

// ErrLeftToConsumer is a DeadLetters' refusal to write a letter that is not
// its caller's to write: a replay's, for an event the live consumer holds
// (delivered to a serve, not settled: waiting out a retry's backoff). The
// live consumer decides that event; a letter written beside it was left
// in DLQ once serve's next try applied the event (audit 42). Process then
// reports Retry, writes nothing, and does not try again in place.
var ErrLeftToConsumer = errors.New("left to the live consumer")

// ErrStoreUnavailable marks a write or read of the consumer's own store
// (GRANTS) that failed for no fault of the event: no connection, no
// answer in time, the store stopped writing after a write error (a full
// disk), a cluster without a leader. The event is tried again in place,
// holding its subject and not counted as an attempt, as for a lease
// write: counted, it released its subject to newer events, which took it
// over as soon as the store came back (or, after a restart, ahead of it)
// and left it stale, never applied (a resource audit, stop 39: a full
// disk dropped events that had been stored in order).
var ErrStoreUnavailable = errors.New("store unavailable")

// Permanent wraps err so the consumer dead-letters the event at once.
func Permanent(err error) error { return fmt.Errorf("%w: %w", ErrPermanent, err) }
