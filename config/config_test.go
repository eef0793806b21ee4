package config

import (
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestLoadExamplesAreValid(t *testing.T) {
	// Shopify puts the shop only in an unsigned header: the example keeps
	// it, and the warning that says so.
	// GitHub says the event's type only in an unsigned header: kept too.
	expected := map[string][][2]string{"multi.yaml": {
		{"providers.shop.account.header", "is not signed by the shopify scheme"},
		{"providers.gh.type", "is not signed by the github scheme, which signs no timestamp"},
	}}
	for _, name := range []string{"contract.yaml", "minimal.yaml", "multi.yaml"} {
		t.Run(name, func(t *testing.T) {
			c := mustLoad(t, name)
			ps := c.Check()
			for _, w := range expected[name] {
				wantProblem(t, ps, w[0], w[1], true)
				ps = slices.DeleteFunc(ps, func(p Problem) bool { return p.Key == w[0] })
			}
			if len(ps) != 0 {
				t.Errorf("Check() = \n%v\nwant no problems", ps)
			}
			if err := c.Validate(); err != nil {
				t.Errorf("Validate() = %v", err)
			}
		})
	}
}

func TestLoadContractExample(t *testing.T) {
	c := mustLoad(t, "contract.yaml")
	p, ok := c.Providers["grantsgov"]
	if !ok {
		t.Fatalf("providers = %v, want grantsgov", c.Providers)
	}
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"name", p.Name, "grantsgov"},
		{"scheme", p.Signature.Scheme, SchemeStandardWebhooks},
		{"secret", p.Signature.Secrets[0].Reveal(), testEnv["GRANTSGOV_SECRET"]},
		{"event_id", p.EventID, []string{"header:webhook-id", "json:/id"}},
		{"subject", p.Subject, "json:/grant_id"},
		{"occurred_at", p.OccurredAt, "json:/occurred_at"},
		{"type", p.Type, "json:/type"},
		{"ordering", p.Ordering, OrderingWatermark},
		{"publish", *p.Effects.Publish, "grants.{provider}.{subject}.{type}"},
		{"key_fields", p.KeyFields, []string{}},
		{"token", c.NATS.Embedded.Token.Reveal(), ""},
		{"data_dir", c.NATS.Embedded.DataDir, filepath.Join(dir, "data")},
		{"webhooks.max_bytes", c.Retention.Webhooks.MaxBytes, int64(10_000_000_000)},
		{"dlq.max_bytes", c.Retention.DLQ.MaxBytes, int64(1_000_000_000)},
		{"dlq.max_age", c.Retention.DLQ.MaxAge, 2160 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}

// TestDefaults checks every default against the contract, on a config that
// sets nothing but one provider.
func TestDefaults(t *testing.T) {
	c := mustParse(t, `
providers:
  p:
    signature: { scheme: standard-webhooks, secrets: [whsec_aG9va2dhdGUtY29uZmlnLXRlc3Qta2V5] }
`, nil)
	p := c.Providers["p"]
	tests := []struct {
		key       string
		got, want any
	}{
		{"http.listen", c.HTTP.Listen, "127.0.0.1:8080"},
		{"http.admin_listen", c.HTTP.AdminListen, ""},
		{"http.tls", c.HTTP.TLS, TLS{}},
		{"http.max_body_bytes", c.HTTP.MaxBodyBytes, int64(1048576)},
		{"http.timeouts.read_header", c.HTTP.Timeouts.ReadHeader, 5 * time.Second},
		{"http.timeouts.read", c.HTTP.Timeouts.Read, 30 * time.Second},
		{"http.timeouts.write", c.HTTP.Timeouts.Write, 30 * time.Second},
		{"http.timeouts.idle", c.HTTP.Timeouts.Idle, 120 * time.Second},
		{"http.shutdown_delay", c.HTTP.ShutdownDelay, time.Duration(0)},
		{"nats.url", c.NATS.URL, ""},
		{"nats.credentials", c.NATS.Credentials, ""},
		{"nats.replicas", c.NATS.Replicas, 1},
		{"nats.embedded.listen", c.NATS.Embedded.Listen, ""},
		{"nats.embedded.token", c.NATS.Embedded.Token.Reveal(), ""},
		{"nats.embedded.sync", c.NATS.Embedded.Sync, SyncInterval},
		{"dedup.horizon", c.Dedup.Horizon, 96 * time.Hour},
		{"dedup.window", c.Dedup.Window, 2 * time.Minute},
		{"retention.webhooks", c.Retention.Webhooks, Limits{720 * time.Hour, 10e9}},
		{"retention.grants", c.Retention.Grants, Limits{720 * time.Hour, 10e9}},
		{"retention.dlq", c.Retention.DLQ, Limits{2160 * time.Hour, 1e9}},
		{"retention.audit", c.Retention.Audit, Limits{8760 * time.Hour, 10e9}},
		{"consumer.workers", c.Consumer.Workers, 8},
		{"consumer.max_deliver", c.Consumer.MaxDeliver, 8},
		{"consumer.backoff", c.Consumer.Backoff, []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute}},
		{"roles", c.Roles, Roles{Gateway: true, Consumer: true}},
		{"log.level", c.Log.Level, "info"},
		{"log.level as slog", c.Log.SlogLevel(), slog.LevelInfo},
		{"name", p.Name, "p"},
		{"signature.tolerance", p.Signature.Tolerance, 5 * time.Minute},
		{"signature.header", p.Signature.Header, ""},
		{"account", p.Account, Account{Value: "default"}},
		{"event_id", p.EventID, []string{"header:webhook-id"}},
		{"fallback", p.Fallback, FallbackDigest},
		{"key_fields", p.KeyFields, []string(nil)},
		{"ordering", p.Ordering, OrderingNone},
		{"effects.publish", *p.Effects.Publish, DefaultPublish},
		{"effects.forward", p.Effects.Forward, Forward{Timeout: 10 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("%s = %v, want %v", tt.key, tt.got, tt.want)
			}
		})
	}
	if dd := c.NATS.Embedded.DataDir; !filepath.IsAbs(dd) || filepath.Base(dd) != "data" {
		t.Errorf("data_dir = %q, want an absolute path ending in data", dd)
	}
}

func TestDefaultEventIDPerScheme(t *testing.T) {
	tests := []struct {
		scheme string
		want   []string
	}{
		{SchemeStandardWebhooks, []string{"header:webhook-id"}},
		{SchemeStripe, []string{"json:/id"}},
		{SchemeHMACSHA256, []string{"json:/id"}},
		{SchemeGitHub, []string{}},
		{SchemeShopify, []string{}},
		{"rot13", nil},
	}
	for _, tt := range tests {
		t.Run(tt.scheme, func(t *testing.T) {
			c := mustParse(t, "providers: {p: {signature: {scheme: "+tt.scheme+", secrets: [x]}}}", nil)
			if got := c.Providers["p"].EventID; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("event_id = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestDefaultOrdering(t *testing.T) {
	tests := []struct {
		name, fields, want string
	}{
		{"both set", `subject: "json:/s", occurred_at: "json:/t"`, OrderingWatermark},
		{"subject only", `subject: "json:/s"`, OrderingNone},
		{"occurred_at only", `occurred_at: "json:/t"`, OrderingNone},
		{"neither", ``, OrderingNone},
		{"explicit none", `subject: "json:/s", occurred_at: "json:/t", ordering: none`, OrderingNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, "providers: {p: {signature: {scheme: stripe, secrets: [x]}, "+tt.fields+"}}", nil)
			if got := c.Providers["p"].Ordering; got != tt.want {
				t.Errorf("ordering = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestExplicitValuesKept checks that a key given explicitly is not
// overwritten by its default, even when zero or empty.
func TestExplicitValuesKept(t *testing.T) {
	c := mustParse(t, `
http: { max_body_bytes: 0, timeouts: { read: 0s } }
nats: { replicas: 0 }
dedup: { window: 0s }
consumer: { workers: 0, max_deliver: 0, backoff: [] }
roles: { gateway: false }
providers:
  p:
    signature: { scheme: stripe, secrets: [x], tolerance: 0s }
    event_id: []
    effects: { publish: "", forward: { timeout: 0s } }
`, nil)
	p := c.Providers["p"]
	tests := []struct {
		key       string
		got, want any
	}{
		{"http.max_body_bytes", c.HTTP.MaxBodyBytes, int64(0)},
		{"http.timeouts.read", c.HTTP.Timeouts.Read, time.Duration(0)},
		{"http.timeouts.write (unset)", c.HTTP.Timeouts.Write, 30 * time.Second},
		{"nats.replicas", c.NATS.Replicas, 0},
		{"dedup.window", c.Dedup.Window, time.Duration(0)},
		{"consumer.workers", c.Consumer.Workers, 0},
		{"consumer.max_deliver", c.Consumer.MaxDeliver, 0},
		{"consumer.backoff", c.Consumer.Backoff, []time.Duration{}},
		{"roles.gateway", c.Roles.Gateway, false},
		{"roles.consumer (unset)", c.Roles.Consumer, true},
		{"tolerance", p.Signature.Tolerance, time.Duration(0)},
		{"event_id", p.EventID, []string{}},
		{"publish", *p.Effects.Publish, ""},
		{"forward.timeout", p.Effects.Forward.Timeout, time.Duration(0)},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("%s = %#v, want %#v", tt.key, tt.got, tt.want)
			}
		})
	}
	if tmpl, on := p.Effects.PublishTemplate(); on || tmpl != "" {
		t.Errorf("PublishTemplate() = %q, %v; want \"\", false", tmpl, on)
	}
}

// TestEmptyStringsDefault checks that "" counts as unset for strings with
// a default, and null for everything.
func TestEmptyStringsDefault(t *testing.T) {
	c := mustParse(t, `
http: { listen: "", max_body_bytes: ~ }
nats: { embedded: { data_dir: "", sync: "" } }
consumer: { backoff: }
providers:
  p:
    signature: { scheme: github, secrets: [x] }
    account: { value: "" }
    fallback: ""
    ordering: ""
    effects: { publish: ~ }
`, nil)
	p := c.Providers["p"]
	if c.HTTP.Listen != defaultListen || c.HTTP.MaxBodyBytes != defaultMaxBodyBytes ||
		c.NATS.Embedded.Sync != SyncInterval || filepath.Base(c.NATS.Embedded.DataDir) != "data" ||
		len(c.Consumer.Backoff) != 5 || p.Account.Value != "default" || p.Fallback != FallbackDigest ||
		p.Ordering != OrderingNone || *p.Effects.Publish != DefaultPublish {
		t.Errorf("defaults not applied to empty or null values: %+v", c)
	}
}

func TestEmptyFile(t *testing.T) {
	for _, data := range []string{"", "# only a comment\n", "---\n", "~\n"} {
		c, err := Parse([]byte(data), "", nil)
		if err != nil {
			t.Fatalf("Parse(%q): %v", data, err)
		}
		if c.HTTP.Listen != defaultListen || c.Providers == nil {
			t.Errorf("Parse(%q): defaults not set: %+v", data, c)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("Parse(%q).Validate() = %v, want nil (warnings only)", data, err)
		}
		wantProblem(t, c.Check(), "providers", "no providers configured", true)
	}
}

func TestRelativePaths(t *testing.T) {
	dir := t.TempDir()
	c := mustParseIn(t, dir, `
http: { tls: { cert: certs/c.pem, key: /etc/k.pem } }
nats: { credentials: ../x.creds, embedded: { data_dir: state } }
`)
	tests := []struct{ key, got, want string }{
		{"tls.cert", c.HTTP.TLS.Cert, filepath.Join(dir, "certs/c.pem")},
		{"tls.key", c.HTTP.TLS.Key, "/etc/k.pem"},
		{"credentials", c.NATS.Credentials, filepath.Join(filepath.Dir(dir), "x.creds")},
		{"data_dir", c.NATS.Embedded.DataDir, filepath.Join(dir, "state")},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.key, tt.got, tt.want)
		}
	}
	// Without a base directory paths stay as written.
	c, err := Parse([]byte("nats: {embedded: {data_dir: state}}"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.NATS.Embedded.DataDir != "state" {
		t.Errorf("data_dir = %q, want state", c.NATS.Embedded.DataDir)
	}
}

func mustParseIn(t *testing.T, dir, data string) *Config {
	t.Helper()
	c, err := Parse([]byte(data), dir, nil)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

func TestLoadResolvesAgainstFileDir(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hookgate.yaml")
	if err := os.WriteFile(path, []byte("nats: {embedded: {data_dir: d}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "d"); c.NATS.Embedded.DataDir != want {
		t.Errorf("data_dir = %q, want %q", c.NATS.Embedded.DataDir, want)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), nil)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want an error wrapping os.ErrNotExist", err)
	}
}

func TestMultiExample(t *testing.T) {
	c := mustLoad(t, "multi.yaml")
	fluxx, gh, gg, stripe := c.Providers["fluxx"], c.Providers["gh"], c.Providers["grantsgov"], c.Providers["stripe"]
	tests := []struct {
		name      string
		got, want any
	}{
		{"env default in a number", c.Consumer.Workers, 16},
		{"days", c.Dedup.Horizon, 7 * 24 * time.Hour},
		{"days and hours", c.Retention.Audit.MaxAge, 36 * time.Hour},
		{"binary size", c.Retention.Webhooks.MaxBytes, int64(20 << 30)},
		{"MiB", c.HTTP.MaxBodyBytes, int64(2 << 20)},
		{"roles", c.Roles, Roles{Gateway: true, Consumer: false}},
		{"nats urls", c.NATS.URLs(), []string{"nats://n1:4222", "nats://n2:4222", "nats://n3:4222"}},
		{"merged subject", fluxx.Subject, "json:/grant_id"},
		{"merged type", gg.Type, "json:/type"},
		{"own key next to a merge", fluxx.Ordering, OrderingNone},
		{"merge default ordering", gg.Ordering, OrderingWatermark},
		{"file secret", fluxx.Signature.Secrets[0].Reveal(), "fluxx-hmac-secret"},
		{"forward file secret", gg.Effects.Forward.Secret.Reveal(), "whsec_Zmx1eHgtZm9yd2FyZC1zZWNyZXQ="},
		{"rotation", len(gg.Signature.Secrets), 2},
		{"$$", stripe.Signature.Secrets[0].Reveal(), "whsec_stripe-$-literal"},
		{"env default secret", gh.Signature.Secrets[0].Reveal(), "dev-secret-of-the-config-tests"},
		{"publish off", *stripe.Effects.Publish, ""},
		{"key_fields", fluxx.KeyFields, []string{"/grant_id", "/status"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}
	if names := slices.Sorted(maps.Keys(c.Providers)); !slices.Equal(names, []string{"fluxx", "gh", "grantsgov", "shop", "stripe"}) {
		t.Errorf("providers = %v", names)
	}
}

func TestPublishTemplateNil(t *testing.T) {
	if tmpl, on := (Effects{}).PublishTemplate(); tmpl != DefaultPublish || !on {
		t.Errorf("PublishTemplate() = %q, %v; want the default, true", tmpl, on)
	}
}

func TestSchemesIsACopy(t *testing.T) {
	s := Schemes()
	s[0] = "changed"
	if Schemes()[0] != SchemeStandardWebhooks {
		t.Error("Schemes() shares its backing array")
	}
}

func TestLogSlogLevel(t *testing.T) {
	for level, want := range map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError} {
		if got := (Log{Level: level}).SlogLevel(); got != want {
			t.Errorf("%s -> %v, want %v", level, got, want)
		}
	}
}

// The contract's default token is "${HOOKGATE_NATS_TOKEN:-}": the variable
// counts without the line in the file; a token in the file wins.
func TestTokenFromEnvironmentByDefault(t *testing.T) {
	env := map[string]string{"HOOKGATE_NATS_TOKEN": "from-env"}
	const provider = "providers:\n  p:\n    signature: { scheme: github, secrets: [s] }\n"
	if got := mustParse(t, provider, env).NATS.Embedded.Token.Reveal(); got != "from-env" {
		t.Errorf("no token in the file: %q, want HOOKGATE_NATS_TOKEN's", got)
	}
	if got := mustParse(t, "nats: { embedded: { token: in-file } }\n"+provider, env).NATS.Embedded.Token.Reveal(); got != "in-file" {
		t.Errorf("token in the file: %q, want in-file", got)
	}
	if got := mustParse(t, provider, nil).NATS.Embedded.Token.Reveal(); got != "" {
		t.Errorf("neither: %q, want empty (generated at start)", got)
	}
}
