package event

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Token encodes an outside value (account, subject, one level of a type)
// into one NATS subject or KV key token: bytes outside A-Z a-z 0-9 _ - become
// =XX (uppercase hex), a missing or empty value is "=". The encoding is
// injective, so two different values never share a token and no value can
// change a subject's shape.
func Token(v string) string {
	if v == "" {
		return "="
	}
	safe := true
	for i := 0; i < len(v); i++ {
		if !tokenSafe(v[i]) {
			safe = false
			break
		}
	}
	if safe {
		return v
	}
	const hexdig = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(v) + 8)
	for i := 0; i < len(v); i++ {
		c := v[i]
		if tokenSafe(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('=')
		b.WriteByte(hexdig[c>>4])
		b.WriteByte(hexdig[c&0xF])
	}
	return b.String()
}

// Tokens encodes a dotted value (a type such as "award.disbursed") level by
// level, so each level becomes its own subject token.
func Tokens(v string) string {
	if v == "" {
		return "="
	}
	parts := strings.Split(v, ".")
	for i, p := range parts {
		parts[i] = Token(p)
	}
	return strings.Join(parts, ".")
}

// DecodeToken reverses Token. It reports false for a malformed token.
func DecodeToken(t string) (string, bool) {
	if t == "=" {
		return "", true
	}
	var b strings.Builder
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c != '=' {
			if !tokenSafe(c) {
				return "", false
			}
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(t) {
			return "", false
		}
		hi, ok1 := unhex(t[i+1])
		lo, ok2 := unhex(t[i+2])
		if !ok1 || !ok2 {
			return "", false
		}
		b.WriteByte(hi<<4 | lo)
		i += 2
	}
	return b.String(), true
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func tokenSafe(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// Longest subject or KV key hookgate writes whole: the longest that fit
// NATS's 4096-byte protocol line (longer ones make the server close the
// connection; before these bounds one event with 1 KiB values, 3 KiB once
// escaped, did that to the consumer's connection after every restart).
// They are exactly what fits, so every subject and key that ever worked
// keeps its form (jetstream's TestSubjectAndKeyBoundsAreExact):
//   - MaxKey: a WATERMARKS read is a payload-free request on
//     $JS.API.DIRECT.GET.KV_WATERMARKS.$KV.WATERMARKS.<key> with a 38-byte
//     reply subject; the longest of a watermark's operations.
//   - MaxSubject: a GRANTS publish with the largest header block (5 digits)
//     and message size (8 digits) hookgate can send.
const (
	MaxSubject = 4042
	MaxKey     = 4007
)

// Bounded returns s when it is at most max bytes, else prefix followed by
// "=H" and the SHA-256 of s in lowercase hex. prefix is the part of s
// that names its stream or bucket level (e.g. "grants."); "=H" is no
// token escape, so the digest form is no other value's encoding. Every
// subject short enough to have been written before keeps its form.
func Bounded(s, prefix string, max int) string {
	if len(s) <= max {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return prefix + "=H" + hex.EncodeToString(sum[:])
}
