package config

import (
	"errors"
	"strings"
	"testing"
)

const review9Provider = "providers:\n  p:\n    signature: {scheme: stripe, secrets: [abc]}\n"

// ${A:-${B}} with A set must give A's value (or be refused); it gives "x}".
func TestReview9NestedDefaultCorruptsValue(t *testing.T) {
	data := "providers:\n  p:\n    signature: {scheme: stripe, secrets: [\"${A:-${B}}\"]}\n"
	c, err := Parse([]byte(data), "", envOf(map[string]string{"A": "x", "B": "y"}))
	if err != nil {
		return // refusing nested defaults is fine
	}
	if got := c.Providers["p"].Signature.Secrets[0].Reveal(); got != "x" {
		t.Errorf("secret = %q, want %q (or a problem on secrets[0]); Check: %v", got, "x", c.Check())
	}
}

// An unknown key in one global section must not hide problems in unrelated
// sections (doc.go: "Every problem found is returned at once").
func TestReview9TypoHidesUnrelatedProblems(t *testing.T) {
	data := "http: {max_body_byte: 1}\ndedup: {window: 200h}\nconsumer: {workers: 0}\n" + review9Provider
	_, err := Parse([]byte(data), "", nil)
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Parse = %v; want Problems", err)
	}
	for _, key := range []string{"http.max_body_byte", "dedup.window", "consumer.workers"} {
		if _, ok := findProblem(ps, key, ""); !ok {
			t.Errorf("no problem on %s; got:\n%v", key, ps)
		}
	}
}

// The CI case the code names (secrets absent from the environment): a
// misspelt scheme and a misplaced header must still be reported.
func TestReview9UnsetSecretHidesSignatureProblems(t *testing.T) {
	data := "providers:\n  p:\n    signature: {scheme: stripee, secrets: [\"${UNSET}\"], tolerance: -5m}\n"
	_, err := Parse([]byte(data), "", nil)
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Parse = %v; want Problems", err)
	}
	for _, key := range []string{"providers.p.signature.secrets[0]", "providers.p.signature.scheme", "providers.p.signature.tolerance"} {
		if _, ok := findProblem(ps, key, ""); !ok {
			t.Errorf("no problem on %s; got:\n%v", key, ps)
		}
	}
}

// A key given twice inside a block brought in by <<: is silently
// first-wins; given twice anywhere else it is an error.
func TestReview9DuplicateKeyInMergedBlock(t *testing.T) {
	data := "x-base: &b\n  signature: {scheme: stripe, secrets: [abc]}\n  fallback: digest\n  fallback: reject\nproviders:\n  q:\n    <<: *b\n"
	c, err := Parse([]byte(data), "", nil)
	if err == nil {
		t.Fatalf("no problem for fallback given twice; fallback = %q, Check: %v", c.Providers["q"].Fallback, c.Check())
	}
	if !strings.Contains(err.Error(), "given twice") {
		t.Errorf("Parse = %v; want a key-given-twice problem", err)
	}
}

// consumer.workers starts that many goroutines (consumer.Processor.Run) and
// sizes MaxAckPending as workers*16: a huge value must be refused.
func TestReview9HugeWorkersAccepted(t *testing.T) {
	c := mustParse(t, "consumer: {workers: 1000000000000}\n"+review9Provider, nil)
	if _, ok := findProblem(c.Check(), "consumer.workers", ""); !ok {
		t.Errorf("workers = %d passes Check: %v", c.Consumer.Workers, c.Check())
	}
}

// nats.url of blanks: Validate treats it as no URL for the URL checks but as
// a URL for replicas; serve (cfg.NATS.URL != "") dials " ".
func TestReview9BlankNATSURL(t *testing.T) {
	c := mustParse(t, "nats: {url: \" \", replicas: 3}\n"+review9Provider, nil)
	if _, ok := findProblem(c.Check(), "nats.url", ""); !ok {
		if _, ok := findProblem(c.Check(), "nats.replicas", ""); !ok {
			t.Errorf("blank nats.url with replicas 3 passes Check: %v", c.Check())
		}
	}
}

// tolerance is read only by the timestamped schemes; header on the wrong
// scheme is an error, tolerance on the wrong scheme is silently ignored.
func TestReview9ToleranceIgnoredSilently(t *testing.T) {
	c := mustParse(t, "providers:\n  p:\n    signature: {scheme: github, secrets: [abc], tolerance: 10m}\n", nil)
	if _, ok := findProblem(c.Check(), "providers.p.signature.tolerance", ""); !ok {
		t.Errorf("tolerance on github: no warning; Check: %v", c.Check())
	}
}
