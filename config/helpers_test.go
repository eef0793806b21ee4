package config

import (
	"strings"
	"testing"
)

// envOf returns a getenv reading m.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// testEnv is the environment the testdata files expect.
var testEnv = map[string]string{
	"GRANTSGOV_SECRET":     "whsec_" + "aG9va2dhdGUtY29uZmlnLXRlc3Qta2V5LWdyYW50c2dvdg==", // "secret-grantsgov"
	"GRANTSGOV_SECRET_OLD": "whsec_b2xkLXNlY3JldC1vZi10aGUtdGVzdHM=",                      // "old-secret-of-the-tests"
}

// mustParse parses data or fails the test.
func mustParse(t *testing.T, data string, env map[string]string) *Config {
	t.Helper()
	c, err := Parse([]byte(data), t.TempDir(), envOf(env))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

// mustLoad loads a testdata file or fails the test.
func mustLoad(t *testing.T, name string) *Config {
	t.Helper()
	c, err := Load("testdata/"+name, envOf(testEnv))
	if err != nil {
		t.Fatalf("Load %s: %v", name, err)
	}
	return c
}

// findProblem returns the problem with key whose message contains msg.
func findProblem(ps Problems, key, msg string) (Problem, bool) {
	for _, p := range ps {
		if p.Key == key && strings.Contains(p.Msg, msg) {
			return p, true
		}
	}
	return Problem{}, false
}

// wantProblem fails unless ps has a problem (warning or error, as told)
// with key and a message containing msg.
func wantProblem(t *testing.T, ps Problems, key, msg string, warning bool) Problem {
	t.Helper()
	p, ok := findProblem(ps, key, msg)
	if !ok {
		t.Fatalf("no problem %q containing %q; got:\n%v", key, msg, ps)
	}
	if p.Warning != warning {
		t.Errorf("%s: Warning = %v, want %v", p, p.Warning, warning)
	}
	return p
}
