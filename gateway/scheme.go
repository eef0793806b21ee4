package gateway

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookgate/hookgate/config"
)

// Scheme verifies and produces one provider's webhook signatures.
// Implementations are safe for concurrent use: they hold only their options
// and compute everything else per call.
type Scheme interface {
	// Verify returns nil when any of secrets signed body (several secrets
	// allow rotation), else an error wrapping ErrSignature and one of the
	// kinds in scheme_errors.go whose message says what is wrong (missing
	// header, malformed or repeated header, timestamp too old or too new, no
	// matching signature) and never contains a secret, the expected MAC or a
	// header value. Every comparison of MACs is constant-time.
	Verify(h http.Header, body []byte, secrets []config.Secret, now time.Time) error

	// Sign returns the headers the provider would send for body (for
	// `hookgate sign` and tests). id and ts are used by schemes that carry
	// them; an empty id means a random one where the scheme carries an id, a
	// zero ts means time.Now(). It fails when the secret is unusable
	// (CheckSecret) or the id has bytes outside printable ASCII 0x21-0x7E,
	// which would not survive as a header value.
	Sign(body []byte, secret config.Secret, id string, ts time.Time) (http.Header, error)
}

// SchemeOptions configure a Scheme; see NewScheme.
type SchemeOptions struct {
	// Tolerance bounds |now - signed timestamp| for timestamped schemes
	// (standard-webhooks, stripe); 0 means DefaultSchemeTolerance. Ignored
	// by the other schemes, so a config may pass its value to every scheme.
	Tolerance time.Duration
	// Header names the header carrying the digest; hmac-sha256 only, where
	// it is required.
	Header string
}

// DefaultSchemeTolerance is the tolerance used when SchemeOptions.Tolerance
// is 0: the five minutes of the Standard Webhooks and Stripe libraries.
const DefaultSchemeTolerance = 5 * time.Minute

// Scheme names as written in the config's `signature.scheme`.
const (
	SchemeStandardWebhooks = "standard-webhooks"
	SchemeStripe           = "stripe"
	SchemeGitHub           = "github"
	SchemeShopify          = "shopify"
	SchemeHMACSHA256       = "hmac-sha256"
)

// SchemeNames returns the valid scheme names in documentation order. The
// slice is the caller's to keep.
func SchemeNames() []string {
	return []string{SchemeStandardWebhooks, SchemeStripe, SchemeGitHub, SchemeShopify, SchemeHMACSHA256}
}

// NewScheme returns the named scheme. It fails on an unknown name (the
// message lists the valid ones), a negative tolerance, a missing or invalid
// Header for hmac-sha256, or a Header given to any other scheme (where it
// would be silently ignored, hiding a misconfiguration).
func NewScheme(name string, opts SchemeOptions) (Scheme, error) {
	if opts.Tolerance < 0 {
		return nil, fmt.Errorf("signature scheme %s: tolerance must not be negative", name)
	}
	tol := opts.Tolerance
	if tol == 0 {
		tol = DefaultSchemeTolerance
	}
	if opts.Header != "" && name != SchemeHMACSHA256 {
		return nil, fmt.Errorf("signature scheme %s: header is only used by %s", name, SchemeHMACSHA256)
	}
	switch name {
	case SchemeStandardWebhooks:
		return &standardScheme{tolerance: tol}, nil
	case SchemeStripe:
		return &stripeScheme{tolerance: tol}, nil
	case SchemeGitHub:
		return githubScheme{}, nil
	case SchemeShopify:
		return shopifyScheme{}, nil
	case SchemeHMACSHA256:
		return newHMACScheme(opts.Header)
	}
	return nil, fmt.Errorf("unknown signature scheme %q (valid: %s)", name, strings.Join(SchemeNames(), ", "))
}

// CheckSecret reports whether s is usable by the scheme: not empty; for
// standard-webhooks, base64 (standard alphabet, padded) after an optional
// `whsec_` prefix, decoding to at least one byte; for the schemes that use
// the secret as is, not ending in a line break (a file: secret's trailing
// newline would silently change every MAC; the base64 decoder of
// standard-webhooks skips it, so there it is harmless). Verify skips
// secrets that fail it and Sign refuses them. The message names the scheme
// and the problem, never the secret.
func CheckSecret(scheme string, s config.Secret) error {
	var err error
	switch scheme {
	case SchemeStandardWebhooks:
		_, err = standardKey(s)
	case SchemeStripe, SchemeGitHub, SchemeShopify, SchemeHMACSHA256:
		err = checkSchemePlainSecret(s)
	default:
		return fmt.Errorf("unknown signature scheme %q (valid: %s)", scheme, strings.Join(SchemeNames(), ", "))
	}
	if err != nil {
		return fmt.Errorf("%s secret: %w", scheme, err)
	}
	return nil
}

// errSchemeSecretEmpty and errSchemeSecretNewline are the messages CheckSecret wraps.
var (
	errSchemeSecretEmpty   = errors.New("is empty")
	errSchemeSecretNewline = errors.New("ends with a line break (is it a file read with its trailing newline?)")
)

func checkSchemePlainSecret(s config.Secret) error {
	v := s.Reveal()
	if v == "" {
		return errSchemeSecretEmpty
	}
	if strings.HasSuffix(v, "\n") || strings.HasSuffix(v, "\r") {
		return errSchemeSecretNewline
	}
	return nil
}

// singleHeaderValue returns the one value of the header name (canonical
// lookup). Several values are refused as malformed: a proxy that appends a
// second copy, or an attacker who adds one, would otherwise decide which
// copy we read.
func singleHeaderValue(scheme string, h http.Header, name string) (string, error) {
	vs := h.Values(name)
	switch {
	case len(vs) == 0 || (len(vs) == 1 && vs[0] == ""):
		return "", newSchemeError(scheme, ErrSignatureMissing, name+" header missing")
	case len(vs) > 1:
		return "", newSchemeError(scheme, ErrSignatureMalformed, fmt.Sprintf("%s header repeated (%d values)", name, len(vs)))
	}
	return vs[0], nil
}

// parseSchemeUnix parses a Unix-seconds timestamp in canonical decimal form:
// ASCII digits only, no sign, no leading zero, at most 18 digits. Canonical
// form matters because the standard-webhooks signed content uses the header
// text, and the Standard Webhooks libraries sign the re-formatted number.
func parseSchemeUnix(s string) (int64, bool) {
	if s == "" || len(s) > 18 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// checkSchemeTolerance refuses a timestamp more than tol before or after
// now; exactly tol away is accepted, as in the Standard Webhooks and Stripe
// libraries. time.Time.Sub saturates, so absurd timestamps cannot overflow.
func checkSchemeTolerance(scheme, header string, unix int64, now time.Time, tol time.Duration) error {
	d := now.Sub(time.Unix(unix, 0))
	switch {
	case d > tol:
		return newSchemeError(scheme, ErrTimestampTooOld, fmt.Sprintf("%s too old: %s before now, tolerance %s", header, fmtSchemeAge(d, tol), tol))
	case d < -tol:
		// Not -d: a saturated d (the minimum Duration, a timestamp
		// centuries ahead, e.g. milliseconds sent as seconds) negates to
		// itself; the other way round saturates to the maximum.
		return newSchemeError(scheme, ErrTimestampTooNew, fmt.Sprintf("%s too new: %s after now, tolerance %s", header, fmtSchemeAge(time.Unix(unix, 0).Sub(now), tol), tol))
	}
	return nil
}

// fmtSchemeAge writes a distance d past tol: to the second, or, where that
// would read as tol or less ("5m0s after now, tolerance 5m0s", seen in a
// security audit, stop 41), to the millisecond rounded up, or whole.
func fmtSchemeAge(d, tol time.Duration) string {
	if d >= 1000*time.Hour {
		return "more than 1000h"
	}
	if r := d.Round(time.Second); r > tol {
		return r.String()
	}
	if r := (d + time.Millisecond - 1).Truncate(time.Millisecond); r > tol {
		return r.String()
	}
	return d.String()
}

// schemeSignTime is the timestamp Sign uses: ts, or now when ts is zero.
func schemeSignTime(ts time.Time) time.Time {
	if ts.IsZero() {
		return time.Now()
	}
	return ts
}

// schemeSignID checks a caller's id or, when empty, returns gen(). Any id
// a header can carry unchanged is taken, spaces and bytes past ASCII too
// (the gateway keys such an id by its hash, evt#): a control character
// would end or split the header, and HTTP drops leading and trailing
// whitespace, so the receiver would verify another id.
func schemeSignID(scheme, id string, gen func() string) (string, error) {
	if id == "" {
		return gen(), nil
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x20 && id[i] != '\t' || id[i] == 0x7f {
			return "", fmt.Errorf("%s sign: id holds a control character (byte 0x%02x at %d): a header cannot carry it", scheme, id[i], i)
		}
	}
	if strings.Trim(id, " \t") != id {
		return "", fmt.Errorf("%s sign: id starts or ends with whitespace, which HTTP drops from a header: the receiver would verify another id", scheme)
	}
	return id, nil
}

// schemeUUID returns a random (version 4) UUID, the id format GitHub and
// Shopify use for deliveries and events.
func schemeUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it crashes the program instead).
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// schemeSignUnix is the Unix-seconds timestamp Sign puts in a header: ts
// (now when zero), refused when Verify could not read it back.
func schemeSignUnix(scheme string, ts time.Time) (int64, error) {
	u := schemeSignTime(ts).Unix()
	if _, ok := parseSchemeUnix(strconv.FormatInt(u, 10)); !ok {
		return 0, fmt.Errorf("%s sign: timestamp must be from 1970 on and at most 18 digits of Unix seconds", scheme)
	}
	return u, nil
}

var (
	_ Scheme = (*standardScheme)(nil)
	_ Scheme = (*stripeScheme)(nil)
	_ Scheme = githubScheme{}
	_ Scheme = shopifyScheme{}
	_ Scheme = (*hmacScheme)(nil)
)

// decodeScheme32 decodes s, expected to be 43 or 44 characters of base64,
// into dst and reports whether it is exactly 32 bytes in enc's strict form.
// It decodes through a larger buffer because base64's Decode panics when
// dst is shorter than DecodedLen, which is 33 for 44 characters without
// padding.
func decodeScheme32(enc *base64.Encoding, s string, dst *[sha256.Size]byte) bool {
	var buf [sha256.Size + 3]byte
	if enc.DecodedLen(len(s)) > len(buf) {
		return false
	}
	n, err := enc.Strict().Decode(buf[:], []byte(s))
	if err != nil || n != sha256.Size {
		return false
	}
	copy(dst[:], buf[:n])
	return true
}
