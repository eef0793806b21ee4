package config

import (
	"strings"
	"testing"
)

// Two providers whose schemes MAC the same bytes with a common secret
// accept each other's deliveries: a capture posted to the other route
// verifies and is stored there as new (the key is scoped by provider).
// config check warns, naming both providers and never the secret; schemes
// that sign different bytes (stripe's "t.body", standard-webhooks'
// "id.t.body", the body alone) are not warned about.
func TestSharedSecretIsWarned(t *testing.T) {
	const secret = "s3cr3t-shared-value"
	provider := func(name, scheme, secrets string) string {
		hdr := ""
		if scheme == SchemeHMACSHA256 {
			hdr = ", header: X-Sig"
		}
		return "  " + name + ":\n    signature: {scheme: " + scheme + ", secrets: [" + secrets + "]" + hdr + "}\n    event_id: [\"json:/id\"]\n"
	}
	cases := []struct {
		name      string
		providers string
		want      []string // keys warned, each naming the other provider
		other     []string
	}{
		{"github and hmac-sha256", provider("a", SchemeGitHub, `"`+secret+`"`) + provider("b", SchemeHMACSHA256, `"other", "`+secret+`"`),
			[]string{"providers.b.signature.secrets[1]"}, []string{"providers.a"}},
		{"shopify and github", provider("gh", SchemeGitHub, `"`+secret+`"`) + provider("shop", SchemeShopify, `"`+secret+`"`),
			[]string{"providers.shop.signature.secrets[0]"}, []string{"providers.gh"}},
		{"two standard-webhooks, with and without whsec_", provider("a", SchemeStandardWebhooks, `"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"`) + provider("b", SchemeStandardWebhooks, `"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"`),
			[]string{"providers.b.signature.secrets[0]"}, []string{"providers.a"}},
		{"three hmac-sha256", provider("a", SchemeHMACSHA256, `"`+secret+`"`) + provider("b", SchemeHMACSHA256, `"`+secret+`"`) + provider("c", SchemeHMACSHA256, `"`+secret+`"`),
			[]string{"providers.b.signature.secrets[0]", "providers.c.signature.secrets[0]", "providers.c.signature.secrets[0]"}, []string{"providers.a", "providers.a", "providers.b"}},
		{"stripe and github sign different bytes", provider("a", SchemeStripe, `"`+secret+`"`) + provider("b", SchemeGitHub, `"`+secret+`"`), nil, nil},
		{"distinct secrets", provider("a", SchemeGitHub, `"one"`) + provider("b", SchemeGitHub, `"two"`), nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte("providers:\n"+tc.providers), t.TempDir(), envOf(nil))
			if err != nil {
				t.Fatalf("Parse = %v", err)
			}
			var got []Problem
			for _, p := range c.Check() {
				if strings.Contains(p.Msg, "accepted by the other") {
					got = append(got, p)
				}
				if strings.Contains(p.String(), secret) || strings.Contains(p.String(), "MfKQ9r8G") {
					t.Errorf("a problem prints the secret: %s", p.String())
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("shared-secret warnings = %v, want %d, on %v", got, len(tc.want), tc.want)
			}
			for i, p := range got {
				if !p.Warning || p.Key != tc.want[i] || !strings.Contains(p.Msg, "is also a secret of "+tc.other[i]+",") {
					t.Errorf("warning %d = %+v, want a warning on %s naming %s", i, p, tc.want[i], tc.other[i])
				}
			}
		})
	}
}
