package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestSecretsNeverPrinted loads secrets from the environment and from files
// into every Secret field and checks that no way of printing the config
// shows them.
func TestSecretsNeverPrinted(t *testing.T) {
	const (
		envSecret  = "whsec_ZW52LXNlY3JldC12YWx1ZQ==" // "env-secret-value"
		fileSecret = "file-secret-value"
		token      = "nats-token-value"
	)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "s"), []byte(fileSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Parse([]byte(`
nats: { embedded: { token: "${TOKEN}" } }
providers:
  p:
    signature: { scheme: standard-webhooks, secrets: ["${SECRET}", "file:s"] }
    effects: { forward: { url: "https://h/x", secret: "${SECRET}" } }
`), dir, envOf(map[string]string{"SECRET": envSecret, "TOKEN": token}))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Providers["p"]
	if p.Signature.Secrets[1].Reveal() != fileSecret || c.NATS.Embedded.Token.Reveal() != token {
		t.Fatal("secrets not loaded; the test would prove nothing")
	}

	outputs := map[string]string{}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%d", "%x", "%X", "%q", "%T %v", "%10.3v", "%b", "%o"} {
		for name, v := range map[string]any{"*Config": c, "Config": *c, "Provider": p, "Secrets": p.Signature.Secrets, "Secret": p.Signature.Secrets[0]} {
			outputs[verb+" "+name] = fmt.Sprintf(verb, v)
		}
	}
	outputs["Sprint"] = fmt.Sprint(c, *c, p)
	outputs["Println"] = fmt.Sprintln(*c)
	for name, h := range map[string]func(*bytes.Buffer) slog.Handler{
		"slog JSON": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
		"slog text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
	} {
		var b bytes.Buffer
		slog.New(h(&b)).Info("config", "config", c, "value", *c, "provider", p, "secret", p.Signature.Secrets[0], "token", c.NATS.Embedded.Token)
		outputs[name] = b.String()
	}
	j, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	outputs["json"] = string(j)
	y, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	outputs["yaml"] = string(y)

	for name, out := range outputs {
		for _, s := range []string{"env-secret", "ZW52LXNlY3JldC12YWx1ZQ", fileSecret, token} {
			if strings.Contains(out, s) {
				t.Errorf("%s shows a secret: %s", name, out)
			}
		}
	}
	if !strings.Contains(outputs["slog JSON"], "REDACTED") || !strings.Contains(outputs["%+v *Config"], "REDACTED") {
		t.Errorf("secrets are not shown as REDACTED:\n%s\n%s", outputs["slog JSON"], outputs["%+v *Config"])
	}
}

func TestSecretFormats(t *testing.T) {
	s := Secret("x")
	tests := []struct{ format, want string }{
		{"%v", "REDACTED"}, {"%s", "REDACTED"}, {"%d", "REDACTED"},
		{"%q", `"REDACTED"`}, {"%#v", `"REDACTED"`}, {"[%v]", "[REDACTED]"},
	}
	for _, tt := range tests {
		if got := fmt.Sprintf(tt.format, s); got != tt.want {
			t.Errorf("Sprintf(%q) = %q, want %q", tt.format, got, tt.want)
		}
	}
	if s.Reveal() != "x" {
		t.Errorf("Reveal() = %q", s.Reveal())
	}
}

// TestParseErrorsNeverQuoteSecrets checks messages about secret values
// that cannot be expanded or read.
func TestParseErrorsNeverQuoteSecrets(t *testing.T) {
	for _, v := range []string{"pre${bad name}post", "pre${unterminated", "file:/nonexistent/dir/pre"} {
		_, err := Parse([]byte(`providers: {p: {signature: {secrets: ["`+v+`"]}}}`), "", nil)
		var ps Problems
		if !errors.As(err, &ps) {
			t.Fatalf("Parse(%q) = %v, want Problems", v, err)
		}
		if msg := ps.Error(); strings.Contains(msg, "bad name") || strings.Contains(msg, "unterminated}") || strings.Contains(msg, "${unterminated") {
			t.Errorf("message quotes the value: %s", msg)
		}
	}
}
