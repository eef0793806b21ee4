package gateway

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hookgate/hookgate/config"
)

// hmac-sha256: the generic scheme for senders that put HMAC-SHA256 of the
// raw body (secret as is) into a header of their choosing (SchemeOptions.Header).
// The value may carry a "sha256=" prefix (any case) and the digest in
// any of the encodings such senders use. The encoding is told apart by
// length, so it is never ambiguous:
//
//	64 characters: hex (either case)
//	44 characters: base64, standard or URL alphabet, padded
//	43 characters: base64, standard or URL alphabet, unpadded
//
// Anything else is malformed. No timestamp is signed, so replay protection
// rests on dedup alone.
type hmacScheme struct {
	header string // canonical form
}

var errHMACHeaderRequired = errors.New("signature scheme hmac-sha256: header is required (the header carrying the digest)")

func newHMACScheme(header string) (*hmacScheme, error) {
	if header == "" {
		return nil, errHMACHeaderRequired
	}
	for i := 0; i < len(header); i++ {
		if !isSchemeHeaderTokenByte(header[i]) {
			return nil, fmt.Errorf("signature scheme hmac-sha256: header %q is not a valid header name", header)
		}
	}
	return &hmacScheme{header: http.CanonicalHeaderKey(header)}, nil
}

// isSchemeHeaderTokenByte reports whether c may appear in a header name (RFC 9110
// tchar).
func isSchemeHeaderTokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// decodeHMACDigest decodes a 32-byte digest given in one of the accepted
// encodings into dst.
func decodeHMACDigest(v string, dst *[sha256.Size]byte) bool {
	if len(v) >= len("sha256=") && strings.EqualFold(v[:len("sha256=")], "sha256=") {
		v = v[len("sha256="):]
	}
	var encs []*base64.Encoding
	switch len(v) {
	case hex.EncodedLen(sha256.Size):
		_, err := hex.Decode(dst[:], []byte(v))
		return err == nil
	case base64.StdEncoding.EncodedLen(sha256.Size):
		encs = []*base64.Encoding{base64.StdEncoding, base64.URLEncoding}
	case base64.RawStdEncoding.EncodedLen(sha256.Size):
		encs = []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding}
	default:
		return false
	}
	for _, enc := range encs {
		if decodeScheme32(enc, v, dst) {
			return true
		}
	}
	return false
}

// Verify implements Scheme; now is unused (nothing timestamped is signed).
func (s *hmacScheme) Verify(h http.Header, body []byte, secrets []config.Secret, _ time.Time) error {
	const name = SchemeHMACSHA256
	v, err := singleHeaderValue(name, h, s.header)
	if err != nil {
		return err
	}
	var got [sha256.Size]byte
	if !decodeHMACDigest(v, &got) {
		return newSchemeError(name, ErrSignatureMalformed, s.header+" is not a SHA-256 digest in hex or base64 (sha256= prefix allowed)")
	}
	return verifySchemeBodyMAC(name, s.header, got[:], body, secrets)
}

// Sign implements Scheme: the configured header with "sha256=<hex>", the
// most common shape among such senders. id and ts are unused.
func (s *hmacScheme) Sign(body []byte, secret config.Secret, _ string, _ time.Time) (http.Header, error) {
	if err := checkSchemePlainSecret(secret); err != nil {
		return nil, errors.New(SchemeHMACSHA256 + " sign: secret " + err.Error())
	}
	h := http.Header{}
	h.Set(s.header, "sha256="+hex.EncodeToString(schemeBodyMAC(secret, body, nil)))
	return h, nil
}
