package config

import (
	"testing"
	"time"
)

// Review 40: config check warns of a forward signing key under 16 bytes
// (README: "a signing key, inbound or forward's") only in the
// forward.secrets list; forward.secret, the single secret most configs
// use (examples/, README's sample), is never looked at, so a 6-byte
// forward key passes config check and serve's start in silence.
func TestReview40ShortForwardSecretIsWarned(t *testing.T) {
	c := mustParse(t, baseYAML, nil)
	pr := c.Providers["p"]
	pr.Effects.Forward = Forward{URL: "https://h/x", Timeout: time.Second, Secret: "whsec_c2VjcmV0"} // base64("secret"): 6 bytes
	c.Providers["p"] = pr
	wantProblem(t, c.Check(), "providers.p.effects.forward.secret", "only 6 bytes: short enough to be guessed", true)
}
