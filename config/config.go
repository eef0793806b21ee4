package config

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Config is hookgate's whole configuration, mirroring the YAML file field
// for field (see the package doc and CONTRACT.md). Get one from Load or
// Parse, which fill every default; then call Validate. A Config is plain
// data: safe to read from many goroutines, not to modify concurrently.
type Config struct {
	HTTP      HTTP                `yaml:"http"`
	NATS      NATS                `yaml:"nats"`
	Dedup     Dedup               `yaml:"dedup"`
	Retention Retention           `yaml:"retention"`
	Consumer  Consumer            `yaml:"consumer"`
	Providers map[string]Provider `yaml:"providers"`
	Roles     Roles               `yaml:"roles"`
	Log       Log                 `yaml:"log"`

	// src remembers where keys were in the file so Validate's problems can
	// point at them; a pointer keeps it out of %v output.
	src *source
}

// source maps a key path ("providers.x.signature.scheme") to its line.
type source struct {
	lines map[string]int
	// warnings found while decoding (a $NAME not expanded), which Check
	// reports with its own.
	warnings Problems
}

// HTTP is the gateway's listener.
type HTTP struct {
	Listen string `yaml:"listen"`
	// AdminListen, when set, serves /healthz, /readyz and /metrics there
	// instead of on Listen.
	AdminListen  string   `yaml:"admin_listen"`
	TLS          TLS      `yaml:"tls"`
	MaxBodyBytes int64    `yaml:"max_body_bytes"`
	Timeouts     Timeouts `yaml:"timeouts"`
	// ShutdownDelay is how long serve keeps answering after SIGTERM, with
	// /readyz 503 and Connection: close on every answer, before it stops
	// accepting: a load balancer takes the instance out meanwhile, and
	// keep-alive senders move off without a request cut short. 0: stop
	// accepting at once.
	ShutdownDelay time.Duration `yaml:"shutdown_delay"`
}

// TLS names a certificate and key file; both empty means plain HTTP.
// Relative paths are resolved against the config file's directory.
type TLS struct {
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Timeouts are the http.Server timeouts.
type Timeouts struct {
	ReadHeader time.Duration `yaml:"read_header"`
	Read       time.Duration `yaml:"read"`
	Write      time.Duration `yaml:"write"`
	Idle       time.Duration `yaml:"idle"`
}

// NATS says where JetStream lives: an external cluster when URL is set,
// otherwise an embedded server configured by Embedded.
type NATS struct {
	// URL is empty for the embedded server, else a comma-separated list
	// (nats://h1:4222,nats://h2:4222). It may carry credentials, so
	// messages never print it.
	URL string `yaml:"url"`
	// Credentials is a .creds file for the external cluster; relative
	// paths are resolved against the config file's directory.
	Credentials string `yaml:"credentials"`
	// TLS configures TLS to the external cluster beyond what a tls:// URL
	// gives (the system's roots, no client certificate).
	TLS      NATSTLS  `yaml:"tls"`
	Replicas int      `yaml:"replicas"`
	Embedded Embedded `yaml:"embedded"`
}

// NATSTLS names the PEM files for TLS to an external cluster; relative
// paths are resolved against the config file's directory. All empty: a
// tls:// URL verifies the servers against the system's roots.
type NATSTLS struct {
	// CA holds the certificates the servers' chains must end in, instead
	// of the system's roots (a private CA).
	CA string `yaml:"ca"`
	// Cert and Key are the client's certificate and key, for servers that
	// verify clients (mutual TLS); both or neither.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Set reports whether any file is named.
func (t NATSTLS) Set() bool { return t != NATSTLS{} }

// URLs splits URL into its comma-separated server URLs, spaces trimmed;
// nil for the embedded server.
func (n NATS) URLs() []string {
	if strings.TrimSpace(n.URL) == "" {
		return nil
	}
	urls := strings.Split(n.URL, ",")
	for i, u := range urls {
		urls[i] = strings.TrimSpace(u)
	}
	return urls
}

// Embedded configures the in-process NATS server.
type Embedded struct {
	// DataDir is absolute after Load (resolved against the config file's
	// directory).
	DataDir string `yaml:"data_dir"`
	// Listen is empty for in-process connections only.
	Listen string `yaml:"listen"`
	// Token is empty to have one generated into DataDir/nats.token.
	Token Secret `yaml:"token"`
	// Sync is SyncInterval or SyncAlways.
	Sync string `yaml:"sync"`
}

// Sync policies for the embedded server's file store.
const (
	SyncInterval = "interval" // fsync every 2 minutes
	SyncAlways   = "always"   // fsync every write
)

// Dedup sets how long a key stays a duplicate.
type Dedup struct {
	Horizon time.Duration `yaml:"horizon"`
	Window  time.Duration `yaml:"window"` // JetStream's duplicate window
}

// Retention holds the limits of the four streams.
type Retention struct {
	Webhooks Limits `yaml:"webhooks"`
	Grants   Limits `yaml:"grants"`
	DLQ      Limits `yaml:"dlq"`
	Audit    Limits `yaml:"audit"`
}

// TotalMaxBytes is the sum of the streams' max_bytes: what the embedded
// server would set aside for them.
func (r Retention) TotalMaxBytes() int64 {
	return r.Webhooks.MaxBytes + r.Grants.MaxBytes + r.DLQ.MaxBytes + r.Audit.MaxBytes
}

// Limits are one stream's MaxAge and MaxBytes.
type Limits struct {
	MaxAge   time.Duration `yaml:"max_age"`
	MaxBytes int64         `yaml:"max_bytes"`
}

// Consumer tunes event processing.
type Consumer struct {
	Workers int `yaml:"workers"`
	// MaxDeliver counts every attempt, the first included.
	MaxDeliver int `yaml:"max_deliver"`
	// Backoff is the delay before each retry; the last entry repeats.
	Backoff []time.Duration `yaml:"backoff"`
}

// Roles says which parts `serve` runs, so the gateway and the consumers can
// be scaled separately against one NATS cluster. Both default to true.
type Roles struct {
	Gateway  bool `yaml:"gateway"`
	Consumer bool `yaml:"consumer"`
}

// Log sets what serve writes to stderr (JSON lines).
type Log struct {
	// Level is debug, info (the default), warn or error. One line per
	// accepted, duplicate or applied event is written at debug: AUDIT holds
	// every decision durably, and at thousands of events a second a line
	// each would cost the gateway more than its signature check does.
	Level string `yaml:"level"`
}

// SlogLevel is Level as a slog.Level; info for anything Validate rejects.
func (l Log) SlogLevel() slog.Level {
	switch l.Level {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// Provider is one webhook sender, served at POST /webhooks/{Name}.
type Provider struct {
	// Name is the key under providers:, filled by Load.
	Name      string    `yaml:"-"`
	Signature Signature `yaml:"signature"`
	Account   Account   `yaml:"account"`
	// EventID lists sources ("header:Name" or "json:/pointer", see
	// ParseSource); the first present wins. Empty means: always derive the
	// key by Fallback.
	EventID []string `yaml:"event_id"`
	// Fallback is FallbackDigest, FallbackFields or FallbackReject.
	Fallback string `yaml:"fallback"`
	// KeyFields are bare JSON Pointers ("/grant_id"), hashed with
	// FallbackFields.
	KeyFields []string `yaml:"key_fields"`
	// Subject, OccurredAt and Type are sources like EventID's entries;
	// empty means not extracted.
	Subject    string `yaml:"subject"`
	OccurredAt string `yaml:"occurred_at"`
	Type       string `yaml:"type"`
	// Ordering is OrderingWatermark or OrderingNone.
	Ordering string  `yaml:"ordering"`
	Effects  Effects `yaml:"effects"`
	// RateLimit caps authenticated requests; off by default.
	RateLimit RateLimit `yaml:"rate_limit"`
}

// RateLimit is a token bucket per provider, applied after the signature
// is verified (so a forger cannot spend a sender's budget): requests over
// it get 429 with Retry-After. PerSecond 0 turns it off; Burst defaults
// to PerSecond.
type RateLimit struct {
	PerSecond int `yaml:"per_second"`
	Burst     int `yaml:"burst"`
}

// Signature is how a provider signs its requests.
type Signature struct {
	// Scheme is one of Schemes().
	Scheme string `yaml:"scheme"`
	// Secrets are tried in order; several allow rotation.
	Secrets []Secret `yaml:"secrets"`
	// Tolerance bounds the signed timestamp's distance from now, for the
	// timestamped schemes (standard-webhooks, stripe).
	Tolerance time.Duration `yaml:"tolerance"`
	// Header carries the digest, for hmac-sha256 only.
	Header string `yaml:"header"`
}

// Account says where the account comes from: Header, then JSON (a bare
// JSON Pointer), then Value. An empty or missing header or JSON value
// counts as absent.
type Account struct {
	Header string `yaml:"header"`
	JSON   string `yaml:"json"`
	Value  string `yaml:"value"`
}

// Effects are what applying an event does.
type Effects struct {
	// Publish is the GRANTS subject template. After Load it is never nil;
	// "" means publishing is off. Use PublishTemplate to read it.
	Publish *string `yaml:"publish"`
	Forward Forward `yaml:"forward"`
}

// PublishTemplate returns the publish subject template and whether
// publishing is on. A nil Publish (a Config not made by Load) means the
// default template.
func (e Effects) PublishTemplate() (tmpl string, on bool) {
	if e.Publish == nil {
		return DefaultPublish, true
	}
	return *e.Publish, *e.Publish != ""
}

// Forward is the optional HTTP POST effect; off when URL is empty.
type Forward struct {
	URL     string        `yaml:"url"`
	Timeout time.Duration `yaml:"timeout"`
	// Secret, when set, signs the forwarded request the Standard Webhooks
	// way; like a standard-webhooks secret it is base64, optionally
	// prefixed with whsec_.
	Secret Secret `yaml:"secret"`
	// Secrets, instead of Secret, sign it with each (one signature per
	// secret in webhook-signature): to rotate the secret the receiver
	// verifies with, without a window in which it refuses.
	Secrets []Secret `yaml:"secrets"`
}

// SigningSecrets is what signs the forwarded requests: Secrets, else
// Secret alone, else none.
func (f Forward) SigningSecrets() []Secret {
	if len(f.Secrets) > 0 {
		return f.Secrets
	}
	if f.Secret != "" {
		return []Secret{f.Secret}
	}
	return nil
}

// Fallbacks: how the key is derived when no event id is found.
const (
	FallbackDigest = "digest" // sha256 of the canonical JSON payload
	FallbackFields = "fields" // sha256 of KeyFields
	FallbackReject = "reject" // answer 400
)

// Orderings.
const (
	OrderingWatermark = "watermark"
	OrderingNone      = "none"
)

// DefaultPublish is the publish template used when none is configured. The
// placeholders a template may use are {provider}, {account}, {subject} and
// {type}.
const DefaultPublish = "grants.{provider}.{subject}.{type}"

// Load reads the YAML file at path and returns its Config with every
// default filled and relative paths (data_dir, tls.cert, tls.key,
// nats.credentials, file: secrets) resolved against the file's directory.
// getenv supplies ${VAR} values (pass os.Getenv; nil means an empty
// environment). It does not validate: call Validate or Check.
//
// A file that cannot be read gives an error wrapping the os error. Problems
// in its content give a Problems error listing every one found, each naming
// its key and line.
func Load(path string, getenv func(string) string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(data, dir, getenv)
}

// Parse is Load on bytes already read: baseDir stands for the file's
// directory ("" leaves relative paths relative to the working directory).
// It never panics, whatever data holds.
func Parse(data []byte, baseDir string, getenv func(string) string) (*Config, error) {
	return parse(data, baseDir, getenv, readSecretFile)
}

// parse is Parse with the file: reader passed in, so the fuzz target does
// not read whatever files random input names.
func parse(data []byte, baseDir string, getenv func(string) string, readFile func(baseDir, path string) (string, error)) (*Config, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	d := newDecoder(baseDir, getenv, readFile)
	c := &Config{}
	d.decodeDocument(data, c)
	c.src = &source{lines: d.lines, warnings: d.warnings}
	c.setDefaults(func(key string) bool { return d.set[key] })
	if !d.set["nats.embedded.token"] {
		// The contract's default is "${HOOKGATE_NATS_TOKEN:-}": the
		// variable counts without the line in the file, file:/path
		// included, as it would with the line (review Y: the path's text
		// was the token).
		tok := getenv("HOOKGATE_NATS_TOKEN")
		if path, ok := strings.CutPrefix(tok, "file:"); ok {
			var err error
			if tok, err = d.readFile(baseDir, path); err != nil {
				d.errorf("nats.embedded.token", nil, "%v (from HOOKGATE_NATS_TOKEN)", err)
			}
		}
		c.NATS.Embedded.Token = Secret(tok)
	}
	c.resolvePaths(baseDir)
	if len(d.problems) > 0 {
		// Report the rest of the file too (one line per problem, all at
		// once: a CI job without the real secrets in its environment
		// still sees every other mistake), except what follows from a
		// value that could not be read.
		return nil, append(d.problems, c.Check().except(d.problems)...)
	}
	return c, nil
}

// resolvePaths makes relative file paths relative to the config file, so
// the meaning of a config does not depend on where hookgate is started.
func (c *Config) resolvePaths(baseDir string) {
	if baseDir == "" {
		return
	}
	for _, p := range []*string{&c.NATS.Embedded.DataDir, &c.HTTP.TLS.Cert, &c.HTTP.TLS.Key, &c.NATS.Credentials,
		&c.NATS.TLS.CA, &c.NATS.TLS.Cert, &c.NATS.TLS.Key} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(baseDir, *p)
		}
	}
}
