package config

import (
	"fmt"
	"strings"
	"testing"
)

// Review of forward.secrets (4843b88).

// An explicit `secrets: []` beside a url forwards every request unsigned,
// with config check answering "ok": a receiver that verifies refuses each
// one (401, any other 4xx: dead-lettered at once). signature.secrets: []
// is an error; forward.secrets: [] should at least be named.
func TestReviewAUEmptySecretsListIsNamed(t *testing.T) {
	c := mustParse(t, baseYAML+`    effects: { forward: { url: "https://h/x", secrets: [] } }
`, nil)
	wantProblem(t, c.Check(), "providers.p.effects.forward.secrets", "empty", true)
}

// The same secret twice (two variables set to the same value while
// rotating, or one spelt with and one without whsec_) is not a rotation:
// the receiver moved to "the new one" refuses every request. signature.
// secrets warns on a duplicate; forward.secrets says nothing.
func TestReviewAUDuplicateSecretsWarn(t *testing.T) {
	for name, list := range map[string]string{
		"same text":          `["${FWD_NEW}", "${FWD_OLD}"]`,
		"with/without whsec": `[whsec_aG9va2dhdGUtY29uZmlnLXRlc3Qta2V5, aG9va2dhdGUtY29uZmlnLXRlc3Qta2V5]`,
	} {
		t.Run(name, func(t *testing.T) {
			c := mustParse(t, baseYAML+`    effects: { forward: { url: "https://h/x", secrets: `+list+` } }
`, map[string]string{"FWD_NEW": "whsec_b2xk", "FWD_OLD": "whsec_b2xk"})
			p := wantProblem(t, c.Check(), "providers.p.effects.forward.secrets[1]", "same secret as secrets[0]", true)
			if strings.Contains(p.String(), "b2xk") || strings.Contains(p.String(), "aG9va2dhdGUtY29uZmlnLXRlc3Qta2V5") {
				t.Errorf("the problem quotes the secret: %s", p)
			}
		})
	}
}

// No bound on the list: 2000 secrets pass config check, and the
// webhook-signature header they make (98 KB) is past serve's own
// MaxHeaderBytes (64 KiB, a 431) and nginx's 8 KiB default: every event
// dead-lettered at once.
func TestReviewAULongSecretsListRefused(t *testing.T) {
	var b strings.Builder
	for i := range 2000 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "whsec_aG9va2dhdGUtY29uZmlnLXRlc3Qta2V5%04d", i)
	}
	c := mustParse(t, baseYAML+`    effects: { forward: { url: "https://h/x", secrets: [`+b.String()+`] } }
`, nil)
	wantProblem(t, c.Check(), "providers.p.effects.forward.secrets", "more than", false)
}
