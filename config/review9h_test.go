package config

import (
	"errors"
	"strings"
	"testing"
)

const review9hProvider = "providers:\n  p:\n    signature: {scheme: stripe, secrets: [abc]}\n"

// A misspelt top-level section (dedupe for dedup) leaves dedup.horizon at
// its default (96h); the retention checks, which read dedup.horizon, then
// complain about max_age values that are right for the intended horizon.
// An unreadable nested key hides them (reads + the misspelt-sibling rule);
// a misspelt section does not: the sibling rule needs a dot in the key.
func TestReview9HMisspeltSectionShowsSpuriousRetentionErrors(t *testing.T) {
	data := "dedupe: {horizon: 24h}\nretention: {webhooks: {max_age: 48h}, grants: {max_age: 48h}}\n" + review9hProvider
	_, err := Parse([]byte(data), "", nil)
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Parse = %v; want Problems", err)
	}
	if _, ok := findProblem(ps, "dedupe", ""); !ok {
		t.Fatalf("no problem on the misspelt dedupe; got:\n%v", ps)
	}
	for _, p := range ps {
		if strings.HasPrefix(p.Key, "retention.") {
			t.Errorf("spurious problem from the defaulted dedup.horizon: %v", p)
		}
	}
}

// Nested merges: b merges a and overrides a's fallback with its own; a
// provider merging b must get b's value (YAML merge: a mapping's own keys
// win over what it merges). The decoder flattens b's own key into the
// merged list after a's and the "earlier merge wins" rule keeps a's.
func TestReview9HNestedMergeOwnKeyWins(t *testing.T) {
	data := "x-a: &a\n  fallback: reject\nx-b: &b\n  <<: *a\n  signature: {scheme: stripe, secrets: [abc]}\n  fallback: digest\nproviders:\n  q:\n    <<: *b\n"
	c, err := Parse([]byte(data), "", nil)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got := c.Providers["q"].Fallback; got != FallbackDigest {
		t.Errorf("fallback = %q, want %q (b's own key over the a it merges)", got, FallbackDigest)
	}
}

// Merging the same block twice (aliases) is not a duplicate key.
func TestReview9HSameBlockMergedTwiceIsFine(t *testing.T) {
	data := "x-b: &b\n  signature: {scheme: stripe, secrets: [abc]}\n  fallback: digest\nx-c: &c\n  <<: *b\nproviders:\n  q:\n    <<: [*b, *c, *b]\n"
	if _, err := Parse([]byte(data), "", nil); err != nil {
		t.Fatalf("Parse: %v", err)
	}
}
