package event

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxToken bounds a token: a value whose encoding would be longer is
// written as its digest (see Token). NATS refuses a protocol line over
// 4096 bytes by closing the connection, so a subject built from a few
// unbounded tokens (an account, a subject and a type of 1 KiB each,
// tripled by the escapes) would take the consumer's connection down with
// it, and the event, redelivered, again after every restart.
const MaxToken = 128

// maxTokens bounds what Tokens writes for a dotted value.
const maxTokens = 256

// Token encodes an outside value (account, subject, one level of a type)
// into one NATS subject or KV key token: bytes outside A-Z a-z 0-9 _ - become
// =XX (uppercase hex), a missing or empty value is "=". The encoding is
// injective, so two different values never share a token and no value can
// change a subject's shape. A value whose encoding would pass MaxToken
// bytes is written "=H" and the SHA-256 of the value in lowercase hex
// ("=H" is no escape, so it cannot be another value's encoding).
func Token(v string) string {
	if v == "" {
		return "="
	}
	n := 0
	for i := 0; i < len(v); i++ {
		if tokenSafe(v[i]) {
			n++
		} else {
			n += 3
		}
	}
	switch {
	case n > MaxToken:
		return digestToken(v)
	case n == len(v):
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

// digestToken is the token of a value too long to encode.
func digestToken(v string) string {
	sum := sha256.Sum256([]byte(v))
	return "=H" + hex.EncodeToString(sum[:])
}

// Tokens encodes a dotted value (a type such as "award.disbursed") level by
// level, so each level becomes its own subject token; one that would pass
// 256 bytes becomes a single digest token (see Token).
func Tokens(v string) string {
	if v == "" {
		return "="
	}
	parts := strings.Split(v, ".")
	for i, p := range parts {
		parts[i] = Token(p)
	}
	if t := strings.Join(parts, "."); len(t) <= maxTokens {
		return t
	}
	return digestToken(v)
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
