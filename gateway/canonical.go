package gateway

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
)

// Canonical returns the canonical JSON of v: byte for byte what Python's
//
//	json.dumps(json.loads(body.decode("utf-8")), sort_keys=True,
//	           separators=(",", ":"), ensure_ascii=True)
//
// writes for the body v was parsed from. Object keys are sorted by code
// point; every byte outside printable ASCII (and DEL) is written as a
// lowercase \uXXXX escape, with a surrogate pair above U+FFFF; integers are
// written exactly, at any size ("-0" becomes "0"); floats use Python's
// repr ("1.0", "1e+16", "1.5e-07", "-0.0"). The output is ASCII and is
// itself valid JSON that ParseJSON reads back to an equal tree.
//
// Canonical is a pure function and safe for concurrent use.
func Canonical(v Value) []byte {
	return AppendCanonical(nil, v)
}

// AppendCanonical appends the canonical JSON of v (see Canonical) to dst
// and returns the extended slice.
func AppendCanonical(dst []byte, v Value) []byte {
	var order [32]int
	e := canonEncoder{buf: dst, order: order[:0]}
	e.value(v)
	return e.buf
}

type canonEncoder struct {
	buf []byte
	// order is a stack of member indices, shared by the nested objects
	// being written, for the objects whose keys are not already sorted.
	order []int
}

// The recursion is bounded: Values only come from ParseJSON, whose trees
// are at most MaxJSONDepth deep.
func (e *canonEncoder) value(v Value) {
	switch v.kind {
	case KindNull:
		e.buf = append(e.buf, "null"...)
	case KindBool:
		e.buf = append(e.buf, v.text...)
	case KindNumber:
		e.buf = appendPythonNumber(e.buf, v.text, v.float)
	case KindString:
		e.buf = appendPythonString(e.buf, v.text)
	case KindArray:
		e.buf = append(e.buf, '[')
		for i, k := range v.kids {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.value(k)
		}
		e.buf = append(e.buf, ']')
	case KindObject:
		e.object(v)
	}
}

func (e *canonEncoder) object(v Value) {
	e.buf = append(e.buf, '{')
	n := len(v.kids) / 2
	if keysSorted(v.kids) {
		for i := range n {
			e.member(i > 0, v.kids[2*i].text, v.kids[2*i+1])
		}
	} else {
		base := len(e.order)
		for i := range n {
			e.order = append(e.order, i)
		}
		// Go compares strings bytewise, and for UTF-8 (and the WTF-8 of lone
		// surrogates) byte order is code point order, which is how Python
		// sorts str. Keys are unique after ParseJSON, so no ties.
		idx := e.order[base:]
		slices.SortFunc(idx, func(a, b int) int {
			return strings.Compare(v.kids[2*a].text, v.kids[2*b].text)
		})
		// Nested objects push past idx; if that grows e.order, idx keeps
		// pointing at the old array, which nobody writes to any more.
		for j, i := range idx {
			e.member(j > 0, v.kids[2*i].text, v.kids[2*i+1])
		}
		e.order = e.order[:base]
	}
	e.buf = append(e.buf, '}')
}

func (e *canonEncoder) member(comma bool, key string, val Value) {
	if comma {
		e.buf = append(e.buf, ',')
	}
	e.buf = appendPythonString(e.buf, key)
	e.buf = append(e.buf, ':')
	e.value(val)
}

func keysSorted(kids []Value) bool {
	for i := 2; i < len(kids); i += 2 {
		if kids[i-2].text > kids[i].text {
			return false
		}
	}
	return true
}

const hexDigits = "0123456789abcdef"

// appendPythonString writes s the way json.dumps(ensure_ascii=True) does:
// printable ASCII as is except '"' and '\\'; \n \r \t \b \f by name; every
// other code point as \uXXXX in lowercase hex, above U+FFFF as a surrogate
// pair. '/' is not escaped. s is UTF-8, or WTF-8 where it holds a lone
// surrogate, which is written back as its own \uXXXX escape.
func appendPythonString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0 // start of the run of bytes copied verbatim
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7F && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		size := 1
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			var r rune
			r, size = decodeWTF8(s[i:])
			if r >= 0x10000 {
				r -= 0x10000
				dst = appendU4(dst, 0xD800+(r>>10))
				r = 0xDC00 + r&0x3FF
			}
			dst = appendU4(dst, r)
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func appendU4(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u',
		hexDigits[r>>12&0xF], hexDigits[r>>8&0xF], hexDigits[r>>4&0xF], hexDigits[r&0xF])
}

// decodeWTF8 decodes the code point at the start of s, accepting the 3-byte
// form of surrogates that appendWTF8 writes. Strings come from ParseJSON and
// are well formed; a malformed one (impossible today) still cannot panic and
// gives U+FFFD for one byte.
func decodeWTF8(s string) (rune, int) {
	c := s[0]
	switch {
	case c < 0x80:
		return rune(c), 1
	case c >= 0xC0 && c < 0xE0 && len(s) >= 2:
		return rune(c&0x1F)<<6 | rune(s[1]&0x3F), 2
	case c >= 0xE0 && c < 0xF0 && len(s) >= 3:
		return rune(c&0x0F)<<12 | rune(s[1]&0x3F)<<6 | rune(s[2]&0x3F), 3
	case c >= 0xF0 && c < 0xF8 && len(s) >= 4:
		return rune(c&0x07)<<18 | rune(s[1]&0x3F)<<12 | rune(s[2]&0x3F)<<6 | rune(s[3]&0x3F), 4
	}
	return 0xFFFD, 1
}

// appendPythonNumber writes a number literal as Python would after
// json.loads: an integer as int(text), exact at any size; a float as
// repr(float(text)).
func appendPythonNumber(dst []byte, text string, float bool) []byte {
	if !float {
		// JSON's grammar leaves "-0" as the only integer literal that
		// int() does not print back unchanged.
		if text == "-0" {
			return append(dst, '0')
		}
		return append(dst, text...)
	}
	// ParseJSON has rejected overflow, so the value is finite.
	return appendPythonFloat(dst, parseJSONFloat(text))
}

// appendPythonFloat writes f as Python's repr(f) does: the shortest digits
// that round-trip (as Go's -1 precision gives), in positional notation
// with at least one fractional digit when the decimal exponent is in
// [-5, 16), else in exponent notation with a signed exponent of at least
// two digits and no ".0" ("1e+16", "1.5e-07", "5e-324"). Python switches
// when the position of the decimal point relative to the digits (decpt =
// exponent+1) is <= -4 or > 16.
func appendPythonFloat(dst []byte, f float64) []byte {
	var tmp [32]byte
	e := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64)
	// e is "[-]d[.ddd]e±XX[X]"; Go's exponent form matches Python's.
	at := bytes.LastIndexByte(e, 'e')
	exp := 0
	for _, c := range e[at+2:] { // skip 'e' and the sign
		exp = exp*10 + int(c-'0')
	}
	if e[at+1] == '-' {
		exp = -exp
	}
	if exp < -4 || exp >= 16 {
		return append(dst, e...)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'f', -1, 64)
	if !slices.Contains(dst[start:], '.') {
		dst = append(dst, '.', '0')
	}
	return dst
}
