package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hookgate/hookgate/consumer"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// Sentinels returned by this package. Callers map them to HTTP answers with
// errors.Is; the wrapped nats error keeps the detail for logs.
var (
	// ErrUnavailable: JetStream could not be reached, or did not acknowledge
	// in time. Nothing was stored; the sender should retry later.
	ErrUnavailable = errors.New("jetstream unavailable")
	// ErrStreamFull: the stream hit its max_bytes / max_msgs limit and
	// refused the write (DiscardNew). Nothing was stored.
	ErrStreamFull = errors.New("stream full")
	// ErrTooLarge: the message exceeds the stream's or server's size limit.
	ErrTooLarge = errors.New("message too large")
	// ErrDataDirLocked: another process holds the embedded server's data_dir.
	ErrDataDirLocked = errors.New("data_dir is in use")
	// ErrUnfinishedRestore: data_dir (RestoreMarkFile) or the server's
	// streams (RestoreMetadata) hold a restore that was stopped part way:
	// its streams are incomplete.
	ErrUnfinishedRestore = errors.New("a restore that did not finish")
	// ErrConfigConflict: an existing stream differs from the config in a way
	// that JetStream cannot update in place.
	ErrConfigConflict = errors.New("stream config conflict")
	// ErrAuthorization: the NATS server refused the credentials or token.
	ErrAuthorization = errors.New("nats refused the credentials")
	// ErrTLS: the TLS handshake with the NATS server failed (a server
	// certificate not trusted, a client certificate required or refused):
	// nats.tls's files, not something that passes by waiting.
	ErrTLS = errors.New("tls with the nats server failed (see nats.tls: ca, cert, key)")
	// ErrNoServer: nothing answered at the NATS address (refused, or no
	// server reachable). Connect wraps it with ErrUnavailable.
	ErrNoServer = errors.New("no nats server answered")
	// ErrTooFarBehind: RedeliverOutstanding left the consumer alone, as
	// it would run too many settled events again.
	ErrTooFarBehind = errors.New("too many settled events above the ack floor")
	// ErrNotConnected: the connection to NATS is down and reconnecting
	// (Conn.Connected); requests fail at once meanwhile.
	ErrNotConnected = errors.New("not connected to NATS (reconnecting)")
	// ErrPermissionDenied: the NATS server accepted the credentials but
	// its permissions deny this user the subject of a request (asking
	// again fails the same way until they are changed).
	ErrPermissionDenied = errors.New("nats permissions deny the subject")
)

// notConnected is nats.ErrReconnectBufExceeded as an operator reads it:
// with nothing buffered while disconnected (ReconnectBufSize(-1)), it is
// what every request made then fails with, and "outbound buffer limit
// exceeded" read as an overflow, not an outage (review AO).
type notConnected struct{ err error }

func (e notConnected) Error() string {
	// The reason the last attempt failed, when it says more than that no
	// connection is up (a refusal of the credentials; review AR).
	if e.err != nil && !errors.Is(e.err, nats.ErrReconnectBufExceeded) && !errors.Is(e.err, nats.ErrConnectionClosed) {
		return ErrNotConnected.Error() + ": " + e.err.Error()
	}
	return ErrNotConnected.Error()
}

func (e notConnected) Unwrap() []error { return []error{ErrNotConnected, e.err} }

// asNotConnected is err as an operator reads it when it is nats.go's
// refusal to buffer while disconnected ("outbound buffer limit exceeded"
// read as an overflow, not an outage: ack, nak and AUDIT lines said it
// during a node's restart; a cluster audit, stop 39); else err.
func asNotConnected(err error) error {
	if err != nil && errors.Is(err, nats.ErrReconnectBufExceeded) && !errors.Is(err, ErrNotConnected) {
		return notConnected{err}
	}
	return err
}

// JetStream error codes this package reacts to (nats-server's
// jetstream_errors_generated.go).
const (
	codeClusterNoPeers         = 10005 // "no suitable peers for placement": replicas' servers not all online yet
	codeClusterNotAvailable    = 10008
	codeClusterNotLeader       = 10009
	codeWrongLastSequence      = 10071
	codeWrongLastSeqConstant   = 10164 // a clustered stream: the subject has a write in flight (not a mismatch)
	codeStreamStoreFailed      = 10077 // "maximum messages/bytes exceeded" surfaces through this on DiscardNew
	codeMessageExceedsMaximum  = 10054
	codeHeaderExceedsMaximum   = 10097 // JSStreamHeaderExceedsMaximumErr: header block over 64 KiB
	codeDuplicateInProcess     = 10158
	codeStreamResourcesExceed  = 10047
	codeInsufficientResources  = 10023
	codeAccountResourcesExceed = 10002
	codeReplicasNotSupported   = 10074 // "replicas > 1 not supported in non-clustered mode"
)

// apiCode returns the JetStream API error code in err, or 0.
func apiCode(err error) uint16 {
	var apiErr *js.APIError
	if errors.As(err, &apiErr) {
		return uint16(apiErr.ErrorCode)
	}
	return 0
}

// classify wraps a nats error in the package sentinel that fits it.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	switch apiCode(err) {
	case codeStreamStoreFailed:
		if storeRefusedSize(err) {
			return fmt.Errorf("%s: %w: %w", op, ErrTooLarge, err)
		}
		return fmt.Errorf("%s: %w: %w", op, ErrStreamFull, err)
	case codeStreamResourcesExceed, codeInsufficientResources, codeAccountResourcesExceed:
		return fmt.Errorf("%s: %w: %w", op, ErrStreamFull, err)
	case codeMessageExceedsMaximum, codeHeaderExceedsMaximum:
		return fmt.Errorf("%s: %w: %w", op, ErrTooLarge, err)
	case codeReplicasNotSupported:
		// The server answered: no outage, and the key to change is
		// hookgate's (audit 42: "jetstream unavailable", no key named).
		return fmt.Errorf("%s: nats.replicas above 1 needs a NATS cluster, and the server at nats.url runs alone: set nats.replicas: 1, or point nats.url at a cluster (%w)", op, err)
	}
	if errors.Is(err, nats.ErrMaxPayload) {
		return fmt.Errorf("%s: %w: %w", op, ErrTooLarge, err)
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, asNotConnected(err))
}

// fullHint adds to a stream's refusal as full what to change: the
// retention key of the stream subject's first token names (webhooks.*,
// grants.*, dlq.*, audit.*), read at start only. Other errors and
// subjects are returned as they are.
func fullHint(subject string, err error) error {
	if !errors.Is(err, ErrStreamFull) {
		return err
	}
	tok, _, _ := strings.Cut(subject, ".")
	switch tok {
	case "webhooks", "grants", "dlq", "audit":
		return fmt.Errorf("%w (retention.%s.max_bytes reached: raise it and restart serve, or let retention.%s.max_age free room)", err, tok, tok)
	}
	return err
}

// storeTrouble wraps err with consumer.ErrStoreUnavailable when the store
// failed for no fault of the message (see there), listed, not guessed:
// no answer in time, not connected, the embedded store stopped writing
// after a write error, a cluster without a leader for the stream now.
// Anything else stays as it is, counted as an attempt: a refusal that is
// the message's own, or an error this package has no word for (no stream
// for the subject, a client-side error), would otherwise be tried for
// good (review of stop 39: classify puts ErrUnavailable on every error
// it does not know).
func storeTrouble(err error) error {
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, consumer.ErrStoreUnavailable) {
		return err
	}
	var apiErr *js.APIError
	switch {
	case errors.As(err, &apiErr):
		if c := apiErr.ErrorCode; c != codeClusterNotAvailable && c != codeClusterNotLeader {
			return err
		}
	case errors.Is(err, js.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		return err
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, ErrNotConnected), errors.Is(err, nats.ErrReconnectBufExceeded),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, ErrStoreWrite):
	default:
		return err
	}
	return fmt.Errorf("%w: %w", consumer.ErrStoreUnavailable, err)
}

// storeRefusedSize reports whether a "store failed" error (10077, a full
// stream's code too) is the file store refusing the message's size: a
// record over 32 MiB whatever the max payload ("message too large"). No
// retry stores it, so it is ErrTooLarge, not ErrStreamFull (review BF:
// the gateway answered 503 and the sender retried it for days).
func storeRefusedSize(err error) bool {
	var apiErr *js.APIError
	return errors.As(err, &apiErr) && strings.Contains(strings.ToLower(apiErr.Description), "message too large")
}
