package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// baseYAML is valid and has one provider, p, for the cases to break.
const baseYAML = `
providers:
  p:
    signature: { scheme: standard-webhooks, secrets: [whsec_aG9va2dhdGUtY29uZmlnLXRlc3Qta2V5] }
    subject: "json:/grant_id"
    occurred_at: "json:/occurred_at"
`

func TestValidateBaseIsClean(t *testing.T) {
	c := mustParse(t, baseYAML, nil)
	if ps := c.Check(); len(ps) != 0 {
		t.Fatalf("Check() = \n%v\nwant nothing", ps)
	}
}

// The short-window warning is about the embedded server's key index: no
// warning where none runs (a cluster, or a consumer-only serve).
func TestShortWindowWarnsOnlyWhereAKeyIndexRuns(t *testing.T) {
	for _, tt := range []struct {
		name string
		mut  func(c *Config)
	}{
		{"cluster", func(c *Config) { c.NATS.URL = "nats://h:4222" }},
		{"consumer only", func(c *Config) { c.Roles.Gateway = false }},
		{"window of 10s", func(c *Config) { c.Dedup.Window = 10 * time.Second }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, baseYAML, nil)
			c.Dedup.Window = 4 * time.Second
			tt.mut(c)
			if p, ok := findProblem(c.Check(), "dedup.window", ""); ok {
				t.Fatalf("unexpected %s", p)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	someFile := filepath.Join(dir, "file")
	if err := os.WriteFile(someFile, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	p := func(f func(p *Provider)) func(c *Config) {
		return func(c *Config) {
			pr := c.Providers["p"]
			f(&pr)
			c.Providers["p"] = pr
		}
	}
	tests := []struct {
		name    string
		mut     func(c *Config)
		key     string
		msg     string
		warning bool
	}{
		// rate_limit
		{"rate negative", p(func(p *Provider) { p.RateLimit.PerSecond = -1 }), "providers.p.rate_limit.per_second", "must be 0 (off) or more", false},
		{"burst negative", p(func(p *Provider) { p.RateLimit = RateLimit{PerSecond: 5, Burst: -2} }), "providers.p.rate_limit.burst", "must be 0", false},
		{"burst without rate", p(func(p *Provider) { p.RateLimit.Burst = 3 }), "providers.p.rate_limit.burst", "ignored", true},
		// http
		{"listen empty", func(c *Config) { c.HTTP.Listen = "" }, "http.listen", "required", false},
		{"listen no port", func(c *Config) { c.HTTP.Listen = "8080" }, "http.listen", `want host:port like 127.0.0.1:8080, got "8080"`, false},
		{"listen bad port", func(c *Config) { c.HTTP.Listen = "localhost:99999" }, "http.listen", `port "99999" is not a number from 0 to 65535`, false},
		{"listen named port", func(c *Config) { c.HTTP.Listen = "localhost:http" }, "http.listen", "not a number", false},
		{"admin_listen", func(c *Config) { c.HTTP.AdminListen = "admin" }, "http.admin_listen", "want host:port", false},
		{"admin_listen same", func(c *Config) { c.HTTP.AdminListen = c.HTTP.Listen }, "http.admin_listen", "same address as http.listen", false},
		{"tls cert only", func(c *Config) { c.HTTP.TLS.Cert = someFile }, "http.tls.key", "required when http.tls.cert is set", false},
		{"tls key only", func(c *Config) { c.HTTP.TLS.Key = someFile }, "http.tls.cert", "required when http.tls.key is set", false},
		{"tls cert missing", func(c *Config) { c.HTTP.TLS = TLS{Cert: missing, Key: someFile} }, "http.tls.cert", "no such file", false},
		{"tls key missing", func(c *Config) { c.HTTP.TLS = TLS{Cert: someFile, Key: missing} }, "http.tls.key", "no such file", false},
		{"tls cert directory", func(c *Config) { c.HTTP.TLS = TLS{Cert: dir, Key: someFile} }, "http.tls.cert", "is a directory", false},
		{"max_body_bytes zero", func(c *Config) { c.HTTP.MaxBodyBytes = 0 }, "http.max_body_bytes", "must be > 0", false},
		{"max_body_bytes negative", func(c *Config) { c.HTTP.MaxBodyBytes = -1 }, "http.max_body_bytes", "must be > 0", false},
		{"max_body_bytes too big", func(c *Config) { c.HTTP.MaxBodyBytes = maxBodyLimit + 1 }, "http.max_body_bytes", "is above the limit of 32696 KiB", false},
		{"read_header", func(c *Config) { c.HTTP.Timeouts.ReadHeader = 0 }, "http.timeouts.read_header", "must be > 0", false},
		{"read", func(c *Config) { c.HTTP.Timeouts.Read = -time.Second }, "http.timeouts.read", "must be > 0", false},
		{"shutdown_delay negative", func(c *Config) { c.HTTP.ShutdownDelay = -time.Second }, "http.shutdown_delay", "must be >= 0", false},
		{"shutdown_delay too long", func(c *Config) { c.HTTP.ShutdownDelay = 2 * time.Minute }, "http.shutdown_delay", "above 1m0s", false},
		{"write", func(c *Config) { c.HTTP.Timeouts.Write = 0 }, "http.timeouts.write", "must be > 0", false},
		{"idle", func(c *Config) { c.HTTP.Timeouts.Idle = 0 }, "http.timeouts.idle", "must be > 0", false},

		// nats
		{"url scheme", func(c *Config) { c.NATS.URL = "http://h:4222" }, "nats.url", "entry 1 is not a URL like nats://host:4222", false},
		{"url second entry", func(c *Config) { c.NATS.URL = "nats://h:4222,h2" }, "nats.url", "entry 2 is not a URL", false},
		{"url empty entry", func(c *Config) { c.NATS.URL = "nats://h:4222," }, "nats.url", "entry 2 is not a URL", false},
		{"credentials missing", func(c *Config) { c.NATS.URL, c.NATS.Credentials = "nats://h:4222", missing }, "nats.credentials", "no such file", false},
		{"credentials without url", func(c *Config) { c.NATS.Credentials = someFile }, "nats.credentials", "ignored: it is for an external cluster", true},
		{"replicas zero", func(c *Config) { c.NATS.Replicas = 0 }, "nats.replicas", "must be from 1 to 5, got 0", false},
		{"replicas six", func(c *Config) { c.NATS.URL, c.NATS.Replicas = "nats://h:4222", 6 }, "nats.replicas", "must be from 1 to 5, got 6", false},
		{"replicas embedded", func(c *Config) { c.NATS.Replicas = 3 }, "nats.replicas", "3 needs nats.url (a cluster)", false},
		{"sync", func(c *Config) { c.NATS.Embedded.Sync = "sometimes" }, "nats.embedded.sync", `unknown sync "sometimes"; want interval or always`, false},
		{"data_dir", func(c *Config) { c.NATS.Embedded.DataDir = "" }, "nats.embedded.data_dir", "required", false},
		{"embedded listen", func(c *Config) { c.NATS.Embedded.Listen = "4222" }, "nats.embedded.listen", "want host:port", false},
		{"embedded listen with url", func(c *Config) { c.NATS.URL, c.NATS.Embedded.Listen = "nats://h:4222", "127.0.0.1:4222" }, "nats.embedded.listen", "ignored: nats.url is set", true},
		{"write shorter than read", func(c *Config) { c.HTTP.Timeouts.Write = 5 * time.Second }, "http.timeouts.write", "5s is shorter than http.timeouts.read (30s): a body arriving more than 3.75s after its headers gets 408", true},
		{"write under a second", func(c *Config) { c.HTTP.Timeouts.Write = 500 * time.Millisecond }, "http.timeouts.write", "500ms is too short: the gateway publishes and answers within it; want at least 1s", false},
		{"sync always with url", func(c *Config) { c.NATS.URL, c.NATS.Embedded.Sync = "nats://h:4222", SyncAlways }, "nats.embedded.sync", "ignored: nats.url is set", true},
		{"url port out of range", func(c *Config) { c.NATS.URL = "nats://h:4222,nats://tok@127.0.0.1:99999" }, "nats.url", "entry 2: port is not a number from 1 to 65535", false},
		{"url port zero", func(c *Config) { c.NATS.URL = "nats://h:0" }, "nats.url", "entry 1: port is not a number from 1 to 65535", false},
		{"embedded listen every address", func(c *Config) { c.NATS.Embedded.Listen = "0.0.0.0:4222" }, "nats.embedded.listen", "0.0.0.0:4222 is not a loopback address: whoever reaches it with the token", true},
		{"embedded listen lan", func(c *Config) { c.NATS.Embedded.Listen = "10.0.0.5:4222" }, "nats.embedded.listen", "is not a loopback address", true},
		{"tolerance past horizon", func(c *Config) {
			c.Dedup.Horizon, c.Dedup.Window = 5*time.Second, time.Second
		}, "providers.p.signature.tolerance", "5m exceeds dedup.horizon (5s): a delivery captured and re-sent after the horizon", true},
		{"whitespace secret", func(c *Config) {
			pr := c.Providers["p"]
			pr.Signature = Signature{Scheme: SchemeGitHub, Secrets: []Secret{"   "}}
			pr.EventID = []string{"json:/id"}
			c.Providers["p"] = pr
		}, "providers.p.signature.secrets[0]", "only whitespace", true},

		// dedup
		{"horizon", func(c *Config) { c.Dedup.Horizon = 0 }, "dedup.horizon", "must be > 0", false},
		{"window short", func(c *Config) { c.Dedup.Window = 500 * time.Millisecond }, "dedup.window", "must be at least 1s", false},
		{"window short for the key index", func(c *Config) { c.Dedup.Window = 4 * time.Second }, "dedup.window", "4s: on the embedded server the gateway answers 503 to new events whenever its key index is about half of it (2s) behind", true},
		{"window above horizon", func(c *Config) { c.Dedup.Window = 100 * time.Hour }, "dedup.window", "100h exceeds dedup.horizon (96h); want window <= horizon", false},

		// retention
		{"webhooks max_age", func(c *Config) { c.Retention.Webhooks.MaxAge = 0 }, "retention.webhooks.max_age", "must be > 0", false},
		{"grants max_age", func(c *Config) { c.Retention.Grants.MaxAge = 0 }, "retention.grants.max_age", "must be > 0", false},
		{"dlq max_age", func(c *Config) { c.Retention.DLQ.MaxAge = -1 }, "retention.dlq.max_age", "must be > 0", false},
		{"audit max_age", func(c *Config) { c.Retention.Audit.MaxAge = 0 }, "retention.audit.max_age", "must be > 0", false},
		{"webhooks max_bytes", func(c *Config) { c.Retention.Webhooks.MaxBytes = 0 }, "retention.webhooks.max_bytes", "must be > 0", false},
		{"audit max_bytes", func(c *Config) { c.Retention.Audit.MaxBytes = -5 }, "retention.audit.max_bytes", "must be > 0", false},
		{"audit max_bytes tiny", func(c *Config) { c.Retention.Audit.MaxBytes = 2048 }, "retention.audit.max_bytes", "under 1 MiB", true},
		{"webhooks shorter than horizon", func(c *Config) { c.Retention.Webhooks.MaxAge = 24 * time.Hour }, "retention.webhooks.max_age", "24h is shorter than dedup.horizon (96h)", false},
		{"grants shorter than horizon", func(c *Config) { c.Retention.Grants.MaxAge = 24 * time.Hour }, "retention.grants.max_age", "24h is shorter than dedup.horizon (96h); GRANTS keeps applied keys", false},
		{"dlq shorter than window", func(c *Config) { c.Retention.DLQ.MaxAge = time.Minute }, "retention.dlq.max_age", "1m is shorter than dedup.window (2m)", false},
		{"audit shorter than window", func(c *Config) { c.Retention.Audit.MaxAge = time.Minute }, "retention.audit.max_age", "1m is shorter than dedup.window (2m)", false},
		{"dlq smaller than a body", func(c *Config) { c.Retention.DLQ.MaxBytes = 1000 }, "retention.dlq.max_bytes", "1000 is smaller than http.max_body_bytes (1048576): one event would not fit", false},
		{"grants smaller than a body", func(c *Config) { c.Retention.Grants.MaxBytes = 1000 }, "retention.grants.max_bytes", "one event would not fit", false},
		{"grants without room for headers", func(c *Config) { c.Retention.Grants.MaxBytes = c.HTTP.MaxBodyBytes }, "retention.grants.max_bytes", "1048576 leaves less than 64 KiB over http.max_body_bytes (1048576) for an event's headers", true},

		// consumer, roles
		{"workers", func(c *Config) { c.Consumer.Workers = 0 }, "consumer.workers", "must be at least 1, got 0", false},
		{"max_deliver", func(c *Config) { c.Consumer.MaxDeliver = -1 }, "consumer.max_deliver", "must be at least 1 (it counts the first attempt), got -1", false},
		{"backoff empty", func(c *Config) { c.Consumer.Backoff = nil }, "consumer.backoff", "must list at least one delay", false},
		{"backoff entry", func(c *Config) { c.Consumer.Backoff = []time.Duration{time.Second, 0} }, "consumer.backoff[1]", "must be > 0", false},
		{"no roles", func(c *Config) { c.Roles = Roles{} }, "roles", "gateway and consumer are both false: nothing would run", false},
		{"log level", func(c *Config) { c.Log.Level = "verbose" }, "log.level", `"verbose" is not a level: debug, info, warn or error`, false},

		// providers
		{"no providers", func(c *Config) { c.Providers = nil }, "providers", "no providers configured", true},
		{"provider name", func(c *Config) { c.Providers["Grants.Gov"] = c.Providers["p"] }, "providers.Grants.Gov", "provider name must match [a-z0-9_-]+", false},
		{"scheme missing", p(func(p *Provider) { p.Signature.Scheme = "" }), "providers.p.signature.scheme", "required; want one of standard-webhooks, stripe, github, shopify, hmac-sha256", false},
		{"scheme unknown", p(func(p *Provider) { p.Signature.Scheme = "rot13" }), "providers.p.signature.scheme", `unknown scheme "rot13"; want one of standard-webhooks, stripe, github, shopify, hmac-sha256`, false},
		{"no secrets", p(func(p *Provider) { p.Signature.Secrets = nil }), "providers.p.signature.secrets", "at least one secret is required", false},
		{"empty secret", p(func(p *Provider) { p.Signature.Secrets = append(p.Signature.Secrets, "") }), "providers.p.signature.secrets[1]", "empty secret", false},
		{"whsec not base64", p(func(p *Provider) { p.Signature.Secrets = []Secret{"whsec_not base64!"} }), "providers.p.signature.secrets[0]", "not base64 after the optional whsec_ prefix", false},
		{"whsec empty after prefix", p(func(p *Provider) { p.Signature.Secrets = []Secret{"whsec_"} }), "providers.p.signature.secrets[0]", "not base64", false},
		{"same secret twice", p(func(p *Provider) { p.Signature.Secrets = append(p.Signature.Secrets, p.Signature.Secrets[0]) }), "providers.p.signature.secrets[1]", "same secret as secrets[0]", true},
		{"tolerance standard-webhooks", p(func(p *Provider) { p.Signature.Tolerance = 0 }), "providers.p.signature.tolerance", "must be > 0: the standard-webhooks scheme signs a timestamp", false},
		{"tolerance stripe", p(func(p *Provider) { p.Signature.Scheme, p.Signature.Tolerance = SchemeStripe, -time.Second }), "providers.p.signature.tolerance", "must be > 0: the stripe scheme", false},
		{"hmac without header", p(func(p *Provider) { p.Signature.Scheme = SchemeHMACSHA256 }), "providers.p.signature.header", "required with hmac-sha256", false},
		{"hmac bad header", p(func(p *Provider) { p.Signature.Scheme, p.Signature.Header = SchemeHMACSHA256, "X Sig" }), "providers.p.signature.header", `header name "X Sig" has a character not allowed`, false},
		{"account from an unsigned header", p(func(p *Provider) { p.Account.Header = "X-Tenant" }), "providers.p.account.header", "header X-Tenant is not signed by the standard-webhooks scheme", true},
		{"header on another scheme", p(func(p *Provider) { p.Signature.Header = "X-Sig" }), "providers.p.signature.header", "only hmac-sha256 reads it, the scheme is standard-webhooks: remove it", false},
		{"tolerance negative", p(func(p *Provider) { p.Signature.Scheme, p.Signature.Tolerance = SchemeGitHub, -time.Minute }), "providers.p.signature.tolerance", "must not be negative", false},
		{"short secret", p(func(p *Provider) { p.Signature.Scheme, p.Signature.Secrets = SchemeGitHub, []Secret{"s3cret"} }), "providers.p.signature.secrets[0]", "only 6 bytes: short enough to be guessed", true},
		{"short whsec key", p(func(p *Provider) { p.Signature.Secrets = []Secret{"whsec_c2VjcmV0"} }), "providers.p.signature.secrets[0]", "only 6 bytes: short enough to be guessed", true},
		{"short forward key", p(func(p *Provider) {
			p.Effects.Forward = Forward{URL: "https://h/x", Timeout: time.Second, Secrets: []Secret{"whsec_aG9va2dhdGUtY29uZmlnLXRlc3Qta2V5", "whsec_c2VjcmV0"}}
		}), "providers.p.effects.forward.secrets[1]", "only 6 bytes: short enough to be guessed", true},
		{"secret with newline", p(func(p *Provider) { p.Signature.Scheme, p.Signature.Secrets = SchemeGitHub, []Secret{"s3cret\n"} }), "providers.p.signature.secrets[0]", "ends with a line break", false},
		{"secret with CR", p(func(p *Provider) { p.Signature.Scheme, p.Signature.Secrets = SchemeStripe, []Secret{"s3cret\r"} }), "providers.p.signature.secrets[0]", "ends with a line break", false},
		{"account header", p(func(p *Provider) { p.Account.Header = "X:Tenant" }), "providers.p.account.header", "not allowed in header names", false},
		{"account json prefix", p(func(p *Provider) { p.Account.JSON = "json:/tenant" }), "providers.p.account.json", "want a bare JSON Pointer like /account_id", false},
		{"account json pointer", p(func(p *Provider) { p.Account.JSON = "tenant" }), "providers.p.account.json", `JSON Pointer "tenant" must start with /`, false},
		{"event_id kind", p(func(p *Provider) { p.EventID = []string{"body:/id"} }), "providers.p.event_id[0]", `want header:Name or json:/pointer, got "body:/id"`, false},
		{"event_id pointer", p(func(p *Provider) { p.EventID = []string{"header:webhook-id", "json:id"} }), "providers.p.event_id[1]", "must start with /", false},
		{"event_id tilde", p(func(p *Provider) { p.EventID = []string{"json:/a~2b"} }), "providers.p.event_id[0]", "~ must be followed by 0 or 1", false},
		{"event_id empty header", p(func(p *Provider) { p.EventID = []string{"header:"} }), "providers.p.event_id[0]", "empty header name", false},
		{"event_id unsigned header github", p(func(p *Provider) { p.Signature.Scheme, p.EventID = SchemeGitHub, []string{"header:X-GitHub-Delivery"} }), "providers.p.event_id[0]", "header X-GitHub-Delivery is not signed by the github scheme: a captured body re-sent under a new id would pass as a new event", true},
		{"event_id unsigned header shopify", p(func(p *Provider) {
			p.Signature.Scheme, p.EventID = SchemeShopify, []string{"json:/id", "header:X-Shopify-Event-Id"}
		}), "providers.p.event_id[1]", "header X-Shopify-Event-Id is not signed by the shopify scheme", true},
		{"event_id unsigned header standard-webhooks", p(func(p *Provider) { p.EventID = []string{"header:X-Request-Id"} }), "providers.p.event_id[0]", "not signed by the standard-webhooks scheme", true},
		{"fallback", p(func(p *Provider) { p.Fallback = "hash" }), "providers.p.fallback", `unknown fallback "hash"; want digest, fields or reject`, false},
		{"fields without key_fields", p(func(p *Provider) { p.Fallback = FallbackFields }), "providers.p.key_fields", "required with fallback: fields", false},
		{"key_fields prefix", p(func(p *Provider) { p.Fallback, p.KeyFields = FallbackFields, []string{"/a", "json:/b"} }), "providers.p.key_fields[1]", "want a bare JSON Pointer", false},
		{"key_fields ignored", p(func(p *Provider) { p.KeyFields = []string{"/a"} }), "providers.p.key_fields", "ignored: fallback is digest, not fields", true},
		{"subject", p(func(p *Provider) { p.Subject = "grant_id" }), "providers.p.subject", `want header:Name or json:/pointer, got "grant_id"`, false},
		{"occurred_at", p(func(p *Provider) { p.OccurredAt = "json:occurred_at" }), "providers.p.occurred_at", "must start with /", false},
		{"type", p(func(p *Provider) { p.Type = "header:X Event" }), "providers.p.type", "not allowed in header names", false},
		{"ordering", p(func(p *Provider) { p.Ordering = "fifo" }), "providers.p.ordering", `unknown ordering "fifo"; want watermark or none`, false},
		{"watermark without subject", p(func(p *Provider) { p.Subject = "" }), "providers.p.ordering", "watermark needs subject and occurred_at; subject not set", false},
		{"watermark without either", p(func(p *Provider) { p.Subject, p.OccurredAt = "", "" }), "providers.p.ordering", "subject and occurred_at not set", false},
		{"publish prefix", p(func(p *Provider) { p.Effects.Publish = new("events.{provider}") }), "providers.p.effects.publish", `must start with "grants." (the GRANTS stream binds grants.>)`, false},
		{"publish placeholder", p(func(p *Provider) { p.Effects.Publish = new("grants.{tenant}.{type}") }), "providers.p.effects.publish", "unknown placeholder {tenant}; want {provider}, {account}, {subject} or {type}", false},
		{"publish unbalanced", p(func(p *Provider) { p.Effects.Publish = new("grants.{provider") }), "providers.p.effects.publish", "unbalanced { or }", false},
		{"publish unbalanced close", p(func(p *Provider) { p.Effects.Publish = new("grants.provider}") }), "providers.p.effects.publish", "unbalanced { or }", false},
		{"publish empty token", p(func(p *Provider) { p.Effects.Publish = new("grants..{type}") }), "providers.p.effects.publish", "not a valid NATS subject", false},
		{"publish wildcard", p(func(p *Provider) { p.Effects.Publish = new("grants.>") }), "providers.p.effects.publish", "not a valid NATS subject", false},
		{"publish space", p(func(p *Provider) { p.Effects.Publish = new("grants.a b") }), "providers.p.effects.publish", "not a valid NATS subject", false},
		{"forward url scheme", p(func(p *Provider) { p.Effects.Forward.URL = "ftp://h/x" }), "providers.p.effects.forward.url", "want an absolute http:// or https:// URL", false},
		{"forward url relative", p(func(p *Provider) { p.Effects.Forward.URL = "/hooks" }), "providers.p.effects.forward.url", "want an absolute", false},
		{"forward url no host", p(func(p *Provider) { p.Effects.Forward.URL = "https://user:pw@/x" }), "providers.p.effects.forward.url", "want an absolute", false},
		{"forward timeout", p(func(p *Provider) { p.Effects.Forward.Timeout = 0 }), "providers.p.effects.forward.timeout", "must be > 0", false},
		{"forward secret without url", p(func(p *Provider) { p.Effects.Forward.Secret = "whsec_aG9va2dhdGUtY29uZmlnLXRlc3Qta2V5" }), "providers.p.effects.forward.secret", "ignored: forward.url is empty", true},
		{"forward secret not base64", p(func(p *Provider) {
			p.Effects.Forward = Forward{URL: "https://h/x", Timeout: time.Second, Secret: "plain words"}
		}), "providers.p.effects.forward.secret", "not base64 after the optional whsec_ prefix", false},
		{"forward secret and secrets", p(func(p *Provider) {
			p.Effects.Forward = Forward{URL: "https://h/x", Timeout: time.Second, Secret: "whsec_aG9va2dhdGUtY29uZmlnLXRlc3Qta2V5", Secrets: []Secret{"whsec_aG9va2dhdGUtY29uZmlnLXRlc3Qta2V5"}}
		}), "providers.p.effects.forward.secrets", "set secret or secrets, not both", false},
		{"forward secrets entry not base64", p(func(p *Provider) {
			p.Effects.Forward = Forward{URL: "https://h/x", Timeout: time.Second, Secrets: []Secret{"whsec_aG9va2dhdGUtY29uZmlnLXRlc3Qta2V5", "plain words"}}
		}), "providers.p.effects.forward.secrets[1]", "not base64 after the optional whsec_ prefix", false},
		{"forward secrets entry empty", p(func(p *Provider) {
			p.Effects.Forward = Forward{URL: "https://h/x", Timeout: time.Second, Secrets: []Secret{""}}
		}), "providers.p.effects.forward.secrets[0]", "empty", false},
		{"forward secrets without url", p(func(p *Provider) { p.Effects.Forward.Secrets = []Secret{"whsec_aG9va2dhdGUtY29uZmlnLXRlc3Qta2V5"} }), "providers.p.effects.forward.secrets", "ignored: forward.url is empty", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, baseYAML, nil)
			tt.mut(c)
			ps := c.Check()
			wantProblem(t, ps, tt.key, tt.msg, tt.warning)
			err := c.Validate()
			if tt.warning && err != nil {
				t.Errorf("Validate() = %v; want nil for a warning", err)
			}
			if !tt.warning && err == nil {
				t.Error("Validate() = nil; want the error")
			}
		})
	}
}

// TestValidateValidVariants checks settings that must not be reported.
func TestValidateValidVariants(t *testing.T) {
	p := func(f func(p *Provider)) func(c *Config) {
		return func(c *Config) {
			pr := c.Providers["p"]
			f(&pr)
			c.Providers["p"] = pr
		}
	}
	tests := []struct {
		name string
		mut  func(c *Config)
	}{
		{"listen any host", func(c *Config) { c.HTTP.Listen = ":0" }},
		{"listen ipv6", func(c *Config) { c.HTTP.Listen = "[::1]:8080" }},
		{"embedded listen loopback", func(c *Config) { c.NATS.Embedded.Listen = "127.0.0.1:4222" }},
		{"embedded listen localhost", func(c *Config) { c.NATS.Embedded.Listen = "localhost:4222" }},
		{"embedded listen ipv6 loopback", func(c *Config) { c.NATS.Embedded.Listen = "[::1]:4222" }},
		{"url with port", func(c *Config) { c.NATS.URL = "nats://u:p@h:65535,tls://h2" }},
		{"tolerance equals horizon", func(c *Config) { c.Dedup.Horizon, c.Dedup.Window = 5*time.Minute, time.Minute }},
		{"cluster", func(c *Config) { c.NATS.URL, c.NATS.Replicas = "nats://a:4222, tls://b:4222,nats://u:p@c:4222", 3 }},
		{"sync always", func(c *Config) { c.NATS.Embedded.Sync = SyncAlways }},
		{"window equals horizon", func(c *Config) { c.Dedup.Window = c.Dedup.Horizon }},
		{"webhooks max_age equals horizon", func(c *Config) { c.Retention.Webhooks.MaxAge = c.Dedup.Horizon }},
		{"max body at the limit", func(c *Config) { c.HTTP.MaxBodyBytes = maxBodyLimit; c.Retention.DLQ.MaxBytes = 1 << 30 }},
		{"one role", func(c *Config) { c.Roles.Gateway = false }},
		{"signed header id", p(func(p *Provider) { p.EventID = []string{"header:Webhook-Id", "json:/id"} })},
		{"no event id", p(func(p *Provider) { p.EventID = []string{} })},
		{"tolerance 0 on github", p(func(p *Provider) {
			p.Signature, p.EventID = Signature{Scheme: SchemeGitHub, Secrets: []Secret{"x-secret-of-the-tests"}}, nil
		})},
		{"hmac with header", p(func(p *Provider) {
			p.Signature, p.EventID = Signature{Scheme: SchemeHMACSHA256, Secrets: []Secret{"x-secret-of-the-tests"}, Header: "X-Signature"}, []string{"json:/id"}
		})},
		{"whsec without prefix", p(func(p *Provider) { p.Signature.Secrets = []Secret{"aG9va2dhdGUtY29uZmlnLXRlc3Qta2V5"} })},
		{"json pointer escapes", p(func(p *Provider) { p.Subject = "json:/a~1b/~0c/0" })},
		{"fields", p(func(p *Provider) { p.Fallback, p.KeyFields = FallbackFields, []string{"/a", "/b"} })},
		{"reject", p(func(p *Provider) { p.Fallback = FallbackReject })},
		{"ordering none without subject", p(func(p *Provider) { p.Ordering, p.Subject, p.OccurredAt = OrderingNone, "", "" })},
		{"publish off", p(func(p *Provider) { p.Effects.Publish = new("") })},
		{"publish nil", p(func(p *Provider) { p.Effects.Publish = nil })},
		{"publish all placeholders", p(func(p *Provider) { p.Effects.Publish = new("grants.{provider}.{account}.{subject}.{type}") })},
		{"publish inside a token", p(func(p *Provider) { p.Effects.Publish = new("grants.x-{provider}.{type}") })},
		{"forward", p(func(p *Provider) {
			p.Effects.Forward = Forward{URL: "http://127.0.0.1:9000/in?x=1", Timeout: time.Second, Secret: "whsec_aG9va2dhdGUtY29uZmlnLXRlc3Qta2V5"}
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, baseYAML, nil)
			tt.mut(c)
			if ps := c.Check(); len(ps) != 0 {
				t.Errorf("Check() =\n%v\nwant nothing", ps)
			}
		})
	}
}

// TestValidateNeverQuotesSecrets checks the messages about bad secrets and
// URLs that may hold credentials.
func TestValidateNeverQuotesSecrets(t *testing.T) {
	const secret = "hunter2-not-base64!"
	c := mustParse(t, baseYAML, nil)
	c.NATS.URL = "nats://admin:" + secret + "@/"
	pr := c.Providers["p"]
	pr.Signature.Secrets = []Secret{secret, secret}
	pr.Effects.Forward = Forward{URL: "ftp://user:" + secret + "@h", Secret: secret}
	c.Providers["p"] = pr
	ps := c.Check()
	if len(ps.Errors()) < 4 {
		t.Fatalf("want at least 4 errors, got:\n%v", ps)
	}
	if strings.Contains(ps.Error(), "hunter2") {
		t.Errorf("a message quotes the secret:\n%v", ps)
	}
}

func TestValidateReportsEverything(t *testing.T) {
	c := mustParse(t, `http:
  listen: nowhere
consumer:
  workers: 0
providers:
  gh:
    signature: { scheme: github, secrets: [x-secret-of-the-tests] }
    event_id: ["header:X-GitHub-Delivery"]
  bad:
    signature:
      scheme: rot13
      secrets: [x]
`, nil)
	err := c.Validate()
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Validate() = %v, want Problems", err)
	}
	want := []string{
		`http.listen: want host:port like 127.0.0.1:8080, got "nowhere" (line 2)`,
		`consumer.workers: must be at least 1, got 0 (line 4)`,
		`providers.bad.signature.scheme: unknown scheme "rot13"; want one of standard-webhooks, stripe, github, shopify, hmac-sha256 (line 11)`,
		`providers.gh.event_id[0]: warning: header X-GitHub-Delivery is not signed by the github scheme: a captured body re-sent under a new id would pass as a new event (event_id: [] keys on the payload digest instead) (line 8)`,
	}
	if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Error() =\n%s\nwant\n%s", err, strings.Join(want, "\n"))
	}
	if len(ps.Errors()) != 3 || len(ps.Warnings()) != 1 {
		t.Errorf("Errors() = %d, Warnings() = %d; want 3 and 1", len(ps.Errors()), len(ps.Warnings()))
	}
}

func TestValidateLineOfDefaultedKey(t *testing.T) {
	c := mustParse(t, `
providers:
  p:
    signature: { scheme: hmac-sha256, secrets: [x] }
`, nil)
	p := wantProblem(t, c.Check(), "providers.p.signature.header", "required", false)
	if p.Line != 4 {
		t.Errorf("line = %d, want 4 (the signature block)", p.Line)
	}
}

func TestValidateWithoutParse(t *testing.T) {
	// A Config built in code has no lines; Check must still work.
	c := &Config{}
	ps := c.Check()
	wantProblem(t, ps, "http.listen", "required", false)
	if p, _ := findProblem(ps, "http.listen", ""); p.Line != 0 {
		t.Errorf("line = %d, want 0", p.Line)
	}
}

func TestProblemString(t *testing.T) {
	tests := []struct {
		p    Problem
		want string
	}{
		{Problem{Key: "a.b", Msg: "bad"}, "a.b: bad"},
		{Problem{Key: "a.b", Msg: "odd", Warning: true}, "a.b: warning: odd"},
		{Problem{Key: "a.b", Msg: "bad", Line: 7}, "a.b: bad (line 7)"},
		{Problem{Msg: "invalid YAML: line 1: x"}, "invalid YAML: line 1: x"},
		{Problem{Key: "providers.a\nb", Msg: "unknown placeholder {x\ty}"}, `providers.a\nb: unknown placeholder {x\ty}`},
	}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
	ps := Problems{tests[0].p, tests[1].p}
	if got, want := ps.Error(), "a.b: bad\na.b: warning: odd"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if len(ps.Errors()) != 1 || !ps.Warnings()[0].Warning {
		t.Errorf("Errors/Warnings split wrong: %v / %v", ps.Errors(), ps.Warnings())
	}
}

// forward.secrets reads each entry as a secret (${VAR}, file:) and signs
// with all of them; forward.secret alone stays one.
func TestForwardSecretsParse(t *testing.T) {
	c := mustParse(t, baseYAML+`    effects: { forward: { url: "https://h/x", secrets: ["${FWD_NEXT}", whsec_aG9va2dhdGUtY29uZmlnLXRlc3Qta2V5] } }
`, map[string]string{"FWD_NEXT": "whsec_bmV4dC1rZXktb2YtdGhlLWNvbmZpZy10ZXN0cw=="})
	if ps := c.Check(); len(ps) != 0 {
		t.Fatalf("Check() = \n%v\nwant nothing", ps)
	}
	var got []string
	for _, s := range c.Providers["p"].Effects.Forward.SigningSecrets() {
		got = append(got, s.Reveal())
	}
	if want := []string{"whsec_bmV4dC1rZXktb2YtdGhlLWNvbmZpZy10ZXN0cw==", "whsec_aG9va2dhdGUtY29uZmlnLXRlc3Qta2V5"}; !slices.Equal(got, want) {
		t.Fatalf("SigningSecrets() = %q, want %q", got, want)
	}
	one := mustParse(t, baseYAML+`    effects: { forward: { url: "https://h/x", secret: whsec_aG9va2dhdGUtY29uZmlnLXRlc3Qta2V5 } }
`, nil)
	if got := one.Providers["p"].Effects.Forward.SigningSecrets(); len(got) != 1 || got[0].Reveal() != "whsec_aG9va2dhdGUtY29uZmlnLXRlc3Qta2V5" {
		t.Fatalf("SigningSecrets() with secret alone = %d secrets, want that one", len(got))
	}
}
