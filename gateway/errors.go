package gateway

import (
	"errors"
	"net/http"

	"github.com/hookgate/hookgate/jetstream"
)

// Gateway sentinels not owned by a scheme or the key rules.
var (
	errUnknownProvider = errors.New("unknown provider")
	errTooLarge        = errors.New("body too large")
	// errHeadersTooLarge: the request headers would not fit the stored
	// event's header block (JetStream caps it at 64 KiB).
	errHeadersTooLarge = errors.New("request headers too large")
	// errValueTooLong: an extracted subject, type, occurred_at or account
	// is too long to be copied into a Hookgate-* header.
	errValueTooLong = errors.New("value too long")
	// errHidesNatsHeader: a stored header name or value that nats-server
	// would read as hiding one of its own headers (see hidesNatsHeader).
	errHidesNatsHeader = errors.New("header hides a NATS header")
	// errEncoding: a Content-Encoding other than identity. Signatures and
	// keys are over the bytes as sent, and receivers get them as stored.
	errEncoding = errors.New("unsupported Content-Encoding")
)

// statusOf is the one table from an error kind to the HTTP status the
// sender sees. 503 answers carry Retry-After so the sender retries later.
func statusOf(err error) int {
	switch {
	case errors.Is(err, ErrSignature):
		return http.StatusUnauthorized
	case errors.Is(err, errTooLarge), errors.Is(err, jetstream.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, errHeadersTooLarge):
		return http.StatusRequestHeaderFieldsTooLarge
	case errors.Is(err, ErrBadJSON), errors.Is(err, ErrNoEventID), errors.Is(err, errValueTooLong), errors.Is(err, errHidesNatsHeader):
		return http.StatusBadRequest
	case errors.Is(err, errEncoding):
		return http.StatusUnsupportedMediaType
	case errors.Is(err, errUnknownProvider):
		return http.StatusNotFound
	case errors.Is(err, jetstream.ErrUnavailable), errors.Is(err, jetstream.ErrStreamFull):
		return http.StatusServiceUnavailable
	}
	return http.StatusServiceUnavailable
}
