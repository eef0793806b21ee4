package gateway

import (
	"errors"
	"fmt"
)

// ErrBadJSON is wrapped by every error that means "the body had to be JSON
// and is not": everything ParseJSON returns, and the errors of
// Payload.Lookup and DeriveKey caused by such a body. It maps to HTTP 400.
// The wrapping error's message says what is wrong and at which byte, and
// never quotes the body, so it is safe to send back to the sender.
var ErrBadJSON = errors.New("body is not valid JSON")

// JSONError says why a body is not acceptable JSON. It unwraps to
// ErrBadJSON.
type JSONError struct {
	// Offset is the byte offset in the body where the problem was found.
	Offset int
	// Reason says what is wrong, e.g. "invalid UTF-8" or "nesting deeper
	// than 128". It describes the body's shape, never its content.
	Reason string
}

func (e *JSONError) Error() string {
	return fmt.Sprintf("%s: %s at byte %d", ErrBadJSON, e.Reason, e.Offset)
}

// Unwrap lets errors.Is(err, ErrBadJSON) hold.
func (e *JSONError) Unwrap() error { return ErrBadJSON }
