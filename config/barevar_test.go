package config

import (
	"errors"
	"strings"
	"testing"
)

func TestBareVar(t *testing.T) {
	for _, tt := range []struct {
		in, name string
		whole    bool
	}{
		{"", "", false},
		{"plain", "", false},
		{"$", "", false},
		{"$STRIPE_SECRET", "STRIPE_SECRET", true},
		{"$_x9", "_x9", true},
		{"$HOME/data", "HOME", false},
		{"pre$Xpost", "Xpost", false},
		{"$$HOME", "", false},
		{"${HOME}", "", false},
		{"${HOME}/$DIR", "DIR", false},
		{"${A:-$B}", "", false}, // inside a ${...}: expand's own error says so
		{"$9", "", false},       // not a name in the shell either
		{"cost: 5$", "", false},
		{"${unterminated $X", "", false},
	} {
		name, whole := bareVar(tt.in)
		if name != tt.name || whole != tt.whole {
			t.Errorf("bareVar(%q) = %q, %v; want %q, %v", tt.in, name, whole, tt.name, tt.whole)
		}
	}
}

// A secret written the shell's way ("$STRIPE_SECRET") is those characters
// as the secret, and every signed delivery would be a 401 until the
// senders gave up: config check refuses it, naming the key and the fix,
// never quoting the value. Within other text (a generated secret may hold
// a $) it is a warning; other values ("$HOME/data") warn with the name.
func TestBareVarInConfig(t *testing.T) {
	const provider = "providers:\n  p:\n    signature: {scheme: github, secrets: [%s]}\n"
	env := map[string]string{"STRIPE_SECRET": "real-secret-of-the-tests", "HOME": "/home/x"}
	for _, tt := range []struct {
		name, data string
		key, msg   string // "" key: no problem wanted
		warning    bool
		hidden     string // must not be in any problem's message
	}{
		{
			name: "whole secret", data: strings.Replace(provider, "%s", `"$STRIPE_SECRET"`, 1),
			key: "providers.p.signature.secrets[0]", msg: "write ${NAME}", hidden: "STRIPE",
		},
		{
			name: "forward secret", data: strings.Replace(provider, "%s", "s3cret-of-the-tests", 1) +
				"    effects: {forward: {url: \"http://127.0.0.1:9/x\", secret: \"$FWD_KEY\"}}\n",
			key: "providers.p.effects.forward.secret", msg: "write ${NAME}", hidden: "FWD_KEY",
		},
		{
			name: "nats token", data: "nats: {embedded: {token: \"$TOK\"}}\n" + strings.Replace(provider, "%s", "s3cret-of-the-tests", 1),
			key: "nats.embedded.token", msg: "write ${NAME}", hidden: "TOK",
		},
		{
			name: "within a secret", data: strings.Replace(provider, "%s", `"k9$aBcD"`, 1),
			key: "providers.p.signature.secrets[0]", msg: "kept as literal text", warning: true, hidden: "aBcD",
		},
		{
			name: "data_dir", data: "nats: {embedded: {data_dir: \"$HOME/data\"}}\n" + strings.Replace(provider, "%s", "s3cret-of-the-tests", 1),
			key: "nats.embedded.data_dir", msg: "$HOME is not expanded (kept as literal text): write ${HOME}", warning: true,
		},
		{name: "braces", data: strings.Replace(provider, "%s", `"${STRIPE_SECRET}"`, 1)},
		{name: "literal $", data: strings.Replace(provider, "%s", `"$$STRIPE_SECRET-literal"`, 1)},
		{name: "json pointer", data: strings.Replace(provider, "%s", "s3cret-of-the-tests", 1) + "    event_id: [\"json:/$id\"]\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.data), t.TempDir(), envOf(env))
			var ps Problems
			switch {
			case err != nil && !errors.As(err, &ps):
				t.Fatalf("Parse: %v", err)
			case err == nil:
				ps = c.Check()
			}
			if tt.key == "" {
				if len(ps) > 0 {
					t.Fatalf("want no problem, got:\n%v", ps)
				}
				return
			}
			wantProblem(t, ps, tt.key, tt.msg, tt.warning)
			if tt.warning && err != nil {
				t.Errorf("a warning alone made Parse fail: %v", err)
			}
			if !tt.warning && err == nil {
				t.Errorf("Parse accepted it; Check: %v", ps)
			}
			if tt.hidden != "" && strings.Contains(ps.Error(), tt.hidden) {
				t.Errorf("a problem quotes the secret's text %q:\n%v", tt.hidden, ps)
			}
		})
	}
}
