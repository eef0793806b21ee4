package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// reviewYProvider is a provider with nothing wrong, so a case's problems
// are its own.
const reviewYProvider = "providers:\n  p:\n    signature: {scheme: github, secrets: [s3cret]}\n"

// A key that cannot be read (misspelt, or a value of the wrong form) must
// hide only the checks that read it (README, Configuration: "a key it
// cannot read hides only the checks that read it"; CONTRACT: config check
// prints one line per problem). except() works on whole groups instead,
// so each of these files reports its unreadable key and nothing else,
// though the second problem is the file's own value, judged by a check
// that reads nothing of the first: fixing the one line shown brings up
// the other on the next run.
func TestReviewYUnreadableKeyHidesUnrelatedProblems(t *testing.T) {
	for _, tt := range []struct {
		name, data string
		bad, want  string // the unreadable key; the unrelated problem's key
	}{
		{
			// The README's own example, with nats for http: the
			// window-above-horizon check reads dedup alone (only the
			// short-window warning reads nats).
			name: "misspelt nats key hides dedup.window above the horizon",
			data: "nats: {credentails: x.creds}\ndedup: {horizon: 24h, window: 48h}\n" + reviewYProvider,
			bad:  "nats.credentails", want: "dedup.window",
		},
		{
			// CI without the secrets (the case except() was written for):
			// an unset token variable, a nats key, hides the same.
			name: "unset nats token variable hides dedup.window above the horizon",
			data: "nats: {embedded: {token: \"${HOOKGATE_NATS_TOKEN}\"}}\ndedup: {horizon: 24h, window: 48h}\n" + reviewYProvider,
			bad:  "nats.embedded.token", want: "dedup.window",
		},
		{
			// webhooks.max_age is compared with dedup.horizon, not with
			// anything in http.
			name: "misspelt http key hides retention.webhooks.max_age below the horizon",
			data: "http: {listn: \"127.0.0.1:9000\"}\nretention: {webhooks: {max_age: 1h}}\n" + reviewYProvider,
			bad:  "http.listn", want: "retention.webhooks.max_age",
		},
		{
			// The scheme check reads the signature block alone.
			name: "misspelt provider key hides an unknown scheme",
			data: "providers:\n  p:\n    signature: {scheme: stripee, secrets: [s3cret]}\n    subjet: \"json:/grant_id\"\n",
			bad:  "providers.p.subjet", want: "providers.p.signature.scheme",
		},
		{
			// workers and max_deliver are checked each on its own.
			name: "unreadable consumer.workers hides consumer.max_deliver 0",
			data: "consumer: {workers: eight, max_deliver: 0}\n" + reviewYProvider,
			bad:  "consumer.workers", want: "consumer.max_deliver",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.data), t.TempDir(), nil)
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("Parse = %v; want Problems", err)
			}
			if _, ok := findProblem(ps, tt.bad, ""); !ok {
				t.Fatalf("no problem on %s; got:\n%v", tt.bad, ps)
			}
			if _, ok := findProblem(ps.Errors(), tt.want, ""); !ok {
				t.Errorf("no error on %s (hidden by %s, which its check does not read); got:\n%v", tt.want, tt.bad, ps)
			}
		})
	}
}

// The contract's default token is "${HOOKGATE_NATS_TOKEN:-}", and the
// README says the variable counts without that line. Written in the file,
// a variable holding file:/path is read from the file (doc.go: a secret is
// read from file:/path after expansion); left to the default, the same
// variable becomes the token "file:/path" itself, so serve's embedded
// server and the CLI authenticate with the path's text.
func TestReviewYTokenVariableWithoutTheLineIgnoresFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nats.token")
	if err := os.WriteFile(path, []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := envOf(map[string]string{"HOOKGATE_NATS_TOKEN": "file:" + path})
	withLine, err := Parse([]byte("nats: {embedded: {token: \"${HOOKGATE_NATS_TOKEN:-}\"}}\n"+reviewYProvider), dir, env)
	if err != nil {
		t.Fatalf("Parse with the contract's line: %v", err)
	}
	if got := withLine.NATS.Embedded.Token.Reveal(); got != "t0ken" {
		t.Fatalf("with the contract's line: token %q, want the file's t0ken", got)
	}
	without, err := Parse([]byte(reviewYProvider), dir, env)
	if err != nil {
		t.Fatalf("Parse without the line: %v", err)
	}
	if got := without.NATS.Embedded.Token.Reveal(); got != "t0ken" {
		t.Errorf("without the line: token %q, want t0ken as with the line (the default is that line)", got)
	}
}

// Check refuses http.admin_listen equal to http.listen (serve could not
// bind both), but not nats.embedded.listen equal to either: config check
// says the file is fine and serve then fails at start with "address
// already in use" from the embedded server.
func TestReviewYEmbeddedListenSameAsHTTPListen(t *testing.T) {
	for _, tt := range []struct{ name, data string }{
		{"http.listen", "http: {listen: \"127.0.0.1:4222\"}\nnats: {embedded: {listen: \"127.0.0.1:4222\"}}\n"},
		{"http.admin_listen", "http: {listen: \"127.0.0.1:8080\", admin_listen: \"127.0.0.1:4222\"}\nnats: {embedded: {listen: \"127.0.0.1:4222\"}}\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.data+reviewYProvider), t.TempDir(), nil)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if _, ok := findProblem(c.Check().Errors(), "nats.embedded.listen", ""); !ok {
				t.Errorf("no error on nats.embedded.listen, the address %s also takes; Check:\n%v", tt.name, c.Check())
			}
		})
	}
}

// sameListen: what two listeners could not both bind.
func TestSameListen(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"127.0.0.1:4222", "127.0.0.1:4222", true},
		{"0.0.0.0:4222", "127.0.0.1:4222", true},
		{":4222", "10.0.0.1:4222", true},
		{"[::]:4222", "127.0.0.1:4222", true},
		{"127.0.0.1:4222", "10.0.0.1:4222", false},
		{"127.0.0.1:4222", "127.0.0.1:8080", false},
		{"127.0.0.1:0", "127.0.0.1:0", false},
	} {
		if got := sameListen(tc.a, tc.b); got != tc.want {
			t.Errorf("sameListen(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
