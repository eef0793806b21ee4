package gateway

import (
	"fmt"
	"strings"
	"testing"
)

// skimAgrees checks skim against ParseJSON and Pointer.Resolve for body and
// the pointers given (invalid ones are left out): skim refuses whatever
// ParseJSON rejects, and on a body it accepts answers each pointer as the
// tree does, or refuses when one resolves to an object or array.
func skimAgrees(t *testing.T, body []byte, raws ...string) {
	t.Helper()
	var ptrs []Pointer
	for _, r := range raws {
		if p, err := ParsePointer(r); err == nil {
			ptrs = append(ptrs, p)
		}
	}
	out := make([]skimmed, len(ptrs))
	ok := skim(body, ptrs, out)
	root, err := ParseJSON(body)
	if err != nil {
		if ok {
			t.Fatalf("skim accepts %q, ParseJSON says %v", body, err)
		}
		return
	}
	want := make([]skimmed, len(ptrs))
	container := false
	for i, p := range ptrs {
		v, found := p.Resolve(root)
		switch {
		case !found:
		case v.kind == KindObject || v.kind == KindArray:
			container = true
		default:
			want[i] = skimmed{found: v.kind != KindNull, text: v.text}
		}
	}
	if ok == container {
		t.Fatalf("skim %q for %q: ok %v, but a pointer resolving to an object or array is %v", body, raws, ok, container)
	}
	if ok && fmt.Sprint(out) != fmt.Sprint(want) {
		t.Fatalf("skim %q for %q = %v, the tree gives %v", body, raws, out, want)
	}
}

func TestSkim(t *testing.T) {
	for _, tc := range []struct {
		body string
		ptrs []string
	}{
		{`{"id":"evt_1","grant_id":"G-1","n":12.50,"ok":true,"nil":null}`, []string{"/id", "/grant_id", "/n", "/ok", "/nil", "/missing"}},
		{`{"a":{"b":1},"a":{"c":2}}`, []string{"/a/b", "/a/c"}}, // the last "a" replaces the first whole
		{`{"a":{"b":1},"a":5}`, []string{"/a/b", "/a"}},
		{`{"a":5,"a":{"b":1}}`, []string{"/a/b"}},
		{`{"id":"x","id":"y"}`, []string{"/id"}},
		{`{"items":[{"id":"a"},{"id":"b"}]}`, []string{"/items/1/id", "/items/0/id", "/items/01/id", "/items/2/id", "/items/-"}},
		{`{"a/b":1,"m~n":"t","":"empty key"}`, []string{"/a~1b", "/m~0n", "/"}},
		{`{"k\u00e9y":"v\u00e9","esc\"":"q\\"}`, []string{"/kéy", `/esc"`}},
		{`{"s":"\ud800"}`, []string{"/s"}},
		{`{"id":{"nested":true}}`, []string{"/id"}}, // an object: the tree's canonical JSON
		{`[1,[2,3]]`, []string{"/1/0", "/1"}},
		{`"top"`, []string{""}},
		{`{"id":"x"}`, []string{""}},
		{`{"n":1e999}`, []string{"/n"}},
		{`{"n":NaN}`, []string{"/n"}},
		{`{"a":1,}`, []string{"/a"}},
		{`{"a":1} x`, []string{"/a"}},
		{"\xef\xbb\xbf{}", []string{"/a"}},
		{"{\"a\":\"\xff\"}", []string{"/a"}},
		{`{"a":"` + "\x01" + `"}`, []string{"/a"}},
		{strings.Repeat("[", MaxJSONDepth) + strings.Repeat("]", MaxJSONDepth), []string{"/0"}},
		{strings.Repeat("[", MaxJSONDepth+1) + strings.Repeat("]", MaxJSONDepth+1), []string{"/0"}},
		{`{"id":""}`, []string{"/id"}},
		{` {"id" : "spaced" } `, []string{"/id"}},
		{``, []string{"/id"}},
		{`{"id":"x"`, []string{"/id"}},
	} {
		skimAgrees(t, []byte(tc.body), tc.ptrs...)
	}
}

// skim never keeps the body: what it returns is a copy.
func TestSkimDoesNotRetainBody(t *testing.T) {
	body := []byte(`{"id":"evt_abc"}`)
	p, _ := ParsePointer("/id")
	out := make([]skimmed, 1)
	if !skim(body, []Pointer{p}, out) || out[0].text != "evt_abc" {
		t.Fatalf("skim = %v", out)
	}
	copy(body, `{"id":"XXXXXXX"}`)
	if out[0].text != "evt_abc" {
		t.Fatalf("the value changed with the body: %q", out[0].text)
	}
}

// FuzzSkimMatchesParseJSON holds skim to ParseJSON and Resolve.
func FuzzSkimMatchesParseJSON(f *testing.F) {
	for _, seed := range []struct{ body, p1, p2 string }{
		{`{"a":{"b":1},"a":{"c":2}}`, "/a/b", "/a/c"},
		{`{"items":[{"id":"a"},{"id":"b"}],"id":"z"}`, "/items/1/id", "/id"},
		{`{"b":[1,2.5,-0,1e21,"\u00e9\ud83d\ude00\ud800"],"a":{"a":null,"a":true}}`, "/b/4", "/a/a"},
		{`[[[[]]]]`, "/0/0", ""},
		{`{"a":1,"a":2}`, "/a", "/b"},
	} {
		f.Add([]byte(seed.body), seed.p1, seed.p2)
	}
	f.Fuzz(func(t *testing.T, body []byte, p1, p2 string) {
		skimAgrees(t, body, p1, p2)
	})
}

// plainWord matches a byte-by-byte check for every byte value at every
// position, among plain bytes and beside other special ones.
func TestPlainWord(t *testing.T) {
	special := func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 }
	for _, fill := range []byte{'a', 0xC3, 0x7F, 0x20, 0xFF} {
		for pos := range 8 {
			for c := range 256 {
				w := []byte(strings.Repeat(string([]byte{fill}), 8))
				w[pos] = byte(c)
				want := true
				for _, b := range w {
					if special(b) {
						want = false
					}
				}
				if got := plainWord(loadWord(string(w), 0)); got != want {
					t.Fatalf("plainWord(%q) = %v, want %v", w, got, want)
				}
			}
		}
	}
}
