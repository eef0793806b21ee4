package gateway

// Kind is the JSON type of a Value.
type Kind uint8

// The JSON types. The zero Value is KindNull.
const (
	KindNull Kind = iota
	KindBool
	KindNumber
	KindString
	KindArray
	KindObject
)

func (k Kind) String() string {
	switch k {
	case KindNull:
		return "null"
	case KindBool:
		return "bool"
	case KindNumber:
		return "number"
	case KindString:
		return "string"
	case KindArray:
		return "array"
	case KindObject:
		return "object"
	}
	return "invalid"
}

// Value is one node of a JSON document parsed by ParseJSON. It keeps what a
// byte-exact re-encoding needs and encoding/json would lose: each number's
// literal text and the members' order.
//
// Values are immutable and safe for concurrent reads. The zero Value is null.
type Value struct {
	kind Kind
	// float marks a number written with a fraction or an exponent: Python
	// reads it as a float, not an int, and so must the canonical form.
	float bool
	// text is the decoded content of a string, the literal of a number, or
	// "true"/"false". A string decoded from a lone surrogate escape
	// ("\ud800") holds it as WTF-8 (the 3-byte generalized UTF-8 form), so
	// such text is not valid UTF-8; byte order still equals code point order.
	text string
	// kids holds an array's elements, or an object's members as
	// alternating key (a KindString Value) and value. One slice for both
	// keeps Value at 48 bytes and the parser to a single arena.
	kids []Value
}

// Kind reports v's JSON type.
func (v Value) Kind() Kind { return v.kind }

// Text is a string's decoded content, a number's literal text exactly as
// written in the body, or "true"/"false" for a bool; "" for null, arrays and
// objects. See the note on lone surrogates in Value.
func (v Value) Text() string { return v.text }

// IsFloat reports whether v is a number written with a fraction or an
// exponent (Python's float rather than int).
func (v Value) IsFloat() bool { return v.kind == KindNumber && v.float }

// Len is the number of elements of an array or members of an object, and 0
// for anything else.
func (v Value) Len() int {
	switch v.kind {
	case KindArray:
		return len(v.kids)
	case KindObject:
		return len(v.kids) / 2
	}
	return 0
}

// Index returns the i-th element of an array. It panics if v is not an array
// or i is out of range, like a slice index.
func (v Value) Index(i int) Value {
	if v.kind != KindArray {
		panic("gateway: Value.Index on " + v.kind.String())
	}
	return v.kids[i]
}

// Member returns the i-th member of an object in the order the body first
// wrote each key. Duplicate keys were merged by ParseJSON: the first
// position, the last value (Python's dict). It panics if v is not an object
// or i is out of range.
func (v Value) Member(i int) (key string, val Value) {
	if v.kind != KindObject {
		panic("gateway: Value.Member on " + v.kind.String())
	}
	return v.kids[2*i].text, v.kids[2*i+1]
}

// Get returns the member of an object named key. It is a linear scan: the
// few lookups a request makes cost less than building an index would.
func (v Value) Get(key string) (Value, bool) {
	if v.kind != KindObject {
		return Value{}, false
	}
	for i := 0; i+1 < len(v.kids); i += 2 {
		if v.kids[i].text == key {
			return v.kids[i+1], true
		}
	}
	return Value{}, false
}
