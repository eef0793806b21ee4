package gateway

import (
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
)

// Source says where a value is read from in a request: a header
// ("header:Webhook-Id") or a JSON Pointer into the body ("json:/data/id").
// Build one with ParseSource; the zero Source reads nothing.
type Source struct {
	raw    string
	header string // canonical header name, for a header: source
	ptr    Pointer
	isJSON bool
}

// ParseSource parses a source as written in the config: "header:<Name>",
// where Name is an HTTP header field name (any case), or "json:<pointer>",
// where pointer is an RFC 6901 JSON Pointer ("" is the whole document). The
// error names what is wrong and quotes s, which comes from the config.
func ParseSource(s string) (Source, error) {
	kind, rest, ok := strings.Cut(s, ":")
	switch {
	case ok && kind == "header":
		if rest == "" {
			return Source{}, fmt.Errorf("source %q: header name is empty", s)
		}
		for i := 0; i < len(rest); i++ {
			if !isTokenChar(rest[i]) {
				return Source{}, fmt.Errorf("source %q: header name has an invalid character at offset %d", s, i)
			}
		}
		return Source{raw: s, header: textproto.CanonicalMIMEHeaderKey(rest)}, nil
	case ok && kind == "json":
		p, err := ParsePointer(rest)
		if err != nil {
			return Source{}, fmt.Errorf("source %q: %w", s, err)
		}
		return Source{raw: s, ptr: p, isJSON: true}, nil
	}
	return Source{}, fmt.Errorf(`source %q: want "header:<Name>" or "json:<JSON Pointer>"`, s)
}

// String returns the source as written in the config.
func (s Source) String() string { return s.raw }

// IsJSON reports whether s reads the body as JSON, so that a provider using
// it needs a JSON body.
func (s Source) IsJSON() bool { return s.isJSON }

// isTokenChar reports whether c may appear in an HTTP field name (RFC 9110
// token).
func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// Pointer is a parsed RFC 6901 JSON Pointer. The zero Pointer is "", the
// whole document.
type Pointer struct {
	raw    string
	tokens []string // unescaped reference tokens
}

// ParsePointer parses an RFC 6901 JSON Pointer: "" or a sequence of
// "/token", where "~1" stands for '/' and "~0" for '~'. A '~' followed by
// anything else is an error, as is a non-empty pointer not starting with
// '/'.
func ParsePointer(s string) (Pointer, error) {
	if s == "" {
		return Pointer{}, nil
	}
	if s[0] != '/' {
		return Pointer{}, fmt.Errorf("JSON Pointer %q must be empty or start with '/'", s)
	}
	parts := strings.Split(s[1:], "/")
	for i, part := range parts {
		if !strings.Contains(part, "~") {
			continue
		}
		var b strings.Builder
		for j := 0; j < len(part); j++ {
			c := part[j]
			if c != '~' {
				b.WriteByte(c)
				continue
			}
			if j+1 < len(part) && part[j+1] == '0' {
				b.WriteByte('~')
			} else if j+1 < len(part) && part[j+1] == '1' {
				b.WriteByte('/')
			} else {
				return Pointer{}, fmt.Errorf("JSON Pointer %q: '~' must be followed by 0 or 1", s)
			}
			j++
		}
		parts[i] = b.String()
	}
	return Pointer{raw: s, tokens: parts}, nil
}

// String returns the pointer as written.
func (p Pointer) String() string { return p.raw }

// Resolve follows p from root. It reports false when a step names a member
// an object lacks, an array index that is out of range or not a canonical
// index ("0", "12"; not "01", "-" or "+1"), or descends into a scalar.
func (p Pointer) Resolve(root Value) (Value, bool) {
	v := root
	for _, tok := range p.tokens {
		switch v.kind {
		case KindObject:
			next, ok := v.Get(tok)
			if !ok {
				return Value{}, false
			}
			v = next
		case KindArray:
			i, ok := arrayIndex(tok)
			if !ok || i >= len(v.kids) {
				return Value{}, false
			}
			v = v.kids[i]
		default:
			return Value{}, false
		}
	}
	return v, true
}

// arrayIndex parses an RFC 6901 array index: "0" or digits without a
// leading zero. Anything longer than 9 digits is beyond any array a body
// within max_body_bytes can hold, and is refused before it could overflow.
func arrayIndex(tok string) (int, bool) {
	if tok == "" || len(tok) > 9 || (tok[0] == '0' && len(tok) > 1) {
		return 0, false
	}
	n := 0
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// Payload is one request as the key rules see it: its headers and body,
// with the body parsed as JSON at most once, on first need.
//
// A Payload is not safe for concurrent use; it belongs to one request.
type Payload struct {
	header      http.Header
	body        []byte
	contentType string

	parsed bool
	root   Value
	err    error

	// want are the pointers skimFor named; once skim passed (skimmed
	// set), Lookup answers them from skimmed without the tree.
	want     []Pointer
	skimDone bool
	skimmed  []skimmed
	skimBuf  [8]skimmed
}

// skimFor names the pointers the request's sources read, so that
// validJSON can skim the body for them instead of building the tree.
func (p *Payload) skimFor(ptrs []Pointer) { p.want = ptrs }

// validJSON returns ParseJSON's error for the body, or nil: from skim
// when it can tell (skimFor), else from the tree.
func (p *Payload) validJSON() error {
	if !p.parsed && !p.skimDone && len(p.want) > 0 {
		p.skimDone = true
		out := p.skimBuf[:0]
		if len(p.want) > len(p.skimBuf) {
			out = make([]skimmed, 0, len(p.want))
		}
		out = out[:len(p.want)]
		if skim(p.body, p.want, out) {
			p.skimmed = out
			return nil
		}
	}
	_, err := p.JSON()
	return err
}

// skimLookup answers ptr from skim's pass, if it covered it.
func (p *Payload) skimLookup(ptr Pointer) (value string, ok, covered bool) {
	if p.skimmed == nil {
		return "", false, false
	}
	for i, w := range p.want {
		if w.raw == ptr.raw {
			return p.skimmed[i].text, p.skimmed[i].found && p.skimmed[i].text != "", true
		}
	}
	return "", false, false
}

// NewPayload returns a view of a request. It keeps h and body (not copies);
// the caller must not change them while the Payload is in use. contentType
// is the request's Content-Type header value.
func NewPayload(h http.Header, body []byte, contentType string) *Payload {
	return &Payload{header: h, body: body, contentType: contentType}
}

// Body returns the raw body.
func (p *Payload) Body() []byte { return p.body }

// JSON returns the body parsed by ParseJSON, parsing it on the first call.
// The error (a *JSONError wrapping ErrBadJSON) is cached as well.
func (p *Payload) JSON() (Value, error) {
	if !p.parsed {
		p.root, p.err = ParseJSON(p.body)
		p.parsed = true
	}
	return p.root, p.err
}

// DeclaresJSON reports whether the Content-Type names a JSON media type:
// application/json or any type with a +json suffix (application/cloudevents+json).
func (p *Payload) DeclaresJSON() bool { return isJSONMediaType(p.contentType) }

func isJSONMediaType(ct string) bool {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(ct)
	if strings.EqualFold(ct, "application/json") {
		return true
	}
	typ, sub, ok := strings.Cut(ct, "/")
	const suffix = "+json"
	return ok && typ != "" && len(sub) > len(suffix) && strings.EqualFold(sub[len(sub)-len(suffix):], suffix)
}

// Lookup reads src from the request. Empty counts as absent everywhere, so
// ok is false for a missing or empty header, and for a JSON pointer that
// resolves to nothing, to null or to "".
//
// A header gives its first value. A JSON source gives a string's decoded
// content, a number's literal text as written in the body, "true" or
// "false", or the canonical JSON (see Canonical) of an object or array.
// A JSON string holding a lone surrogate escape comes back in WTF-8, so it
// is not valid UTF-8.
//
// The only error is the body's *JSONError (wrapping ErrBadJSON), from a
// JSON source on a body that is not valid JSON.
func (p *Payload) Lookup(src Source) (value string, ok bool, err error) {
	if !src.isJSON {
		if src.header == "" {
			return "", false, nil
		}
		return firstHeader(p.header, src.header)
	}
	if v, ok, covered := p.skimLookup(src.ptr); covered {
		return v, ok, nil
	}
	root, err := p.JSON()
	if err != nil {
		return "", false, err
	}
	v, found := src.ptr.Resolve(root)
	if !found {
		return "", false, nil
	}
	switch v.kind {
	case KindNull:
		return "", false, nil
	case KindArray, KindObject:
		return string(Canonical(v)), true, nil
	}
	return v.text, v.text != "", nil
}

// firstHeader returns the first value of header name, trying it as given
// before canonicalizing it: names from ParseSource are canonical already,
// and this saves an allocation per request for them.
func firstHeader(h http.Header, name string) (string, bool, error) {
	vs, found := h[name]
	if !found {
		vs = h[textproto.CanonicalMIMEHeaderKey(name)]
	}
	if len(vs) == 0 || vs[0] == "" {
		return "", false, nil
	}
	return vs[0], true, nil
}
