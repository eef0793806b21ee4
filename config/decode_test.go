package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestExpand(t *testing.T) {
	env := envOf(map[string]string{"A": "a", "B": "bee", "EMPTY": ""})
	tests := []struct {
		in, want string
		wantErr  string
	}{
		{in: "plain", want: "plain"},
		{in: "${A}", want: "a"},
		{in: "x${A}y${B}z", want: "xaybeez"},
		{in: "${UNSET:-def}", want: "def"},
		{in: "${A:-def}", want: "a"},
		{in: "${EMPTY:-def}", want: "def"},
		{in: "${UNSET:-}", want: ""},
		{in: "${UNSET:-a:-b}", want: "a:-b"},
		{in: "${UNSET:-a}b}", want: "ab}"},
		{in: "${UNSET:-$A}", want: "$A"},
		{in: "$$", want: "$"},
		{in: "$${A}", want: "${A}"},
		{in: "$$$${A}", want: "$${A}"},
		{in: "$$${A}", want: "$a"},
		{in: "cost $5", want: "cost $5"},
		{in: "a$b", want: "a$b"},
		{in: "$", want: "$"},
		{in: "end$", want: "end$"},
		{in: "${UNSET}", wantErr: "environment variable UNSET is unset or empty"},
		{in: "${EMPTY}", wantErr: "environment variable EMPTY is unset or empty"},
		{in: "x${A", wantErr: "unterminated ${"},
		{in: "${}", wantErr: "invalid variable name"},
		{in: "${1A}", wantErr: "invalid variable name"},
		{in: "${A B}", wantErr: "invalid variable name"},
		{in: "${:-x}", wantErr: "invalid variable name"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := expand(tt.in, env)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("expand(%q) = %q, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("expand(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

// TestExpandBeforeTyping checks that ${VAR} works in every kind of value,
// since expansion happens before the value is typed.
func TestExpandBeforeTyping(t *testing.T) {
	c := mustParse(t, `
http: { listen: "${HOST:-0.0.0.0}:${PORT}", max_body_bytes: "${BODY:-2MiB}" }
dedup: { horizon: "${HORIZON}" }
consumer: { workers: "${WORKERS}", max_deliver: "${UNSET:-}", backoff: ["${B1}", 1m] }
roles: { consumer: "${CONSUMER:-false}" }
providers:
  p:
    signature: { scheme: '${SCHEME}', secrets: ["${S}"] }
`, map[string]string{"PORT": "9000", "HORIZON": "48h", "WORKERS": "12", "B1": "3s", "SCHEME": "stripe", "S": "whsec_x"})
	p := c.Providers["p"]
	tests := []struct {
		name      string
		got, want any
	}{
		{"string", c.HTTP.Listen, "0.0.0.0:9000"},
		{"size", c.HTTP.MaxBodyBytes, int64(2 << 20)},
		{"duration", c.Dedup.Horizon, 48 * time.Hour},
		{"int", c.Consumer.Workers, 12},
		{"empty int takes the default", c.Consumer.MaxDeliver, 8},
		{"list entry", c.Consumer.Backoff[0], 3 * time.Second},
		{"bool", c.Roles.Consumer, false},
		{"single-quoted", p.Signature.Scheme, "stripe"},
		{"secret", p.Signature.Secrets[0].Reveal(), "whsec_x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}
}

func TestExpandErrorsNameTheKey(t *testing.T) {
	data := `providers:
  grantsgov:
    signature:
      scheme: standard-webhooks
      secrets: ["${GRANTSGOV_SECRET}"]
consumer:
  workers: ${WORKERS}
`
	_, err := Parse([]byte(data), "", nil)
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Parse = %v, want Problems", err)
	}
	p := wantProblem(t, ps, "providers.grantsgov.signature.secrets[0]", "environment variable GRANTSGOV_SECRET is unset or empty", false)
	if p.Line != 5 {
		t.Errorf("line = %d, want 5", p.Line)
	}
	wantProblem(t, ps, "consumer.workers", "environment variable WORKERS is unset or empty", false)
	if got, want := ps[0].String(), "providers.grantsgov.signature.secrets[0]: environment variable GRANTSGOV_SECRET is unset or empty (line 5)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// TestNilGetenv checks that a nil getenv is an empty environment.
func TestNilGetenv(t *testing.T) {
	c, err := Parse([]byte(`http: {listen: "${L:-127.0.0.1:1}"}`), "", nil)
	if err != nil || c.HTTP.Listen != "127.0.0.1:1" {
		t.Fatalf("Parse = %v, %v", c, err)
	}
	if _, err := Parse([]byte(`http: {listen: "${PATH}"}`), "", nil); err == nil {
		t.Error("Parse with nil getenv read the real environment")
	}
}

func TestFileSecrets(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write("lf", "s3cret\n")
	write("crlf", "s3cret\r\n")
	write("two", "s3cret\n\n")
	write("none", "s3cret")
	write("spaces", " s3cret \n")
	write("empty", "")
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	write("sub/nested", "nested\n")

	tests := []struct {
		name, value, want string
	}{
		{"trailing newline dropped", "file:" + filepath.Join(dir, "lf"), "s3cret"},
		{"CRLF dropped", "file:" + filepath.Join(dir, "crlf"), "s3cret"},
		{"only one newline dropped", "file:" + filepath.Join(dir, "two"), "s3cret\n"},
		{"no newline", "file:" + filepath.Join(dir, "none"), "s3cret"},
		{"spaces kept", "file:" + filepath.Join(dir, "spaces"), " s3cret "},
		{"empty file", "file:" + filepath.Join(dir, "empty"), ""},
		{"relative to the config", "file:sub/nested", "nested"},
		{"after expansion", "file:${DIR}/lf", "s3cret"},
		{"from a variable", "${REF}", "s3cret"},
	}
	env := map[string]string{"DIR": dir, "REF": "file:" + filepath.Join(dir, "lf")}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := `
nats: { embedded: { token: "` + tt.value + `" } }
providers:
  p:
    signature: { scheme: stripe, secrets: ["` + tt.value + `"] }
    effects: { forward: { url: "https://x", secret: "` + tt.value + `" } }
`
			c, err := Parse([]byte(data), dir, envOf(env))
			if err != nil {
				t.Fatal(err)
			}
			p := c.Providers["p"]
			for key, got := range map[string]Secret{
				"secrets[0]": p.Signature.Secrets[0], "forward.secret": p.Effects.Forward.Secret, "token": c.NATS.Embedded.Token,
			} {
				if got.Reveal() != tt.want {
					t.Errorf("%s = %q, want %q", key, got.Reveal(), tt.want)
				}
			}
		})
	}
}

func TestFileSecretErrors(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, maxSecretFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, value, key, msg string
	}{
		{"missing", "file:/nonexistent/hookgate-secret", "providers.p.signature.secrets[0]", "/nonexistent/hookgate-secret: no such file"},
		{"directory", "file:" + dir, "providers.p.signature.secrets[0]", "not a regular file"},
		{"device", "file:/dev/null", "providers.p.signature.secrets[0]", "not a regular file"},
		{"too big", "file:" + big, "providers.p.signature.secrets[0]", "larger than 65536 bytes"},
		{"empty path", "file:", "providers.p.signature.secrets[0]", "empty path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte("providers:\n  p:\n    signature: {scheme: stripe, secrets: [\""+tt.value+"\"]}\n"), dir, nil)
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("Parse = %v, want Problems", err)
			}
			p := wantProblem(t, ps, tt.key, tt.msg, false)
			if p.Line != 3 {
				t.Errorf("line = %d, want 3", p.Line)
			}
		})
	}
	for _, key := range []string{"nats.embedded.token", "providers.p.effects.forward.secret"} {
		t.Run(key, func(t *testing.T) {
			data := "nats: {embedded: {token: file:missing}}\nproviders: {p: {effects: {forward: {secret: file:missing}}}}\n"
			_, err := Parse([]byte(data), dir, nil)
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("Parse = %v, want Problems", err)
			}
			wantProblem(t, ps, key, "no such file", false)
		})
	}
}

func TestUnknownKeys(t *testing.T) {
	data := `http:
  listn: "127.0.0.1:1"
  Listen: "127.0.0.1:2"
x-anchors: {}
providers:
  p:
    signature: { scheme: stripe, secrets: [x], tolrance: 5m }
    bogus: 1
    x-note: ignored only at the top level
rolez: {}
`
	_, err := Parse([]byte(data), "", nil)
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Parse = %v, want Problems", err)
	}
	tests := []struct {
		key, msg string
		line     int
	}{
		{"http.listn", "unknown key; did you mean listen?", 2},
		{"http.Listen", "unknown key; did you mean listen?", 3},
		{"providers.p.signature.tolrance", "unknown key; did you mean tolerance?", 7},
		{"providers.p.bogus", "unknown key", 8},
		{"providers.p.x-note", "unknown key", 9},
		{"rolez", "unknown key; did you mean roles?", 10},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			p := wantProblem(t, ps, tt.key, tt.msg, false)
			if p.Line != tt.line {
				t.Errorf("line = %d, want %d", p.Line, tt.line)
			}
		})
	}
	if len(ps) != len(tests) {
		t.Errorf("got %d problems, want %d:\n%v", len(ps), len(tests), ps)
	}
	if p, _ := findProblem(ps, "providers.p.bogus", ""); strings.Contains(p.Msg, "did you mean") {
		t.Errorf("suggestion for a key far from any: %s", p)
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, data, key, msg string
	}{
		{"int", "consumer: {workers: many}", "consumer.workers", `want a whole number, got "many"`},
		{"float int", "consumer: {workers: 1.5}", "consumer.workers", "want a whole number"},
		{"duration without unit", "dedup: {horizon: 96}", "dedup.horizon", `want a duration like 30s, 5m, 96h or 30d, got "96"`},
		{"size", "http: {max_body_bytes: 1.5B}", "http.max_body_bytes", "not a whole number of bytes"},
		{"size unit", "http: {max_body_bytes: 1M}", "http.max_body_bytes", "want a size like 1048576, 512MB or 1GiB"},
		{"bool", "roles: {gateway: maybe}", "roles.gateway", `want true or false, got "maybe"`},
		{"mapping wanted", "http: [a, b]", "http", "want a mapping (key: value), got a list"},
		{"mapping wanted for providers", "providers: grantsgov", "providers", "want a mapping (key: value), got a single value"},
		{"list wanted", "consumer: {backoff: 1s}", "consumer.backoff", "want a list, got a single value"},
		{"scalar wanted", "http: {listen: {a: b}}", "http.listen", "want a single value, got a mapping"},
		{"scalar wanted in a list", "providers: {p: {signature: {secrets: [[a]]}}}", "providers.p.signature.secrets[0]", "want a single value, got a list"},
		{"null list entry", "providers: {p: {event_id: [~]}}", "providers.p.event_id[0]", "empty list entry"},
		{"duplicate key", "http:\n  listen: a\n  listen: b\n", "http.listen", "key given twice (first on line 2)"},
		{"duplicate provider", "providers:\n  p: {}\n  p: {}\n", "providers.p", "key given twice"},
		{"non-string key", "http: {[a]: b}", "http", "keys must be plain strings"},
		{"bad merge", "http: {<<: 1}", "http", "merge key (<<) wants a mapping"},
		{"top level", "[1, 2]", "", "want a mapping (key: value), got a list"},
		{"invalid yaml", "http: [", "", "invalid YAML: "},
		{"tab indent", "http:\n\tlisten: x\n", "", "invalid YAML: "},
		{"two documents", "http: {}\n---\nhttp: {}\n", "", "want one YAML document"},
		{"unknown alias", "http: *nope", "", "invalid YAML"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.data), "", nil)
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("Parse = %+v, %v; want Problems", c, err)
			}
			wantProblem(t, ps, tt.key, tt.msg, false)
		})
	}
}

func TestParseCollectsEveryProblem(t *testing.T) {
	data := `
http: {listn: x, max_body_bytes: lots}
consumer: {workers: "${W}"}
providers: {p: {signature: {secrets: ["${S}"]}}}
`
	_, err := Parse([]byte(data), "", nil)
	var ps Problems
	// The missing scheme is among them: an unreadable secret hides only
	// what checks the secrets (review 9; it hid the whole signature).
	if !errors.As(err, &ps) || len(ps) != 5 {
		t.Fatalf("Parse = %v; want 5 problems", err)
	}
	wantProblem(t, ps, "providers.p.signature.scheme", "required", false)
	if got := strings.Count(err.Error(), "\n"); got != 4 {
		t.Errorf("Error() has %d newlines, want one line per problem:\n%v", got, err)
	}
}

func TestMergeKeys(t *testing.T) {
	c := mustParse(t, `
x-base: &base
  signature: { scheme: stripe, secrets: [base] }
  subject: "json:/base"
  type: "json:/type"
x-more: &more
  subject: "json:/more"
  occurred_at: "json:/more_at"
providers:
  a:
    <<: *base
    subject: "json:/own"
  b:
    <<: [*base, *more]
  c: *base
`, nil)
	a, b, cc := c.Providers["a"], c.Providers["b"], c.Providers["c"]
	tests := []struct{ name, got, want string }{
		{"own key overrides merged", a.Subject, "json:/own"},
		{"merged key kept", a.Type, "json:/type"},
		{"first merged wins", b.Subject, "json:/base"},
		{"later merged fills gaps", b.OccurredAt, "json:/more_at"},
		{"alias as a whole", cc.Signature.Secrets[0].Reveal(), "base"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

// TestAliasCycle checks that self-referencing anchors end in problems, not
// in a loop.
func TestAliasCycle(t *testing.T) {
	for _, data := range []string{
		"providers: &p {x: *p}",
		"http: &h {<<: *h}",
		"consumer: {backoff: &b [*b]}",
	} {
		if _, err := Parse([]byte(data), "", nil); err == nil {
			t.Errorf("Parse(%q) = nil error, want problems", data)
		}
	}
}

// TestMergeBomb checks that merge keys multiplying a mapping many times
// over are cut off rather than expanded exponentially.
func TestMergeBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("x-l0: &l0 {listen: x}\n")
	for i := 1; i <= 12; i++ {
		fmt.Fprintf(&b, "x-l%d: &l%d {<<: [%s]}\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", "))
	}
	b.WriteString("http: {<<: *l12}\n")
	_, err := Parse([]byte(b.String()), "", nil)
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Parse = %v, want Problems", err)
	}
	wantProblem(t, ps, "http", "bring in more than 10000 keys", false)
	if ps = withoutNoProviders(ps); len(ps) != 1 {
		t.Errorf("got %d problems, want 1:\n%v", len(ps), ps)
	}
}

// Mappings that hold nothing but merge keys bring in no pairs; their
// expansion still counts against the limit, or 30 levels of two would be
// 2^30 visits (minutes) before the limit noticed anything.
func TestMergeOnlyMappingsCount(t *testing.T) {
	var b strings.Builder
	b.WriteString("x-0: &a0 {}\n")
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, "x-%d: &a%d {<<: [*a%d, *a%d]}\n", i, i, i-1, i-1)
	}
	b.WriteString("providers: {<<: *a30}\n")
	_, err := Parse([]byte(b.String()), "", nil)
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Parse = %v, want Problems", err)
	}
	wantProblem(t, ps, "providers", "bring in more than 10000 keys", false)
}

// An unset variable does not hide the rest of the file (config check in CI,
// without the real secrets), and what follows from the value it left out
// is not reported a second time.
func TestUnsetVariableDoesNotHideOtherProblems(t *testing.T) {
	data := `
dedup: {horizon: 96h, window: 120h}
providers:
  p1:
    signature: {scheme: standard-webhooks, secrets: ["${UNSET_SECRET}"]}
    fallback: maybe
`
	_, err := Parse([]byte(data), "", nil)
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Parse = %v; want Problems", err)
	}
	var keys []string
	for _, p := range ps {
		keys = append(keys, p.Key)
	}
	want := []string{"providers.p1.signature.secrets[0]", "dedup.window", "providers.p1.fallback"}
	for _, k := range want {
		if !slices.Contains(keys, k) {
			t.Errorf("no problem for %s in:\n%v", k, err)
		}
	}
	if len(ps) != len(want) {
		t.Errorf("%d problems, want %d (the unset secret once):\n%v", len(ps), len(want), err)
	}
}

// withoutNoProviders leaves out the warning a config without providers
// gets (it comes with every other problem since config check reports
// warnings beside errors).
func withoutNoProviders(ps Problems) Problems {
	var out Problems
	for _, p := range ps {
		if !(p.Warning && p.Key == "providers") {
			out = append(out, p)
		}
	}
	return out
}

// What only follows from a value that could not be read is not reported:
// the checks would judge its default, not the file (each of these configs
// passes once its one problem is fixed).
func TestNoFollowOnProblems(t *testing.T) {
	for _, tt := range []struct{ name, data, want string }{
		{"replicas without the unset url", `nats: {url: "${NATS_URL}", replicas: 3}`, "nats.url"},
		{"window against an unreadable horizon", `dedup: {horizon: 200hours, window: 120h}`, "dedup.horizon"},
		{"max_age against an unset horizon", "dedup: {horizon: \"${HORIZON}\", window: 1m}\nretention: {webhooks: {max_age: 48h}, grants: {max_age: 48h}}", "dedup.horizon"},
		{"a misspelt signature", `providers: {gg: {signatur: {scheme: standard-webhooks, secrets: [whsec_aG9va2dhdGUtY29uZmlnLXRlc3Qta2V5]}}}`, "providers.gg.signatur"},
		{"ordering against an unset subject", `providers: {gg: {signature: {scheme: standard-webhooks, secrets: [whsec_aG9va2dhdGUtY29uZmlnLXRlc3Qta2V5]}, subject: "${SUBJ}", occurred_at: "json:/at", ordering: watermark}}`, "providers.gg.subject"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.data), "", nil)
			var ps Problems
			if errors.As(err, &ps) {
				ps = withoutNoProviders(ps)
			}
			if len(ps) != 1 || ps[0].Key != tt.want {
				t.Errorf("Parse = %v; want the one problem on %s", err, tt.want)
			}
		})
	}
}

// An unquoted secret starting with * is read as a YAML alias; the
// library's error quoted the alias name, the secret itself, and config
// check printed it.
func TestYAMLAliasErrorQuotesNoValue(t *testing.T) {
	for _, data := range []string{
		"providers:\n  p:\n    signature: { scheme: github, secrets: [*S3CRET_9f8e7d] }\n",
		"nats:\n  embedded:\n    token: *S3CRET_9f8e7d\n",
	} {
		_, err := Parse([]byte(data), t.TempDir(), envOf(nil))
		if err == nil {
			t.Fatalf("Parse accepted an alias of no anchor:\n%s", data)
		}
		if msg := err.Error(); strings.Contains(msg, "S3CRET_9f8e7d") || !strings.Contains(msg, "quote the value") {
			t.Errorf("error %q: want no value quoted, and the advice to quote it", msg)
		}
	}
}
