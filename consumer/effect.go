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

// Permanent wraps err so the consumer dead-letters the event at once.
func Permanent(err error) error { return fmt.Errorf("%w: %w", ErrPermanent, err) }

// ErrStoreTrouble marks an effect's error as the store's, not the event's:
// GRANTS full (its max_bytes reached) or not answering. The event is tried
// again without counting an attempt, so it is never dead-lettered for it,
// and the effects that succeeded before the failing one are not run again
// while the delivery lasts. (Counted, a GRANTS that filled up had every
// event forwarded max_deliver times and then dead-lettered; review C.)
var ErrStoreTrouble = errors.New("store trouble")

// StoreTrouble wraps err as ErrStoreTrouble; its message is err's.
func StoreTrouble(err error) error { return storeTrouble{err} }

type storeTrouble struct{ err error }

func (e storeTrouble) Error() string   { return e.err.Error() }
func (e storeTrouble) Unwrap() []error { return []error{ErrStoreTrouble, e.err} }
