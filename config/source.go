package config

import (
	"errors"
	"fmt"
	"strings"
)

// Signature schemes. The gateway implements them; config only knows their
// names and the two facts validation needs.
const (
	SchemeStandardWebhooks = "standard-webhooks"
	SchemeStripe           = "stripe"
	SchemeGitHub           = "github"
	SchemeShopify          = "shopify"
	SchemeHMACSHA256       = "hmac-sha256"
)

// Schemes returns the known signature scheme names, in the order messages
// list them. The slice is new on every call.
func Schemes() []string {
	return []string{SchemeStandardWebhooks, SchemeStripe, SchemeGitHub, SchemeShopify, SchemeHMACSHA256}
}

// timestamped reports whether a scheme signs a timestamp, so that
// signature.tolerance applies.
func timestamped(scheme string) bool {
	return scheme == SchemeStandardWebhooks || scheme == SchemeStripe
}

// signsHeader reports whether a scheme's signature covers the header's
// exact value, so a value taken from it cannot be changed by whoever
// replays a body. (A signature header itself is not: several signatures,
// hex or base64, a sha256= prefix all verify alike.)
func signsHeader(scheme, header string) bool {
	return scheme == SchemeStandardWebhooks && (strings.EqualFold(header, "webhook-id") || strings.EqualFold(header, "webhook-timestamp"))
}

// SourceKind says where a Source reads from.
type SourceKind int

// Source kinds.
const (
	SourceHeader SourceKind = iota + 1 // a request header
	SourceJSON                         // a JSON Pointer into the body
)

// Source is a parsed "header:Name" or "json:/pointer" value, as event_id
// entries, subject, occurred_at and type are written.
type Source struct {
	Kind SourceKind
	// Name is the header name as written, or the JSON Pointer ("/a/b").
	Name string
}

// String writes the source back as the config spells it.
func (s Source) String() string {
	if s.Kind == SourceHeader {
		return "header:" + s.Name
	}
	return "json:" + s.Name
}

// ParseSource parses a source. The error says what is wrong and what is
// wanted.
func ParseSource(s string) (Source, error) {
	if name, ok := strings.CutPrefix(s, "header:"); ok {
		if err := checkHeaderName(name); err != nil {
			return Source{}, err
		}
		return Source{Kind: SourceHeader, Name: name}, nil
	}
	if ptr, ok := strings.CutPrefix(s, "json:"); ok {
		if err := CheckPointer(ptr); err != nil {
			return Source{}, err
		}
		return Source{Kind: SourceJSON, Name: ptr}, nil
	}
	return Source{}, fmt.Errorf("want header:Name or json:/pointer, got %q", s)
}

// CheckPointer checks the syntax of a JSON Pointer (RFC 6901) naming a value
// inside the document: it starts with / and every ~ is ~0 or ~1. The empty
// pointer (the whole document) is refused: no setting here wants it.
func CheckPointer(p string) error {
	if p == "" {
		return errors.New("empty JSON Pointer; want one like /id")
	}
	if p[0] != '/' {
		return fmt.Errorf("JSON Pointer %q must start with /", p)
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return fmt.Errorf("JSON Pointer %q: ~ must be followed by 0 or 1 (~0 is ~, ~1 is /)", p)
		}
	}
	return nil
}

// CredentialHeader reports the request headers that carry a sender's
// credentials (Authorization, Cookie, Proxy-*), which hookgate never
// stores: a source must not read them either, or its value would be
// stored after all (in the Hookgate-* headers, the key, AUDIT records,
// GRANTS subjects and forwarded requests; review AC).
func CredentialHeader(name string) bool {
	return strings.EqualFold(name, "Authorization") || strings.EqualFold(name, "Cookie") ||
		len(name) >= 6 && strings.EqualFold(name[:6], "Proxy-")
}

// refuseCredentialSource records an error at key when the header a
// source reads is a credential one, and reports whether it did.
func refuseCredentialSource(k *checker, key, header string) bool {
	if !CredentialHeader(header) {
		return false
	}
	k.errorf(key, "header %s carries the sender's credentials, which hookgate never stores: it cannot be a source (its value would be stored in the event's headers and key, AUDIT records and forwarded requests)", header)
	return true
}

// checkHeaderName checks an HTTP field name (RFC 9110 token).
func checkHeaderName(name string) error {
	if name == "" {
		return errors.New("empty header name")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return fmt.Errorf("header name %q has a character not allowed in header names", name)
	}
	return nil
}
