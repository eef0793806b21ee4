package gateway

import (
	"strings"
	"unicode/utf8"
	"unsafe"
)

// skimmed is what one pointer resolved to in skim.
type skimmed struct {
	found bool   // a scalar other than null
	text  string // that scalar's Value.text
	// container: an object or array, whose canonical JSON needs the tree
	// (unless a later duplicate member replaces it).
	container bool
}

// maxSkimPointers bounds the pointers one skim follows (a bit each).
const maxSkimPointers = 64

// skim validates body as ParseJSON does, with the same parser, but builds
// no tree: it keeps only what each of ptrs resolves to, as Pointer.Resolve
// on ParseJSON's tree would (the last of duplicate keys wins). Every
// request of a provider with json: sources needs this much and no more
// while its event id is found; the tree (and its copy of the body) costs a
// third of the gateway's own work on a 1 KB body.
//
// ok is false when ParseJSON must run instead: the body is not valid JSON
// (ParseJSON says why), a pointer resolves to an object or array (Lookup
// gives their canonical JSON, which needs the tree), or there are more
// than maxSkimPointers pointers. out must have len(ptrs) entries.
// FuzzSkimMatchesParseJSON holds skim to ParseJSON and Resolve.
func skim(body []byte, ptrs []Pointer, out []skimmed) (ok bool) {
	if len(ptrs) > maxSkimPointers || !utf8.Valid(body) ||
		(len(body) >= 3 && body[0] == 0xEF && body[1] == 0xBB && body[2] == 0xBF) {
		return false
	}
	for i := range out {
		out[i] = skimmed{}
	}
	// The parser reads body in place: nothing it returns outlives this
	// call uncopied (the values kept are cloned below).
	s := skimmer{p: parser{src: unsafe.String(unsafe.SliceData(body), len(body))}, ptrs: ptrs, out: out}
	s.p.skipSpace()
	if s.p.pos == len(s.p.src) || !s.value(uint64(1)<<len(ptrs)-1, 0) {
		return false
	}
	s.p.skipSpace()
	if s.p.pos != len(s.p.src) {
		return false
	}
	for i := range out {
		if out[i].container {
			return false
		}
		out[i].text = strings.Clone(out[i].text)
	}
	return true
}

type skimmer struct {
	p    parser
	ptrs []Pointer
	out  []skimmed
}

// value skims the value at p.pos. active has a bit for each pointer whose
// first depth tokens lead here: those with no more tokens resolve to this
// value, the others descend into it.
func (s *skimmer) value(active uint64, depth int) bool {
	p := &s.p
	var targets uint64
	for i := range s.ptrs {
		if active == 0 {
			break // most values: no pointer leads here
		}
		if active&(1<<i) != 0 && len(s.ptrs[i].tokens) == depth {
			targets |= 1 << i
		}
	}
	descend := active &^ targets
	if p.pos < len(p.src) && (p.src[p.pos] == '{' || p.src[p.pos] == '[') {
		for i := range s.ptrs {
			if targets&(1<<i) != 0 {
				s.out[i] = skimmed{container: true}
			}
		}
		return s.container(descend, depth)
	}
	// A scalar: what ParseJSON would make of it. A pointer descending into
	// it resolves to nothing (it was reset when its member was entered).
	v, err := p.value()
	if err != nil {
		return false
	}
	for i := range s.ptrs {
		if targets == 0 {
			break
		}
		if targets&(1<<i) != 0 {
			s.out[i] = skimmed{found: v.kind != KindNull, text: v.text}
		}
	}
	return true
}

// container mirrors parser.object and parser.array without keeping the
// members or elements: each value is skimmed with the pointers whose next
// token names its member (or index) among descend.
func (s *skimmer) container(descend uint64, depth int) bool {
	p := &s.p
	obj := p.src[p.pos] == '{'
	end := byte(']')
	if obj {
		end = '}'
	}
	if p.enter() != nil {
		return false
	}
	p.pos++ // '{' or '['
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == end {
		p.pos++
		p.depth--
		return true
	}
	for n := 0; ; n++ {
		p.skipSpace()
		var next uint64
		if obj {
			if p.pos >= len(p.src) || p.src[p.pos] != '"' {
				return false
			}
			key, err := p.str()
			if err != nil {
				return false
			}
			p.skipSpace()
			if p.pos >= len(p.src) || p.src[p.pos] != ':' {
				return false
			}
			p.pos++
			p.skipSpace()
			next = s.narrow(descend, depth, func(tok string) bool { return tok == key })
			for i := range s.ptrs {
				if next&(1<<i) != 0 {
					// A later member of the same name replaces an earlier
					// one whole, as in ParseJSON's tree.
					s.out[i] = skimmed{}
				}
			}
		} else {
			next = s.narrow(descend, depth, func(tok string) bool { k, ok := arrayIndex(tok); return ok && k == n })
		}
		if !s.value(next, depth+1) {
			return false
		}
		p.skipSpace()
		if p.pos >= len(p.src) {
			return false
		}
		c := p.src[p.pos]
		p.pos++
		if c == end {
			p.depth--
			return true
		}
		if c != ',' {
			return false
		}
	}
}

// narrow returns the pointers among descend whose token at depth match
// accepts.
func (s *skimmer) narrow(descend uint64, depth int, match func(tok string) bool) uint64 {
	var next uint64
	for i := range s.ptrs {
		if descend == 0 {
			break // most members: no pointer goes through them
		}
		if descend&(1<<i) != 0 && match(s.ptrs[i].tokens[depth]) {
			next |= 1 << i
		}
	}
	return next
}
