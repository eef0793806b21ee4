package event

import (
	"strings"
	"testing"
)

func TestToken(t *testing.T) {
	tests := []struct{ in, want string }{
		{"G-42", "G-42"},
		{"demo.myshopify.com", "demo=2Emyshopify=2Ecom"},
		{"", "="},
		{"a b*>", "a=20b=2A=3E"},
		{"=", "=3D"},
		{"é", "=C3=A9"},
		{"under_score", "under_score"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := Token(tt.in)
			if got != tt.want {
				t.Fatalf("Token(%q) = %q, want %q", tt.in, got, tt.want)
			}
			back, ok := DecodeToken(got)
			if !ok || back != tt.in {
				t.Fatalf("DecodeToken(%q) = %q, %v; want %q", got, back, ok, tt.in)
			}
		})
	}
}

func TestTokens(t *testing.T) {
	if got := Tokens("award.disbursed"); got != "award.disbursed" {
		t.Fatalf("Tokens = %q", got)
	}
	if got := Tokens("a b.c"); got != "a=20b.c" {
		t.Fatalf("Tokens = %q", got)
	}
	if got := Tokens(""); got != "=" {
		t.Fatalf("Tokens(empty) = %q", got)
	}
}

func TestDecodeTokenRejectsMalformed(t *testing.T) {
	for _, in := range []string{"=4", "=zz", "a=", "a.b", "=4g"} {
		if _, ok := DecodeToken(in); ok {
			t.Errorf("DecodeToken(%q) ok; want malformed", in)
		}
	}
}

func FuzzToken(f *testing.F) {
	for _, s := range []string{"G-42", "demo.myshopify.com", "", "=", "\x00\xff", "a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok := Token(s)
		for i := 0; i < len(tok); i++ {
			if c := tok[i]; !tokenSafe(c) && c != '=' {
				t.Fatalf("Token(%q) = %q has byte %q", s, tok, c)
			}
		}
		back, ok := DecodeToken(tok)
		if !ok || back != s {
			t.Fatalf("round trip %q -> %q -> %q, %v", s, tok, back, ok)
		}
	})
}

// Subjects and keys past their bound become the prefix and a digest;
// every one within it keeps its form (so an upgrade moves no watermark
// and no GRANTS subject that worked before).
func TestBounded(t *testing.T) {
	short := "grants.p." + Token(strings.Repeat("é", 600)) // 3.6 KB: it worked before
	if got := Bounded(short, "grants.", MaxSubject); got != short {
		t.Fatalf("a %d-byte subject was changed to %q", len(short), got)
	}
	long := short + "." + Token(strings.Repeat("é", 200))
	got := Bounded(long, "grants.", MaxSubject)
	if len(got) != len("grants.=H")+64 || !strings.HasPrefix(got, "grants.=H") || got == Bounded(long+"x", "grants.", MaxSubject) {
		t.Fatalf("a %d-byte subject became %q; want grants.=H and a digest, distinct per subject", len(long), got)
	}
	if _, ok := DecodeToken(strings.TrimPrefix(got, "grants.")); ok {
		t.Fatalf("the digest token %q reads as an encoding", got)
	}
}
