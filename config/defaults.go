package config

import (
	"slices"
	"time"
)

// Default values, as CONTRACT.md lists them.
const (
	defaultListen       = "127.0.0.1:8080"
	defaultMaxBodyBytes = 1 << 20
	defaultDataDir      = "./data"
	defaultTolerance    = 5 * time.Minute
	defaultAccount      = "default"
	defaultFwdTimeout   = 10 * time.Second
	day                 = 24 * time.Hour
)

// defaultEventID is where each scheme's senders put a stable event id.
// github and shopify get none, so their keys come from the payload digest:
// X-GitHub-Delivery and X-Shopify-Event-Id are not covered by the signature,
// and a captured body re-sent under a fresh id would pass as new. Naming
// those headers in event_id is allowed, with a warning from Check.
func defaultEventID(scheme string) []string {
	switch scheme {
	case SchemeStandardWebhooks:
		return []string{"header:webhook-id"} // signed with the body
	case SchemeStripe, SchemeHMACSHA256:
		return []string{"json:/id"} // inside the signed body
	case SchemeGitHub, SchemeShopify:
		return []string{}
	}
	return nil // unknown scheme: Validate reports it
}

// setDefaults is the one place defaults are set. isSet reports whether the
// file gave a key a non-null value: a number, duration, list or bool given
// explicitly is kept even when zero or empty (Validate then reports it if
// that is invalid), while an empty string counts as unset. The exceptions
// are meaningful empties: effects.publish "" (off), and tls, admin_listen,
// url, credentials, listen, token, header, json, subject, occurred_at and
// type, whose default is empty.
func (c *Config) setDefaults(isSet func(key string) bool) {
	str := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	dur := func(key string, p *time.Duration, v time.Duration) {
		if !isSet(key) {
			*p = v
		}
	}
	num := func(key string, p *int, v int) {
		if !isSet(key) {
			*p = v
		}
	}
	size := func(key string, p *int64, v int64) {
		if !isSet(key) {
			*p = v
		}
	}
	boolean := func(key string, p *bool, v bool) {
		if !isSet(key) {
			*p = v
		}
	}

	str(&c.HTTP.Listen, defaultListen)
	size("http.max_body_bytes", &c.HTTP.MaxBodyBytes, defaultMaxBodyBytes)
	dur("http.timeouts.read_header", &c.HTTP.Timeouts.ReadHeader, 5*time.Second)
	dur("http.timeouts.read", &c.HTTP.Timeouts.Read, 30*time.Second)
	dur("http.timeouts.write", &c.HTTP.Timeouts.Write, 30*time.Second)
	dur("http.timeouts.idle", &c.HTTP.Timeouts.Idle, 120*time.Second)
	dur("http.shutdown_delay", &c.HTTP.ShutdownDelay, 0)

	num("nats.replicas", &c.NATS.Replicas, 1)
	str(&c.NATS.Embedded.DataDir, defaultDataDir)
	str(&c.NATS.Embedded.Sync, SyncInterval)

	dur("dedup.horizon", &c.Dedup.Horizon, 96*time.Hour)
	dur("dedup.window", &c.Dedup.Window, 2*time.Minute)

	for _, r := range []struct {
		key    string
		l      *Limits
		age    time.Duration
		nbytes int64
	}{
		{"retention.webhooks", &c.Retention.Webhooks, 30 * day, 10e9},
		{"retention.grants", &c.Retention.Grants, 30 * day, 10e9},
		{"retention.dlq", &c.Retention.DLQ, 90 * day, 1e9},
		{"retention.audit", &c.Retention.Audit, 365 * day, 10e9},
	} {
		dur(r.key+".max_age", &r.l.MaxAge, r.age)
		size(r.key+".max_bytes", &r.l.MaxBytes, r.nbytes)
	}

	num("consumer.workers", &c.Consumer.Workers, 8)
	num("consumer.max_deliver", &c.Consumer.MaxDeliver, 8)
	if !isSet("consumer.backoff") {
		c.Consumer.Backoff = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute}
	}

	boolean("roles.gateway", &c.Roles.Gateway, true)
	boolean("roles.consumer", &c.Roles.Consumer, true)
	str(&c.Log.Level, "info")

	if c.Providers == nil {
		c.Providers = map[string]Provider{}
	}
	for name, p := range c.Providers {
		key := "providers." + name
		p.Name = name
		dur(key+".signature.tolerance", &p.Signature.Tolerance, defaultTolerance)
		if !isSet(key + ".event_id") {
			p.EventID = slices.Clone(defaultEventID(p.Signature.Scheme))
		}
		str(&p.Account.Value, defaultAccount)
		str(&p.Fallback, FallbackDigest)
		if p.Ordering == "" {
			p.Ordering = OrderingNone
			if p.Subject != "" && p.OccurredAt != "" {
				p.Ordering = OrderingWatermark
			}
		}
		if p.Effects.Publish == nil {
			p.Effects.Publish = new(DefaultPublish)
		}
		dur(key+".effects.forward.timeout", &p.Effects.Forward.Timeout, defaultFwdTimeout)
		c.Providers[name] = p
	}
}
