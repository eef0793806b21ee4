package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Fallback is what DeriveKey does when a request carries no event id.
type Fallback string

// The fallbacks of the config's `fallback` key.
const (
	// FallbackDigest keys the event by the SHA-256 of its canonical JSON,
	// or of the raw body when the body is not JSON and nothing needs JSON.
	FallbackDigest Fallback = "digest"
	// FallbackFields keys the event by the SHA-256 of the KeyFields.
	FallbackFields Fallback = "fields"
	// FallbackReject refuses the request with ErrNoEventID.
	FallbackReject Fallback = "reject"
)

// Limits on what goes into a key verbatim; longer values are hashed.
const (
	MaxKeyAccountLen = 100
	MaxKeyEventIDLen = 200
)

// KeyRule is one provider's key configuration, parsed from the config.
type KeyRule struct {
	// Provider is the provider's name from the config ([a-z0-9_-]+); the
	// key starts with it.
	Provider string
	// AccountHeader, AccountJSON and AccountValue are the account sources,
	// tried in that order; an empty value counts as absent. "" and nil
	// mean not configured. Canonical header names save an allocation.
	AccountHeader string
	AccountJSON   *Pointer
	AccountValue  string
	// EventID is tried in order; the first present value wins.
	EventID []Source
	// Fallback applies when no event id is present. Anything other than
	// FallbackFields and FallbackReject (including "") means FallbackDigest.
	Fallback Fallback
	// KeyFields are the pointers hashed by FallbackFields.
	KeyFields []Pointer
	// NeedsJSON is true when any json: source is configured for the
	// provider anywhere (also subject, occurred_at, type). Then the body
	// must be valid JSON on every request, and the raw fallback is off.
	// AccountJSON and json: event ids imply it even when it is false.
	NeedsJSON bool
}

func (r *KeyRule) needsJSON() bool {
	if r.NeedsJSON || r.AccountJSON != nil {
		return true
	}
	for _, s := range r.EventID {
		if s.IsJSON() {
			return true
		}
	}
	return false
}

// KeyKind says which rule of the contract produced a key; it is the tag
// written after the account.
type KeyKind string

// The kinds of idempotency key.
const (
	KeyEvent       KeyKind = "evt"  // <provider>:<account>:evt:<event id>
	KeyEventHashed KeyKind = "evt#" // <provider>:<account>:evt#<sha256 hex of the id>
	KeyDigest      KeyKind = "dig"  // <provider>:<account>:dig:<sha256 hex of the canonical JSON>
	KeyFields      KeyKind = "fld"  // <provider>:<account>:fld:<sha256 hex of the key fields>
	KeyRaw         KeyKind = "raw"  // <provider>:<account>:raw:<sha256 hex of the body>
)

// DerivedKey is the idempotency key of one request and the account it was
// derived with.
type DerivedKey struct {
	// Key is the idempotency key; printable ASCII, starting with the
	// provider and ':'.
	Key  string
	Kind KeyKind
	// Account is the account value as found (raw, possibly empty or
	// unsafe), for the NATS subject token and the Hookgate-Account header.
	Account string
	// AccountInKey is Account as written in Key: itself, or acct#<sha256
	// hex> when it is longer than MaxKeyAccountLen, contains ':' or a byte
	// outside 0x21-0x7E, or starts acct# itself.
	AccountInKey string
}

// DeriveKey computes the idempotency key of a request under rule, as the
// contract's "Idempotency key" section specifies:
//
//   - <provider>:<account>:evt:<id> from the first present EventID source;
//     an id longer than MaxKeyEventIDLen or with a byte outside 0x21-0x7E
//     gives <provider>:<account>:evt#<sha256 hex of the id>.
//   - With no id and FallbackDigest: <provider>:<account>:dig:<sha256 hex>
//     of the canonical JSON (see Canonical). When the body is not JSON,
//     nothing needs JSON (see KeyRule.NeedsJSON) and the Content-Type does
//     not declare JSON: <provider>:<account>:raw:<sha256 hex of the body>.
//     A body that parses as JSON is digested whatever its Content-Type.
//   - With no id and FallbackFields: <provider>:<account>:fld:<sha256 hex>
//     of the canonical JSON array of the KeyFields' values, a missing field
//     as null: ["G-42",7,null] for three fields. That encoding is
//     unambiguous (strings stay quoted, so "7" and 7 differ). When every
//     field is missing or null the fields identify nothing, and the key
//     falls back to the digest rather than making all such events
//     duplicates of each other.
//   - With no id and FallbackReject: an error wrapping ErrNoEventID.
//
// The account is AccountHeader, else AccountJSON, else AccountValue
// (empty counts as absent); when all are empty it is "" and the key reads
// <provider>::... An unsafe account is written acct#<sha256 hex>.
//
// Errors: ErrNoEventID as above; ErrBadJSON (a *JSONError) when the body is
// not valid JSON and a json: source needs it, the fields fallback needs it,
// or the digest needs it and the Content-Type declares JSON. The messages
// are safe to return in a 400 body. DeriveKey is deterministic and does no
// I/O; it parses the body at most once (through p).
func DeriveKey(rule KeyRule, p *Payload) (DerivedKey, error) {
	if rule.needsJSON() {
		if err := p.validJSON(); err != nil {
			return DerivedKey{}, err
		}
	}
	account, err := deriveAccount(&rule, p)
	if err != nil {
		return DerivedKey{}, err
	}
	dk := DerivedKey{Account: account, AccountInKey: accountInKey(account)}
	build := func(kind KeyKind, sep, tail string) (DerivedKey, error) {
		dk.Kind = kind
		dk.Key = rule.Provider + ":" + dk.AccountInKey + ":" + string(kind) + sep + tail
		return dk, nil
	}

	for _, src := range rule.EventID {
		id, ok, err := p.Lookup(src)
		if err != nil {
			return DerivedKey{}, err
		}
		if !ok {
			continue
		}
		if len(id) <= MaxKeyEventIDLen && isKeySafe(id) {
			return build(KeyEvent, ":", id)
		}
		h := sha256.Sum256([]byte(id))
		return build(KeyEventHashed, "", hex.EncodeToString(h[:]))
	}

	switch rule.Fallback {
	case FallbackReject:
		return DerivedKey{}, noEventIDError(rule.EventID)
	case FallbackFields:
		root, err := p.JSON()
		if err != nil {
			return DerivedKey{}, err
		}
		if sum, ok := fieldsDigest(root, rule.KeyFields); ok {
			return build(KeyFields, ":", hex.EncodeToString(sum[:]))
		}
		return build(KeyDigest, ":", canonicalDigest(root, len(p.body)))
	}

	root, err := p.JSON()
	if err != nil {
		// needsJSON already failed above, so only the Content-Type can
		// still demand JSON.
		if p.DeclaresJSON() {
			return DerivedKey{}, err
		}
		h := sha256.Sum256(p.body)
		return build(KeyRaw, ":", hex.EncodeToString(h[:]))
	}
	return build(KeyDigest, ":", canonicalDigest(root, len(p.body)))
}

func deriveAccount(rule *KeyRule, p *Payload) (string, error) {
	if rule.AccountHeader != "" {
		if v, ok, _ := firstHeader(p.header, rule.AccountHeader); ok {
			return v, nil
		}
	}
	if rule.AccountJSON != nil {
		v, ok, err := p.Lookup(Source{isJSON: true, ptr: *rule.AccountJSON})
		if err != nil {
			return "", err
		}
		if ok {
			return v, nil
		}
	}
	return rule.AccountValue, nil
}

func accountInKey(account string) string {
	// An account that is itself written acct#...: kept as it is, it
	// shared its keys with the account whose hash it spells (a dedup
	// audit, stop 40: one account's event was answered "duplicate" of
	// another's and never stored), so it is hashed too.
	if len(account) <= MaxKeyAccountLen && isKeySafe(account) && !strings.Contains(account, ":") && !strings.HasPrefix(account, hashedAccount) {
		return account
	}
	h := sha256.Sum256([]byte(account))
	return hashedAccount + hex.EncodeToString(h[:])
}

// hashedAccount starts an account written as its hash.
const hashedAccount = "acct#"

// isKeySafe reports whether every byte of s is printable ASCII other than
// space (0x21-0x7E), so it can sit in a key, a Nats-Msg-Id and a log line
// unchanged.
func isKeySafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7E {
			return false
		}
	}
	return true
}

func canonicalDigest(root Value, sizeHint int) string {
	// The canonical form is rarely much longer than the body, so one
	// allocation usually holds it.
	buf := AppendCanonical(make([]byte, 0, sizeHint+sizeHint/8+16), root)
	h := sha256.Sum256(buf)
	return hex.EncodeToString(h[:])
}

// fieldsDigest hashes the canonical JSON array of the fields' values. It
// reports false when no field has a value other than null.
func fieldsDigest(root Value, fields []Pointer) ([sha256.Size]byte, bool) {
	buf := make([]byte, 0, 128)
	buf = append(buf, '[')
	present := false
	for i, ptr := range fields {
		if i > 0 {
			buf = append(buf, ',')
		}
		v, ok := ptr.Resolve(root)
		if ok && v.kind != KindNull && (v.kind != KindString || v.text != "") {
			present = true // empty counts as absent, as for every source
		}
		buf = AppendCanonical(buf, v) // a missing field is the zero Value: null
	}
	buf = append(buf, ']')
	return sha256.Sum256(buf), present
}
