package gateway

import "errors"

// ErrSignature is wrapped by every error Scheme.Verify returns: the request
// is not proven to come from the provider and must be answered 401 with
// nothing stored. errors.Is(err, ErrSignature) is the only check the HTTP
// layer needs; the finer kinds below are for metrics and audit reasons.
var ErrSignature = errors.New("signature rejected")

// Kinds of signature failure. Each error from Verify wraps ErrSignature and
// exactly one of these, so errors.Is works for both.
var (
	// ErrSignatureMissing: a required header is absent or empty.
	ErrSignatureMissing = errors.New("signature header missing")
	// ErrSignatureMalformed: a header is present but cannot be parsed, or is
	// repeated (several values are ambiguous, so they are refused).
	ErrSignatureMalformed = errors.New("signature header malformed")
	// ErrTimestampTooOld: the signed timestamp is further in the past than
	// the tolerance.
	ErrTimestampTooOld = errors.New("signature timestamp too old")
	// ErrTimestampTooNew: the signed timestamp is further in the future than
	// the tolerance.
	ErrTimestampTooNew = errors.New("signature timestamp too new")
	// ErrSignatureMismatch: the headers parse but no signature matches any
	// configured secret (wrong secret, tampered body, forged header).
	ErrSignatureMismatch = errors.New("no matching signature")
	// ErrSecretUnusable: none of the configured secrets can be used by the
	// scheme (none given, or all fail CheckSecret). This is a configuration
	// fault, yet the request is still refused: verification fails closed.
	ErrSecretUnusable = errors.New("no usable secret")
)

// schemeError is the error Verify returns. Its message is built only from
// the scheme name, header names and fixed text (and, for timestamps, the
// distance from now), never from a secret, a computed MAC or header values,
// so it can go into a 401 body, a log line and the audit stream as is.
type schemeError struct {
	kind error
	msg  string
}

func (e *schemeError) Error() string { return e.msg }

// Unwrap exposes both ErrSignature and the kind to errors.Is.
func (e *schemeError) Unwrap() []error { return []error{ErrSignature, e.kind} }

func newSchemeError(scheme string, kind error, detail string) error {
	return &schemeError{kind: kind, msg: scheme + ": " + detail}
}
