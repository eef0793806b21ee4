package event

import (
	"strings"
	"testing"
)

func TestHeaderValue(t *testing.T) {
	tests := []struct {
		in, want string
		quoted   bool
	}{
		{"G-42", "G-42", false},
		{"", "", false},
		{"a b", "a b", false},
		{"é", "é", false},
		{`G\n1`, `G\n1`, false}, // a backslash alone needs nothing
		{`"G"`, `"G"`, false},   // nor a quote: HeaderQuoted says which are quoted
		{"G\n1", `"G\n1"`, true},
		{"G\r\n1", `"G\r\n1"`, true},
		{"G-2 ", `"G-2 "`, true},
		{" G-2", `" G-2"`, true},
		{"\tG", `"\tG"`, true},
		{"a\x00b\x7f", `"a\x00b\x7f"`, true},
	}
	for _, tt := range tests {
		got, quoted := HeaderValue(tt.in)
		if got != tt.want || quoted != tt.quoted {
			t.Errorf("HeaderValue(%q) = %q, %v; want %q, %v", tt.in, got, quoted, tt.want, tt.quoted)
		}
		if back := ExtractedValue(stored(HeaderSubject, tt.in), HeaderSubject); back != tt.in {
			t.Errorf("ExtractedValue of %q = %q", tt.in, back)
		}
	}
}

// Events stored before HeaderQuoted are read as they are, even where a
// value looks quoted: it was the raw value.
func TestExtractedValueBeforeQuoting(t *testing.T) {
	for _, old := range []string{`"G-1"`, `"unterminated`, `G\n1`} {
		h := map[string][]string{HeaderSubject: {old}}
		if got := ExtractedValue(h, HeaderSubject); got != old {
			t.Errorf("ExtractedValue(%q) without %s = %q, want it unchanged", old, HeaderQuoted, got)
		}
	}
	// Only the headers HeaderQuoted names are unquoted.
	h := map[string][]string{HeaderSubject: {`"G\n1"`}, HeaderType: {`"t"`}, HeaderQuoted: {HeaderSubject}}
	if got := ExtractedValue(h, HeaderSubject); got != "G\n1" {
		t.Errorf("quoted subject read as %q", got)
	}
	if got := ExtractedValue(h, HeaderType); got != `"t"` {
		t.Errorf("unlisted type read as %q, want it as stored", got)
	}
}

// stored is the header set the gateway writes for one extracted value.
func stored(name, v string) map[string][]string {
	sv, quoted := HeaderValue(v)
	h := map[string][]string{name: {sv}}
	if quoted {
		h[HeaderQuoted] = []string{name}
	}
	return h
}

// FuzzHeaderValue: every value reads back exactly, and what is stored is a
// valid NATS header value that keeps its white space (no control
// characters, no space or tab at either end).
func FuzzHeaderValue(f *testing.F) {
	for _, s := range []string{"G-42", "G\n1", `G\n1`, " a ", `"x"`, "\xed\xa0\x80", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		h := stored(HeaderSubject, v)
		if back := ExtractedValue(h, HeaderSubject); back != v {
			t.Fatalf("ExtractedValue(stored(%q)) = %q", v, back)
		}
		sv := h[HeaderSubject][0]
		if strings.Trim(sv, " \t") != sv || strings.IndexFunc(sv, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
			t.Fatalf("HeaderValue(%q) = %q: not a value a NATS header keeps", v, sv)
		}
	})
}
