package gateway

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// MaxJSONDepth is the deepest nesting of arrays and objects ParseJSON
// accepts. It bounds the parser's recursion and matches the contract's 400.
const MaxJSONDepth = 128

// ParseJSON parses body as one JSON text with the acceptance rules of
// Python's json.loads(body.decode("utf-8")), made stricter where the
// contract says so. It accepts what Python accepts (including lone
// surrogate escapes such as "\ud800", and any size of integer) except:
// NaN, Infinity and -Infinity; a number that overflows float64 (1e999,
// which Python would read as inf); and nesting deeper than MaxJSONDepth.
// Like Python it rejects invalid UTF-8, a leading byte order mark, raw
// control characters inside strings, invalid escapes, truncated input and
// trailing data.
//
// Duplicate keys in an object keep the last value, at the position of the
// first occurrence, as Python's dict does. Numbers keep their literal text.
//
// Every error is a *JSONError wrapping ErrBadJSON. ParseJSON never panics;
// time and memory are linear in len(body). It does not retain body (the
// Value holds a copy).
func ParseJSON(body []byte) (Value, error) {
	if !utf8.Valid(body) {
		return Value{}, &JSONError{Offset: invalidUTF8Offset(body), Reason: "invalid UTF-8"}
	}
	if len(body) >= 3 && body[0] == 0xEF && body[1] == 0xBB && body[2] == 0xBF {
		return Value{}, &JSONError{Offset: 0, Reason: "body starts with a UTF-8 byte order mark"}
	}
	// One copy of the body: string values without escapes, numbers and keys
	// are substrings of it, so they cost no further allocation.
	p := parser{src: string(body)}
	// Every array element and object key or value follows a '[', '{', ','
	// or ':', so their count bounds the tree's size (strings holding such
	// bytes inflate it; the cap bounds that waste). Sizing the arena and
	// stack up front makes a typical body cost one allocation for each.
	est := 1
	for _, c := range []byte{',', ':', '[', '{'} {
		est += bytes.Count(body, []byte{c})
	}
	est = min(est, maxArenaChunk)
	p.arena = make([]Value, 0, est)
	p.stack = make([]Value, 0, min(est, 64))
	p.skipSpace()
	if p.pos == len(p.src) {
		return Value{}, p.fail(p.pos, "empty body, expected a JSON value")
	}
	v, err := p.value()
	if err != nil {
		return Value{}, err
	}
	p.skipSpace()
	if p.pos != len(p.src) {
		return Value{}, p.fail(p.pos, "trailing data after the JSON value")
	}
	return v, nil
}

func invalidUTF8Offset(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// maxArenaChunk caps each arena allocation (in Values, 48 bytes each).
const maxArenaChunk = 8192

type parser struct {
	src   string
	pos   int
	depth int
	// stack holds the children of the containers being parsed; a container
	// moves its run of it into the arena when it closes.
	stack []Value
	arena []Value
}

func (p *parser) fail(pos int, format string, args ...any) error {
	return &JSONError{Offset: pos, Reason: fmt.Sprintf(format, args...)}
}

// truncated reports input that ended where more was required.
func (p *parser) truncated(what string) error {
	return p.fail(len(p.src), "truncated input: %s", what)
}

// unexpected describes the byte at pos without quoting more of the body
// than that one character.
func (p *parser) unexpected(pos int, expected string) error {
	c := p.src[pos]
	if c > 0x20 && c < 0x7F {
		return p.fail(pos, "expected %s, found %q", expected, c)
	}
	return p.fail(pos, "expected %s, found byte 0x%02x", expected, c)
}

func (p *parser) skipSpace() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value parses the value starting at p.pos (whitespace already skipped).
func (p *parser) value() (Value, error) {
	if p.pos >= len(p.src) {
		return Value{}, p.truncated("expected a value")
	}
	switch c := p.src[p.pos]; c {
	case '{':
		return p.object()
	case '[':
		return p.array()
	case '"':
		s, err := p.str()
		return Value{kind: KindString, text: s}, err
	case 't':
		return p.literal("true", Value{kind: KindBool, text: "true"})
	case 'f':
		return p.literal("false", Value{kind: KindBool, text: "false"})
	case 'n':
		return p.literal("null", Value{})
	case 'N':
		if strings.HasPrefix(p.src[p.pos:], "NaN") {
			return Value{}, p.fail(p.pos, "NaN is not allowed")
		}
	case 'I':
		if strings.HasPrefix(p.src[p.pos:], "Infinity") {
			return Value{}, p.fail(p.pos, "Infinity is not allowed")
		}
	case '-':
		if strings.HasPrefix(p.src[p.pos:], "-Infinity") {
			return Value{}, p.fail(p.pos, "-Infinity is not allowed")
		}
		return p.number()
	default:
		if c >= '0' && c <= '9' {
			return p.number()
		}
	}
	return Value{}, p.unexpected(p.pos, "a value")
}

func (p *parser) literal(word string, v Value) (Value, error) {
	rest := p.src[p.pos:]
	if strings.HasPrefix(rest, word) {
		p.pos += len(word)
		return v, nil
	}
	if strings.HasPrefix(word, rest) {
		return Value{}, p.truncated("expected " + word)
	}
	return Value{}, p.unexpected(p.pos, "a value")
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxJSONDepth {
		return p.fail(p.pos, "nesting deeper than %d", MaxJSONDepth)
	}
	return nil
}

func (p *parser) array() (Value, error) {
	if err := p.enter(); err != nil {
		return Value{}, err
	}
	p.pos++ // '['
	base := len(p.stack)
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == ']' {
		p.pos++
		p.depth--
		return Value{kind: KindArray}, nil
	}
	for {
		p.skipSpace()
		v, err := p.value()
		if err != nil {
			return Value{}, err
		}
		p.stack = append(p.stack, v)
		p.skipSpace()
		if p.pos >= len(p.src) {
			return Value{}, p.truncated("unterminated array")
		}
		c := p.src[p.pos]
		if c == ']' {
			p.pos++
			break
		}
		if c != ',' {
			return Value{}, p.unexpected(p.pos, "',' or ']' in array")
		}
		p.pos++
	}
	kids := p.take(base)
	p.depth--
	return Value{kind: KindArray, kids: kids}, nil
}

func (p *parser) object() (Value, error) {
	if err := p.enter(); err != nil {
		return Value{}, err
	}
	p.pos++ // '{'
	base := len(p.stack)
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
		p.depth--
		return Value{kind: KindObject}, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.src) {
			return Value{}, p.truncated("unterminated object")
		}
		if p.src[p.pos] != '"' {
			return Value{}, p.unexpected(p.pos, "a string key in object")
		}
		key, err := p.str()
		if err != nil {
			return Value{}, err
		}
		p.skipSpace()
		if p.pos >= len(p.src) {
			return Value{}, p.truncated("unterminated object")
		}
		if p.src[p.pos] != ':' {
			return Value{}, p.unexpected(p.pos, "':' after object key")
		}
		p.pos++
		p.skipSpace()
		v, err := p.value()
		if err != nil {
			return Value{}, err
		}
		p.stack = append(p.stack, Value{kind: KindString, text: key}, v)
		p.skipSpace()
		if p.pos >= len(p.src) {
			return Value{}, p.truncated("unterminated object")
		}
		c := p.src[p.pos]
		if c == '}' {
			p.pos++
			break
		}
		if c != ',' {
			return Value{}, p.unexpected(p.pos, "',' or '}' in object")
		}
		p.pos++
	}
	merged := dedupeMembers(p.stack[base:])
	p.stack = p.stack[:base+len(merged)]
	kids := p.take(base)
	p.depth--
	return Value{kind: KindObject, kids: kids}, nil
}

// take moves p.stack[base:] into the arena and pops it. Carving containers
// out of shared chunks keeps a typical webhook body to a handful of
// allocations instead of one per container.
func (p *parser) take(base int) []Value {
	n := len(p.stack) - base
	if n == 0 {
		p.stack = p.stack[:base]
		return nil
	}
	if cap(p.arena)-len(p.arena) < n {
		// Only when the estimate was capped (or beaten): continue in large
		// chunks; the unused tail of the old one is the bounded waste.
		p.arena = make([]Value, 0, max(maxArenaChunk, n))
	}
	start := len(p.arena)
	p.arena = append(p.arena, p.stack[base:]...)
	// The popped slots are not cleared: they only point into the tree
	// being built, and the parser is dropped when ParseJSON returns.
	p.stack = p.stack[:base]
	return p.arena[start:len(p.arena):len(p.arena)]
}

// dedupeMembers merges duplicate keys in kids (alternating key, value) in
// place the way Python's dict does: the first position, the last value.
func dedupeMembers(kids []Value) []Value {
	n := len(kids) / 2
	if n < 2 {
		return kids
	}
	w := 0 // members kept so far
	if n <= 16 {
		// A quadratic scan of a small object is cheaper than a map.
		for i := 0; i < n; i++ {
			k := kids[2*i].text
			dup := false
			for j := 0; j < w; j++ {
				if kids[2*j].text == k {
					kids[2*j+1] = kids[2*i+1]
					dup = true
					break
				}
			}
			if !dup {
				kids[2*w], kids[2*w+1] = kids[2*i], kids[2*i+1]
				w++
			}
		}
		return kids[:2*w]
	}
	seen := make(map[string]int, n)
	for i := 0; i < n; i++ {
		k := kids[2*i].text
		if j, ok := seen[k]; ok {
			kids[2*j+1] = kids[2*i+1]
			continue
		}
		seen[k] = w
		kids[2*w], kids[2*w+1] = kids[2*i], kids[2*i+1]
		w++
	}
	return kids[:2*w]
}

// str parses the string starting at p.pos (the opening quote) and returns
// its decoded content.
func (p *parser) str() (string, error) {
	start := p.pos + 1
	i := start
	// Fast path: most strings have no escapes and are returned as a
	// substring of the source without copying. Eight bytes at a time
	// while none is a quote, a backslash or a control character (a 1 KB
	// string field took a microsecond a byte at a time); the loop below
	// finds which one.
	for i+8 <= len(p.src) && plainWord(loadWord(p.src, i)) {
		i += 8
	}
	for i < len(p.src) {
		c := p.src[i]
		if c == '"' {
			p.pos = i + 1
			return p.src[start:i], nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.fail(i, "unescaped control character 0x%02x in string", c)
		}
		i++
	}
	if i >= len(p.src) {
		return "", p.truncated("unterminated string")
	}
	var b strings.Builder
	b.Grow(i - start + 16)
	b.WriteString(p.src[start:i])
	for i < len(p.src) {
		c := p.src[i]
		switch {
		case c == '"':
			p.pos = i + 1
			return b.String(), nil
		case c < 0x20:
			return "", p.fail(i, "unescaped control character 0x%02x in string", c)
		case c != '\\':
			// Copy the run up to the next quote, escape or control byte.
			j := i + 1
			for j < len(p.src) && p.src[j] != '"' && p.src[j] != '\\' && p.src[j] >= 0x20 {
				j++
			}
			b.WriteString(p.src[i:j])
			i = j
			continue
		}
		if i+1 >= len(p.src) {
			return "", p.truncated("unterminated string")
		}
		switch e := p.src[i+1]; e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, err := p.hex4(i)
			if err != nil {
				return "", err
			}
			i += 6
			// A high surrogate joins a directly following low surrogate
			// escape; otherwise it stays a lone surrogate, as in Python.
			if r >= 0xD800 && r <= 0xDBFF && i+1 < len(p.src) && p.src[i] == '\\' && p.src[i+1] == 'u' {
				r2, err := p.hex4(i)
				if err != nil {
					return "", err
				}
				if r2 >= 0xDC00 && r2 <= 0xDFFF {
					r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
					i += 6
				}
			}
			appendWTF8(&b, r)
			continue
		default:
			return "", p.fail(i, "invalid escape in string")
		}
		i += 2
	}
	return "", p.truncated("unterminated string")
}

// plainWord reports whether none of the 8 bytes of w is '"', '\\' or
// below 0x20 (bit tricks from "Bit Twiddling Hacks": a byte below n, a zero
// byte; both exact as to whether any byte matches).
func plainWord(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	below := (w - 0x20*ones) &^ w
	q := w ^ '"'*ones
	quote := (q - ones) &^ q
	b := w ^ '\\'*ones
	backslash := (b - ones) &^ b
	return (below|quote|backslash)&highs == 0
}

// loadWord reads s[i:i+8] as one little-endian word, without copying;
// the caller checked i+8 <= len(s).
func loadWord(s string, i int) uint64 {
	return binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s[i:]), 8))
}

// hex4 decodes the 4 hex digits of the \u escape at p.src[i].
func (p *parser) hex4(i int) (rune, error) {
	if i+6 > len(p.src) {
		// Only a truncation if what is there could still be an escape.
		for j := i + 2; j < len(p.src); j++ {
			if !isHex(p.src[j]) {
				return 0, p.fail(i, `invalid \u escape in string (want 4 hex digits)`)
			}
		}
		return 0, p.truncated("unterminated string")
	}
	var r rune
	for _, c := range []byte(p.src[i+2 : i+6]) {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, p.fail(i, `invalid \u escape in string (want 4 hex digits)`)
		}
		r = r<<4 | rune(d)
	}
	return r, nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// appendWTF8 writes r in UTF-8, and a surrogate code point in the same
// 3-byte pattern (which utf8.AppendRune would replace with U+FFFD): the
// canonical encoder must get the lone surrogate back to re-emit it.
func appendWTF8(b *strings.Builder, r rune) {
	switch {
	case r < 0x80:
		b.WriteByte(byte(r))
	case r < 0x800:
		b.WriteByte(0xC0 | byte(r>>6))
		b.WriteByte(0x80 | byte(r)&0x3F)
	case r < 0x10000:
		b.WriteByte(0xE0 | byte(r>>12))
		b.WriteByte(0x80 | byte(r>>6)&0x3F)
		b.WriteByte(0x80 | byte(r)&0x3F)
	default:
		b.WriteByte(0xF0 | byte(r>>18))
		b.WriteByte(0x80 | byte(r>>12)&0x3F)
		b.WriteByte(0x80 | byte(r>>6)&0x3F)
		b.WriteByte(0x80 | byte(r)&0x3F)
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number parses the number at p.pos with JSON's grammar, which is also
// what Python's scanner matches.
func (p *parser) number() (Value, error) {
	start := p.pos
	i := start
	if p.src[i] == '-' {
		i++
	}
	intStart := i
	switch {
	case i >= len(p.src):
		return Value{}, p.truncated("expected a digit")
	case p.src[i] == '0':
		i++
	case isDigit(p.src[i]):
		for i < len(p.src) && isDigit(p.src[i]) {
			i++
		}
	default:
		return Value{}, p.unexpected(i, "a digit")
	}
	intDigits := i - intStart
	float := false
	if i < len(p.src) && p.src[i] == '.' {
		i++
		if i >= len(p.src) {
			return Value{}, p.truncated("expected a digit after the decimal point")
		}
		if !isDigit(p.src[i]) {
			return Value{}, p.unexpected(i, "a digit after the decimal point")
		}
		for i < len(p.src) && isDigit(p.src[i]) {
			i++
		}
		float = true
	}
	exp := false
	if i < len(p.src) && (p.src[i] == 'e' || p.src[i] == 'E') {
		exp = true
		i++
		if i < len(p.src) && (p.src[i] == '+' || p.src[i] == '-') {
			i++
		}
		if i >= len(p.src) {
			return Value{}, p.truncated("expected a digit in the exponent")
		}
		if !isDigit(p.src[i]) {
			return Value{}, p.unexpected(i, "a digit in the exponent")
		}
		for i < len(p.src) && isDigit(p.src[i]) {
			i++
		}
		float = true
	}
	text := p.src[start:i]
	if float && (exp || intDigits > 300) {
		// Python turns an overflowing float into inf, which json.dumps
		// writes as the non-JSON Infinity; the contract rejects it instead.
		// Underflow rounds to (signed) zero in both, and is accepted.
		// Without an exponent, 300 integer digits stay below 1e300, far
		// from the float64 limit (1.8e308): no parse needed.
		if math.IsInf(parseJSONFloat(text), 0) {
			return Value{}, p.fail(start, "number beyond the float64 range")
		}
	}
	p.pos = i
	return Value{kind: KindNumber, float: float, text: text}, nil
}
