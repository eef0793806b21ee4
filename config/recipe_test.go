package config

import (
	"strings"
	"testing"
)

// TestKeyRecipe: what builds the keys is in the recipe, written so that
// equal configs compare equal (header names in any case), and nothing else
// (a secret rotated, another subject source) changes it.
func TestKeyRecipe(t *testing.T) {
	base := mustParse(t, baseYAML, nil).Providers["p"]
	same := base
	same.EventID = append([]string(nil), base.EventID...)
	same.Signature.Secrets = []Secret{"another"}
	same.Subject = "json:/other"
	for i, s := range same.EventID {
		if name, ok := strings.CutPrefix(s, "header:"); ok {
			same.EventID[i] = "header:" + strings.ToUpper(name)
		}
	}
	if !strings.Contains(base.KeyRecipe(), "header:webhook-id") {
		t.Fatalf("recipe %q: want the scheme's default event id, header:webhook-id, in it", base.KeyRecipe())
	}
	if got, want := same.KeyRecipe(), base.KeyRecipe(); got != want {
		t.Errorf("recipe %q, want %q: secrets, subject and a header name's case do not build keys", got, want)
	}
	for name, change := range map[string]func(p *Provider){
		"event_id":   func(p *Provider) { p.EventID = append([]string{"json:/event/id"}, p.EventID...) },
		"account":    func(p *Provider) { p.Account.Value = "other" },
		"fallback":   func(p *Provider) { p.Fallback = FallbackReject },
		"key_fields": func(p *Provider) { p.Fallback, p.KeyFields = FallbackFields, []string{"/grant_id"} },
	} {
		p := base
		p.EventID = append([]string(nil), base.EventID...)
		change(&p)
		if p.KeyRecipe() == base.KeyRecipe() {
			t.Errorf("a changed %s left the recipe as it was: %q", name, p.KeyRecipe())
		}
	}
	if strings.Contains(base.KeyRecipe(), string(base.Signature.Secrets[0])) {
		t.Errorf("recipe %q holds the secret", base.KeyRecipe())
	}
}
