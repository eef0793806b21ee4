package config

import (
	"testing"
)

// Security audit 41. config check warns when event_id or account.header
// reads a header the provider's scheme does not sign ("a captured delivery
// re-sent with another value ..."), but not when subject, occurred_at or
// type do, although those steer sequencing and publishing just as much:
// a delivery captured and re-sent after dedup.horizon (github, shopify and
// hmac-sha256 sign no timestamp; the README says such a replay is stored
// as new) carries whatever the replayer puts in those headers. A
// far-future occurred_at (Shopify's unsigned X-Shopify-Triggered-At is the
// natural source) moves the subject's watermark to that time and every
// genuine later event of the subject is judged stale, for good; an
// unsigned subject or type header re-labels a signed body onto another
// entity's watermark and GRANTS subject. Reproduced against `hookgate
// serve` (hmac-sha256, occurred_at: header:X-At): one replay with
// X-At: 9999-12-31T23:59:59Z, then a genuine event of the subject is
// recorded `stale` ("older than watermark 9999-12-31T23:59:59Z").
func TestAudit41SecUnsignedSequencingHeaderIsWarned(t *testing.T) {
	cases := []struct{ name, provider, key, header string }{
		{"shopify occurred_at from X-Shopify-Triggered-At",
			"    signature: {scheme: shopify, secrets: [\"shpss_0123456789abcdef0123456789abcdef\"]}\n" +
				"    subject: \"json:/id\"\n    occurred_at: \"header:X-Shopify-Triggered-At\"\n",
			"providers.p.occurred_at", "X-Shopify-Triggered-At"},
		{"hmac-sha256 subject from an unsigned header",
			"    signature: {scheme: hmac-sha256, header: X-Sig, secrets: [\"0123456789abcdef0123456789abcdef\"]}\n" +
				"    subject: \"header:X-Subject\"\n    occurred_at: \"json:/at\"\n",
			"providers.p.subject", "X-Subject"},
		{"github type from X-GitHub-Event",
			"    signature: {scheme: github, secrets: [\"0123456789abcdef0123456789abcdef\"]}\n" +
				"    type: \"header:X-GitHub-Event\"\n",
			"providers.p.type", "X-GitHub-Event"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := "providers:\n  p:\n" + tc.provider
			c, err := Parse([]byte(data), t.TempDir(), envOf(nil))
			if err != nil {
				t.Fatalf("Parse = %v", err)
			}
			ps := c.Check()
			p, ok := findProblem(ps, tc.key, "not signed")
			if !ok {
				t.Fatalf("no warning on %s that header %s is not signed by the scheme (a replayed capture sets it); got:\n%v", tc.key, tc.header, ps)
			}
			if !p.Warning {
				t.Errorf("%s: want a warning, got an error", p)
			}
		})
	}
}

// No such warning where a replay cannot bring its own header: a
// timestamped scheme refuses a capture past its tolerance and answers one
// within it duplicate; webhook-timestamp is signed (it was called unsigned
// as an event id).
func TestSequencingHeaderOfATimestampedSchemeIsNotWarned(t *testing.T) {
	for _, provider := range []string{
		"    signature: {scheme: standard-webhooks, secrets: [\"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"]}\n    subject: \"header:X-Subject\"\n    occurred_at: \"header:webhook-timestamp\"\n    type: \"header:X-Type\"\n",
		"    signature: {scheme: stripe, secrets: [\"whsec_0123456789abcdef0123456789\"]}\n    subject: \"header:X-Subject\"\n    occurred_at: \"json:/created\"\n",
		"    signature: {scheme: standard-webhooks, secrets: [\"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"]}\n    event_id: [\"header:webhook-timestamp\"]\n",
	} {
		c, err := Parse([]byte("providers:\n  p:\n"+provider), t.TempDir(), envOf(nil))
		if err != nil {
			t.Fatalf("Parse = %v", err)
		}
		if ps := c.Check(); len(ps) != 0 {
			t.Errorf("%s: Check() = %v, want no problems", provider, ps)
		}
	}
}
