package config

import (
	"strings"
	"testing"
)

// Review AC (secret leaks, audit records).
//
// CONTRACT, NATS: WEBHOOKS stores "every request header except
// `Authorization`, `Cookie`, `Proxy-*` and hop-by-hop ones"; the rule under
// review: "Secrets never reach logs, errors, metrics or the audit stream",
// and a sender's credential headers are never stored.
//
// A `header:` source naming one of those headers copied the credential
// into the event's Hookgate-* headers (stored in WEBHOOKS, sent on by
// forward, part of the GRANTS subject) and, for the account and event id,
// into the key and AUDIT records: a provider with `account: {header:
// Cookie}` and `subject: "header:Authorization"` stored both with every
// event, its session cookie in the key and the debug log line (review AC's
// gateway test, on the code before). `config check` said nothing for
// subject, occurred_at and type, and for account.header and event_id only
// that the header is unsigned. Now each is an error naming the key, so
// serve does not start with it.
func TestReviewACCredentialHeaderSourcesPassConfigCheck(t *testing.T) {
	for _, tc := range []struct{ field, line, header string }{
		{"subject", `subject: "header:Authorization"`, "Authorization"},
		{"occurred_at", `occurred_at: "header:Cookie"`, "Cookie"},
		{"type", `type: "header:Proxy-Authorization"`, "Proxy-Authorization"},
		{"account.header", `account: { header: cookie }`, "cookie"},
		{"event_id[1]", `event_id: ["json:/id", "header:AUTHORIZATION"]`, "AUTHORIZATION"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			data := "providers:\n  p:\n    signature: { scheme: github, secrets: [s3cret] }\n" +
				"    ordering: none\n" +
				"    " + tc.line + "\n"
			cfg, err := Parse([]byte(data), t.TempDir(), nil)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			key := "providers.p." + tc.field
			ps := cfg.Check()
			wantProblem(t, ps, key, "header "+tc.header+" carries the sender's credentials", false)
			if cfg.Validate() == nil {
				t.Errorf("Validate accepted it: %v", ps)
			}
		})
	}
}

// "Secrets never reach logs, errors, metrics or the audit stream."
// (config/expand.go promises: "Errors never quote s, which may be a
// secret.")
//
// A secret value that holds "${...}" (a generated password with "${" in
// it, or a secret pasted inside the braces by mistake) is reported as
// "environment variable <the text> is unset or empty": config check, serve's
// error and `hookgate sign` print that part of the secret.
func TestReviewACSecretTextInBracesIsEchoed(t *testing.T) {
	const (
		sigPart = "Kq7LmZx9Tp4WvR2s"                       // inside a generated password
		fwdPart = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // a secret pasted inside ${}
		tokPart = "n4tsT0kenV4lue8f3a"
	)
	data := `nats:
  embedded:
    token: "a${` + tokPart + `}b"
providers:
  p:
    signature: { scheme: github, secrets: ["Zx9${` + sigPart + `}Tp"] }
    effects:
      forward: { url: "https://example.com/hook", secret: "${` + fwdPart + `}" }
`
	_, err := Parse([]byte(data), t.TempDir(), func(string) string { return "" })
	if err == nil {
		t.Fatal("Parse: no error; want one per unreadable value")
	}
	msg := err.Error()
	for _, leak := range []string{sigPart, fwdPart, tokPart} {
		if strings.Contains(msg, leak) {
			t.Errorf("config error quotes secret text %q:\n%s", leak, msg)
		}
	}
}

// The fix keeps the usual case's help: a variable named the usual way (in
// capitals) is still named in a secret's error.
func TestUnsetSecretVariableNamedInCapitals(t *testing.T) {
	data := "providers:\n  p:\n    signature: { scheme: github, secrets: [\"${GRANTS_SECRET_2}\"] }\n"
	_, err := Parse([]byte(data), t.TempDir(), func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "providers.p.signature.secrets[0]: environment variable GRANTS_SECRET_2 is unset or empty") {
		t.Errorf("Parse: %v; want the variable named", err)
	}
}
