package event

import (
	"strings"
	"testing"
)

func TestHeaderValue(t *testing.T) {
	tests := []struct{ in, want string }{
		{"G-42", "G-42"},
		{"", ""},
		{"a b", "a b"},
		{"é", "é"},
		{`G\n1`, `G\n1`}, // a backslash alone needs nothing
		{"G\n1", `"G\n1"`},
		{"G\r\n1", `"G\r\n1"`},
		{"G-2 ", `"G-2 "`},
		{" G-2", `" G-2"`},
		{"\tG", `"\tG"`},
		{`"G"`, `"\"G\""`},
		{`"`, `"\""`},
		{"a\x00b\x7f", `"a\x00b\x7f"`},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		got := HeaderValue(tt.in)
		if got != tt.want {
			t.Errorf("HeaderValue(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if back := FromHeaderValue(got); back != tt.in {
			t.Errorf("FromHeaderValue(%q) = %q, want %q", got, back, tt.in)
		}
		if other, ok := seen[got]; ok {
			t.Errorf("%q and %q are both stored as %q", other, tt.in, got)
		}
		seen[got] = tt.in
	}
	// Written by versions before HeaderValue: read as they are.
	for _, old := range []string{`"unterminated`, `"G-1`, `G\n1`} {
		if got := FromHeaderValue(old); got != old {
			t.Errorf("FromHeaderValue(%q) = %q, want it unchanged", old, got)
		}
	}
}

// FuzzHeaderValue: every value reads back exactly, and what is stored is a
// valid NATS header value that keeps its white space (no control
// characters, none at either end).
func FuzzHeaderValue(f *testing.F) {
	for _, s := range []string{"G-42", "G\n1", `G\n1`, " a ", `"x"`, "\xed\xa0\x80", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		h := HeaderValue(v)
		if back := FromHeaderValue(h); back != v {
			t.Fatalf("FromHeaderValue(HeaderValue(%q)) = %q", v, back)
		}
		if strings.Trim(h, " \t") != h || strings.IndexFunc(h, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
			t.Fatalf("HeaderValue(%q) = %q: not a value a NATS header keeps", v, h)
		}
	})
}
