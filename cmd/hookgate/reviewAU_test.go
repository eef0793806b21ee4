package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Review of forward.secrets (4843b88): config check on the edge cases of
// the list names the right key, exits 1 on an error and 0 on warnings
// alone (CONTRACT), and never prints a secret's text.
func TestReviewAUConfigCheckSecretsEdgeCases(t *testing.T) {
	const (
		good  = "whsec_c2VjcmV0"                     // in every row: must never be printed
		plain = "whsec_hunter2-is-not-base64!"       // not base64
		nl    = "whsec_Zm9yd2FyZC1zZWNyZXQtZmlsZQ==" // read from a file
	)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fwd.secret"), []byte(nl+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"FWD_SAME": good}
	getenv := func(k string) string { return env[k] }
	const base = `providers:
  p:
    signature: { scheme: standard-webhooks, secrets: ["whsec_cHJvdmlkZXI="] }
    subject: "json:/grant_id"
    occurred_at: "json:/occurred_at"
    effects: { forward: { url: "https://h/x", %s } }
`
	tests := []struct {
		name, fwd string
		code      int
		key, msg  string // a line with both, when key != ""
	}{
		{"empty list", `secrets: []`, 0, "providers.p.effects.forward.secrets", "warning"},
		{"empty string", `secrets: ""`, 1, "providers.p.effects.forward.secrets", "want a list"},
		{"scalar", `secrets: ` + good, 1, "providers.p.effects.forward.secrets", "want a list"},
		{"empty entry", `secrets: [` + good + `, ""]`, 1, "providers.p.effects.forward.secrets[1]", "empty"},
		{"null entry", `secrets: [` + good + `, ~]`, 1, "providers.p.effects.forward.secrets[1]", "empty list entry"},
		{"unset var", `secrets: [` + good + `, "${FWD_UNSET}"]`, 1, "providers.p.effects.forward.secrets[1]", "FWD_UNSET is unset or empty"},
		{"unset var, empty default", `secrets: ["${FWD_UNSET:-}", ` + good + `]`, 1, "providers.p.effects.forward.secrets[0]", "empty"},
		{"missing file", `secrets: [` + good + `, "file:nope.secret"]`, 1, "providers.p.effects.forward.secrets[1]", "no such file"},
		{"relative file", `secrets: ["file:fwd.secret", ` + good + `]`, 0, "", ""},
		{"not base64", `secrets: [` + good + `, "` + plain + `"]`, 1, "providers.p.effects.forward.secrets[1]", "not base64"},
		{"bare $NAME", `secrets: [` + good + `, "$FWD_OLD"]`, 1, "providers.p.effects.forward.secrets[1]", "not expanded"},
		{"both", `secret: ` + good + `, secrets: [` + good + `]`, 1, "providers.p.effects.forward.secrets", "not both"},
		{"duplicate", `secrets: ["${FWD_SAME}", ` + good + `]`, 0, "providers.p.effects.forward.secrets[1]", "same secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".yaml")
			if err := os.WriteFile(path, []byte(strings.Replace(base, "%s", tt.fwd, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			code := exitCode(run(t.Context(), []string{"config", "check", path}, getenv, strings.NewReader(""), &out, &errb), &errb)
			all := out.String() + errb.String()
			if code != tt.code {
				t.Errorf("exit %d, want %d\n%s", code, tt.code, all)
			}
			if tt.key != "" && !lineWith(all, tt.key+": ", tt.msg) {
				t.Errorf("no line naming %s with %q:\n%s", tt.key, tt.msg, all)
			}
			for _, s := range []string{good, plain, nl, "c2VjcmV0", "hunter2", "Zm9yd2FyZC1zZWNyZXQtZmlsZQ"} {
				if strings.Contains(all, s) {
					t.Errorf("output quotes secret text %q:\n%s", s, all)
				}
			}
		})
	}
}

func lineWith(out, key, msg string) bool {
	for l := range strings.Lines(out) {
		if strings.Contains(l, key) && strings.Contains(l, msg) {
			return true
		}
	}
	return false
}
