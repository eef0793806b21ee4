package config

import (
	"strings"
	"testing"
)

// TestReviewATKeyRecipeExample: the README quotes
// `event_id=[json:/id] account=[header: json: value:default] fallback=digest`
// as a recipe serve logs.
func TestReviewATKeyRecipeExample(t *testing.T) {
	const want = "event_id=[json:/id] account=[header: json: value:default] fallback=digest"
	for name, y := range map[string]string{
		"stripe defaults": "providers:\n  p:\n    signature: { scheme: stripe, secrets: [s] }\n",
		"explicit":        "providers:\n  p:\n    signature: { scheme: standard-webhooks, secrets: [whsec_aG9va2dhdGUtY29uZmlnLXRlc3Qta2V5] }\n    event_id: [\"json:/id\"]\n    account: { header: \"\", json: \"\", value: default }\n    fallback: digest\n",
		"header upper":    "providers:\n  p:\n    signature: { scheme: github, secrets: [s] }\n    event_id: [\"header:X-GitHub-Delivery\"]\n    account: { header: X-Acct }\n",
	} {
		got := mustParse(t, y, nil).Providers["p"].KeyRecipe()
		t.Logf("%s: %s", name, got)
		if name == "header upper" {
			if !strings.Contains(got, "header:x-github-delivery") || !strings.Contains(got, "header:x-acct") {
				t.Errorf("%s: recipe %q; header names want lower case", name, got)
			}
			continue
		}
		if got != want {
			t.Errorf("%s: recipe %q, README says %q", name, got, want)
		}
	}
}
