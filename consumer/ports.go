package consumer

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/hookgate/hookgate/event"
)

// ErrConflict is a compare-and-set that lost: someone changed the entry
// since it was read. Re-read and decide again.
var ErrConflict = errors.New("watermark changed concurrently")

// Mark is one subject's WATERMARKS entry.
type Mark struct {
	// At is the newest applied occurred_at (zero: nothing applied yet).
	At time.Time `json:"at"`
	// Keys are the keys applied at exactly At.
	Keys []string `json:"keys,omitempty"`
	// Lease, when set and not expired, reserves the subject's effects
	// for one event of one owner.
	Lease *Lease `json:"lease,omitempty"`
	// Grants is, per GRANTS subject the subject's events publish to, the
	// sequence of its last message as of the last commit (see
	// sequenced.go). Shared with the mark cache: never changed in place.
	Grants map[string]uint64 `json:"grants,omitempty"`
}

// Lease is a claim on a subject while an event's effects run.
type Lease struct {
	Owner string    `json:"owner"`
	Key   string    `json:"key"`
	Until time.Time `json:"until"`
	// Redeliver: the holder re-runs the forward of Key, an event already
	// applied (replay --redeliver), and moves nothing. Its event is never
	// in doubt: a holder gone leaves nothing for anyone to settle.
	Redeliver bool `json:"redeliver,omitempty"`
}

// Watermarks stores Marks, changed only by compare-and-set.
type Watermarks interface {
	// Get returns the mark and its revision; rev 0 means absent.
	Get(ctx context.Context, key string) (Mark, uint64, error)
	// Put stores m if the entry is still at rev (0: must not exist yet)
	// and returns the new revision, or ErrConflict.
	Put(ctx context.Context, key string, m Mark, rev uint64) (uint64, error)
}

// AppliedKeys remembers applied keys for the dedup horizon.
type AppliedKeys interface {
	Seen(ctx context.Context, key string) (bool, error)
	Remember(ctx context.Context, key string) error
}

// Grants publishes an applied event downstream, deduplicated by key.
type Grants interface {
	PublishGrant(ctx context.Context, subject, key string, header http.Header, body []byte) (uint64, error)
}

// GrantsIndex finds applied events in GRANTS. A rule's Grants that
// implements it can serve as the rule's applied-key memory (see memory.go).
type GrantsIndex interface {
	// HasGrant reports whether subject holds a message with Nats-Msg-Id
	// key, stored at or after since (zero: at any time).
	HasGrant(ctx context.Context, subject, key string, since time.Time) (bool, error)
}

// DeadLetters stores an event that will not be applied, with the reason.
type DeadLetters interface {
	DeadLetter(ctx context.Context, ev Event, reason string, deliveries int) (uint64, error)
}

// Auditor appends a decision to AUDIT without blocking.
type Auditor interface {
	Record(r event.AuditRecord)
}

// Delivery acknowledges one delivered message.
type Delivery interface {
	Ack(ctx context.Context) error
	NakWithDelay(d time.Duration) error
	InProgress() error
}

// ConfirmedNaker is a Delivery that can hand a message back and wait until
// the server has taken it. A stop hands back this way: the server process
// may stop next (the embedded one does), and a negative acknowledgement it
// had not taken yet would leave the message to wait out the ack wait.
type ConfirmedNaker interface {
	NakWithDelayConfirmed(ctx context.Context, d time.Duration) error
}

// Message is one delivery of a stored event.
type Message struct {
	Event      Event
	Deliveries int // this delivery's number, the first is 1
	Delivery   Delivery
	// stop closes when the Run that delivered the message is stopping
	// (nil outside Run): waits that have not started the event's effects
	// give it back rather than hold up the shutdown.
	stop <-chan struct{}
	// parkable: Run delivered the message and can keep it at the head of
	// its subject. Then Process, for an event that has to wait (its
	// subject waits for an in-doubt event, or its store did not answer
	// through the in-place retries), sets waitUntil (and waitFor, the
	// in-doubt event's key) instead of handing it back, and neither
	// acks nor naks it: Run keeps it, alive, at the head of its subject,
	// runs the in-doubt event first when it arrives, and runs it again
	// then or at waitUntil. Events of its subject delivered meanwhile queue
	// behind it, so none of them overtakes it (a handed-back event came
	// back after newer ones fetched meanwhile, and was stale).
	parkable  bool
	waitFor   string
	waitUntil time.Time // zero: not kept
	// waits counts the times Process kept m so far. A kept event is run
	// again every handBackDelay while its subject waits (up to the in-doubt
	// wait, 80 s by default): its first wait is logged and counted, the
	// runs that find it still waiting for the same reason (lastRetry) are
	// not (a crash left a line a second per subject in doubt, and a retry
	// in the metrics each).
	waits     int
	lastRetry string
	// effectsRan: the event's effects ran (in this delivery, or found
	// applied by an earlier one); a panic after that is not a failure
	// (Processor.panicked).
	effectsRan bool
	// letter is the reason this delivery was decided dead-lettered with,
	// set when writing the letter failed: the runs that try again write
	// the letter only, never the effects again (a forward that answered
	// 4xx was POSTed again at every run while DLQ refused; review 9).
	letter string
	// letterStatus is the HTTP status letter's failure had (a forward's
	// answer), 0 when none.
	letterStatus int
	// letterSeq is the DLQ sequence of the letter written, for the log line.
	letterSeq uint64
	// effectsDone is how many of the event's effects before its last
	// succeeded in this delivery's runs that then failed for the store's
	// trouble (ErrStoreUnavailable): the runs that try again in place
	// skip them, so a forward is not POSTed again every few seconds while
	// GRANTS is down (found by review). storeTroubleSince is when the
	// first such run failed: past storeTroubleMax the failure counts as
	// an attempt again.
	effectsDone       int
	storeTroubleSince time.Time
}

// kept reports whether Process asked Run to keep m (Message.parkable).
func (m *Message) kept() bool { return !m.waitUntil.IsZero() }

// stopping reports whether the Run that delivered m is stopping.
func (m *Message) stopping() bool {
	select {
	case <-m.stop:
		return true
	default:
		return false
	}
}
