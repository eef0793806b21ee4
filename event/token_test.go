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

// A value whose encoding would pass MaxToken is its digest: a subject
// stays far under NATS's 4096-byte protocol line whatever the sender puts
// in an account, subject or type.
func TestTokenBounded(t *testing.T) {
	long := strings.Repeat("é", 512) // 1 KiB, 6 KiB encoded
	tok := Token(long)
	if len(tok) != 66 || !strings.HasPrefix(tok, "=H") || Token(long+"x") == tok {
		t.Fatalf("Token of 1 KiB = %q; want =H and a digest, distinct per value", tok)
	}
	if _, ok := DecodeToken(tok); ok {
		t.Fatalf("DecodeToken(%q) ok: a digest must not read as an encoding", tok)
	}
	if edge := strings.Repeat("a", MaxToken); Token(edge) != edge {
		t.Fatalf("a safe value of MaxToken bytes is encoded %q", Token(edge))
	}
	if dotted := strings.Repeat("a.", 200) + "b"; len(Tokens(dotted)) > 256 || !strings.HasPrefix(Tokens(dotted), "=H") {
		t.Fatalf("Tokens of 200 levels = %q, want one digest token", Tokens(dotted))
	}
	if Tokens("award.disbursed") != "award.disbursed" {
		t.Fatalf("Tokens(award.disbursed) = %q", Tokens("award.disbursed"))
	}
}
