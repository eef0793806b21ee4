package config

import (
	"errors"
	"testing"
)

// A block with a key given twice, merged one level down: reported.
// The same block merged through another block (q <<: *b, b <<: *a):
// winners, run on b's pairs, keeps a's first "fallback" and drops the
// second as an "earlier merged pair", so entries never sees the
// duplicate and the file parses with a silent first-wins.
func TestReview9INestedMergedDuplicateStillReported(t *testing.T) {
	const a = "x-a: &a\n  signature: {scheme: stripe, secrets: [abc]}\n  fallback: reject\n  fallback: digest\n"
	for _, tc := range []struct{ name, data string }{
		{"direct", a + "providers:\n  q:\n    <<: *a\n"},
		{"nested", a + "x-b: &b\n  <<: *a\nproviders:\n  q:\n    <<: *b\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.data), "", nil)
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("Parse = %v; want the duplicate fallback reported", err)
			}
			if _, ok := findProblem(ps, "providers.q.fallback", "given twice"); !ok {
				t.Fatalf("no duplicate-key problem; got:\n%v", ps)
			}
		})
	}
}

// A stray misspelt top-level "provider:" block next to a real
// "providers:" section: meantKey gives "providers", and related(p.Key,
// "providers") holds for every provider's key, so every Check error of
// every real provider is hidden behind the unknown key (before this
// commit they were reported with it).
func TestReview9IMisspeltProvidersHidesRealProviderProblems(t *testing.T) {
	const real = "providers:\n  q:\n    signature: {scheme: nope, secrets: [abc]}\n"
	c, err := Parse([]byte(real), "", nil)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if _, ok := findProblem(c.Check().Errors(), "providers.q.signature.scheme", ""); !ok {
		t.Fatalf("without the stray key: no scheme problem; got:\n%v", c.Check())
	}
	var ps Problems
	_, err = Parse([]byte("provider: {}\n"+real), "", nil)
	if !errors.As(err, &ps) {
		t.Fatalf("Parse = %v; want Problems", err)
	}
	if _, ok := findProblem(ps, "provider", "did you mean providers?"); !ok {
		t.Fatalf("no unknown-key problem; got:\n%v", ps)
	}
	if _, ok := findProblem(ps, "providers.q.signature.scheme", ""); !ok {
		t.Errorf("providers.q's missing scheme is hidden by the stray 'provider:' key; got:\n%v", ps)
	}
}
