package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --config A plus a positional B: only B is checked, A silently ignored.
func TestReview9ConfigCheckTwoFiles(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(bad, []byte("consumer: {workers: 0}\n"), 0o600)
	os.WriteFile(good, []byte("providers:\n  p:\n    signature: {scheme: stripe, secrets: [abc]}\n"), 0o600)
	var out, errb bytes.Buffer
	err := run(t.Context(), []string{"config", "check", "--config", bad, good}, func(string) string { return "" }, strings.NewReader(""), &out, &errb)
	if err == nil {
		t.Errorf("config check --config bad.yaml good.yaml: nil error; stdout %q", out.String())
	}
}

// HOOKGATE_CONFIG stands in for FILE.
func TestReview9ConfigCheckEnv(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("consumer: {workers: 0}\n"), 0o600)
	var out, errb bytes.Buffer
	err := run(t.Context(), []string{"config", "check"}, func(k string) string {
		if k == "HOOKGATE_CONFIG" {
			return bad
		}
		return ""
	}, strings.NewReader(""), &out, &errb)
	if err == nil || !strings.Contains(out.String(), "consumer.workers") {
		t.Errorf("err %v, stdout %q", err, out.String())
	}
}
