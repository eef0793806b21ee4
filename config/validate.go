package config

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxBodyLimit caps http.max_body_bytes: every body must also be
// storable, and NATS advises against payloads beyond a few MiB. The file
// store refuses a message record over 32 MiB (its subject, header block
// and body: nats-server's rlBadThresh, "message too large"), whatever the
// max payload; the header block takes up to 64 KiB (JetStream's limit, the
// stored request headers and the Hookgate-* ones) and the subject and the
// record's framing stay under 8 KiB (a subject is at most 4 KiB: NATS's
// protocol line). Up to stop 37 the cap was 64 MiB less 64 KiB (the max
// payload's), and a body between 32 MiB and it was answered 503 "store
// full" at every retry and never stored (review BF).
const maxBodyLimit = 32<<20 - 64<<10 - 8<<10

// Validate returns nil when c has no errors. Otherwise it returns a Problems
// holding every error and every warning, so one run shows all there is to
// fix. Warnings alone do not make c invalid; Check returns them.
func (c *Config) Validate() error {
	ps := c.Check()
	if len(ps.Errors()) == 0 {
		return nil
	}
	return ps
}

// Check returns every error and warning about c, nil when there are none.
// It reads the files c names (http.tls.*, nats.credentials, nats.tls.*) to
// report missing ones, and never prints a secret.
func (c *Config) Check() Problems {
	k := &checker{}
	if c.src != nil {
		k.lines = c.src.lines
		k.ps = append(k.ps, c.src.warnings...)
	}
	c.checkHTTP(k)
	c.checkNATS(k)
	c.checkDedup(k)
	c.checkRetention(k)
	c.checkConsumer(k)
	if !c.Roles.Gateway && !c.Roles.Consumer {
		k.errorf("roles", "gateway and consumer are both false: nothing would run")
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		k.errorf("log.level", "%q is not a level: debug, info, warn or error", c.Log.Level)
	}
	if len(c.Providers) == 0 {
		k.warnf("providers", "no providers configured: every webhook would get 404")
	}
	names := make([]string, 0, len(c.Providers))
	for name := range c.Providers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		checkProvider(k, name, c.Providers[name])
		sig := c.Providers[name].Signature
		if h := c.Dedup.Horizon; timestamped(sig.Scheme) && h > 0 && sig.Tolerance > h {
			// The key is forgotten after the horizon; until the tolerance
			// runs out the captured signature still verifies.
			k.warnf("providers."+name+".signature.tolerance", "%s exceeds dedup.horizon (%s): a delivery captured and re-sent after the horizon, still within the tolerance, is stored and applied again as new; keep the tolerance within the horizon",
				formatDuration(sig.Tolerance), formatDuration(h))
		}
	}
	checkSharedSecrets(k, c.Providers, names)
	return k.ps
}

// checkSharedSecrets warns when two providers whose schemes sign the same
// bytes the same way hold a common secret: a delivery captured on one
// route verifies on the other, and is stored there as a new event (the
// key is scoped by provider). github, shopify and hmac-sha256 all MAC the
// body alone; stripe and standard-webhooks each have an input of their
// own. Names are sorted, so each pair is named once, the later provider
// warned about the earlier one; the secret itself is never printed.
func checkSharedSecrets(k *checker, providers map[string]Provider, names []string) {
	family := func(scheme string) string {
		switch scheme {
		case SchemeGitHub, SchemeShopify, SchemeHMACSHA256:
			return "body"
		}
		return scheme
	}
	type holder struct{ name, family string }
	seen := map[string][]holder{}
	for _, name := range names {
		sig := providers[name].Signature
		f := family(sig.Scheme)
		warned := map[string]bool{}
		for i, sec := range sig.Secrets {
			v := sec.Reveal()
			if sig.Scheme == SchemeStandardWebhooks {
				v = strings.TrimPrefix(v, "whsec_")
			}
			if v == "" {
				continue
			}
			for _, h := range seen[v] {
				if h.family == f && h.name != name && !warned[h.name] {
					warned[h.name] = true
					k.warnf(fmt.Sprintf("providers.%s.signature.secrets[%d]", name, i), "is also a secret of providers.%s, whose scheme signs the same way: a delivery signed for one is accepted by the other, and stored there as a new event; give each provider its own secret", h.name)
				}
			}
			seen[v] = append(seen[v], holder{name, f})
		}
	}
}

type checker struct {
	lines map[string]int
	ps    Problems
}

func (k *checker) add(warning bool, key, format string, args ...any) {
	k.ps = append(k.ps, Problem{Key: key, Msg: fmt.Sprintf(format, args...), Warning: warning, Line: k.lineFor(key)})
}

func (k *checker) errorf(key, format string, args ...any) { k.add(false, key, format, args...) }
func (k *checker) warnf(key, format string, args ...any)  { k.add(true, key, format, args...) }

// inFile reports whether key itself is written in the file (not defaulted).
func (k *checker) inFile(key string) bool {
	_, ok := k.lines[key]
	return ok
}

// lineFor finds key's line, or its nearest given parent's (a problem with a
// defaulted key points at the section that lacks it).
func (k *checker) lineFor(key string) int {
	for key != "" {
		if l, ok := k.lines[key]; ok {
			return l
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			break
		}
		key = key[:i]
	}
	return 0
}

func (c *Config) checkHTTP(k *checker) {
	h := c.HTTP
	if h.Listen == "" {
		k.errorf("http.listen", "required")
	} else if err := checkHostPort(h.Listen); err != nil {
		k.errorf("http.listen", "%v", err)
	}
	if h.AdminListen != "" {
		if err := checkHostPort(h.AdminListen); err != nil {
			k.errorf("http.admin_listen", "%v", err)
		} else if sameListen(h.AdminListen, h.Listen) {
			k.errorf("http.admin_listen", "same address as http.listen; leave it empty to serve /healthz, /readyz and /metrics on http.listen")
		}
	}
	checkKeyPair(k, "http.tls", h.TLS.Cert, h.TLS.Key)
	switch {
	case h.MaxBodyBytes <= 0:
		k.errorf("http.max_body_bytes", "must be > 0")
	case h.MaxBodyBytes > maxBodyLimit:
		k.errorf("http.max_body_bytes", "%d is above the limit of %s (a body must fit one NATS message)", h.MaxBodyBytes, formatBytes(maxBodyLimit))
	}
	for _, t := range []struct {
		key string
		d   time.Duration
	}{
		{"read_header", h.Timeouts.ReadHeader}, {"read", h.Timeouts.Read},
		{"write", h.Timeouts.Write}, {"idle", h.Timeouts.Idle},
	} {
		if t.d <= 0 {
			k.errorf("http.timeouts."+t.key, "must be > 0")
		}
	}
	switch w, r := h.Timeouts.Write, h.Timeouts.Read; {
	case w > 0 && w < MinWriteTimeout:
		// The write timeout runs from the end of the headers and bounds the
		// publish and the answer: below a second no time is left to publish
		// (every webhook got 408; a review, stop 38).
		k.errorf("http.timeouts.write", "%s is too short: the gateway publishes and answers within it; want at least %s", formatDuration(w), formatDuration(MinWriteTimeout))
	case w > 0 && r > 0 && w < r:
		k.warnf("http.timeouts.write", "%s is shorter than http.timeouts.read (%s): a body arriving more than %s after its headers gets 408, though read allows it more; keep write >= read",
			formatDuration(w), formatDuration(r), formatDuration(LatestBody(w)))
	}
	switch {
	case h.ShutdownDelay < 0:
		k.errorf("http.shutdown_delay", "must be >= 0 (0: stop accepting at once)")
	case h.ShutdownDelay > maxShutdownDelay:
		k.errorf("http.shutdown_delay", "%s is above %s: a stop would wait that long before it began (a load balancer needs seconds)", h.ShutdownDelay, maxShutdownDelay)
	}
}

// checkKeyPair checks a certificate and key named under prefix (.cert,
// .key): both or neither, files, and a pair that loads.
func checkKeyPair(k *checker, prefix, cert, key string) {
	before := len(k.ps)
	switch {
	case cert != "" && key == "":
		k.errorf(prefix+".key", "required when %s.cert is set", prefix)
	case key != "" && cert == "":
		k.errorf(prefix+".cert", "required when %s.key is set", prefix)
	}
	checkFile(k, prefix+".cert", cert)
	checkFile(k, prefix+".key", key)
	if cert != "" && key != "" && len(k.ps) == before {
		// Files that exist may still not be a certificate and its key (a
		// key that does not match, a DER file); serve loads them first
		// too (review 9).
		if _, err := tls.LoadX509KeyPair(cert, key); err != nil {
			k.errorf(prefix+".cert", "with %s.key: %v", prefix, err)
		}
	}
}

// The gateway's publish ends PublishMargin(write) before
// http.timeouts.write (which runs from the end of a request's headers),
// so its answer is written in time, and starts only with MinPublishTime
// or more left; hence MinWriteTimeout.
const (
	MinPublishTime  = 250 * time.Millisecond
	MinWriteTimeout = time.Second
)

// PublishMargin is how long before http.timeouts.write w the gateway's
// publish ends: a second, or half of w when that is 2 s or less.
func PublishMargin(w time.Duration) time.Duration { return min(time.Second, w/2) }

// LatestBody is how long after its headers a body may finish arriving
// and still be stored under http.timeouts.write w.
func LatestBody(w time.Duration) time.Duration {
	return max(w-PublishMargin(w)-MinPublishTime, 0)
}

// maxShutdownDelay bounds http.shutdown_delay: a process supervisor kills
// a service that takes longer to stop (systemd's default is 90 s; the
// shipped unit gives 45 s).
const maxShutdownDelay = time.Minute

func (c *Config) checkNATS(k *checker) {
	n := c.NATS
	if n.URL != "" && len(n.URLs()) == 0 {
		// Blanks: no URL to the URL checks, a cluster to serve (review 9).
		k.errorf("nats.url", "blank; leave it empty for the embedded server, or list nats://host:4222")
	}
	if n.URL != "" {
		for i, u := range n.URLs() {
			// The URL may hold a user and password: never quote it.
			if !validNATSURL(u) {
				k.errorf("nats.url", "entry %d is not a URL like nats://host:4222 (schemes nats, tls, ws, wss)", i+1)
			} else if pu, _ := url.Parse(u); !PortOK(pu.Port()) {
				// serve retried "invalid port" for ever, never naming the key.
				k.errorf("nats.url", "entry %d: port is not a number from 1 to 65535", i+1)
			}
		}
	}
	if n.Credentials != "" {
		if n.URL == "" {
			k.warnf("nats.credentials", "ignored: it is for an external cluster and nats.url is empty")
		}
		checkFile(k, "nats.credentials", n.Credentials)
	}
	if n.TLS.Set() {
		if n.URL == "" {
			k.warnf("nats.tls", "ignored: it is for an external cluster and nats.url is empty")
		}
		checkKeyPair(k, "nats.tls", n.TLS.Cert, n.TLS.Key)
		checkCA(k, "nats.tls.ca", n.TLS.CA)
	}
	switch {
	case n.Replicas < 1 || n.Replicas > 5:
		k.errorf("nats.replicas", "must be from 1 to 5, got %d", n.Replicas)
	case n.Replicas > 1 && n.URL == "":
		k.errorf("nats.replicas", "%d needs nats.url (a cluster): the embedded server is a single node", n.Replicas)
	}
	e := n.Embedded
	if e.Sync != SyncInterval && e.Sync != SyncAlways {
		k.errorf("nats.embedded.sync", "unknown sync %q; want interval or always", e.Sync)
	} else if e.Sync == SyncAlways && n.URL != "" {
		k.warnf("nats.embedded.sync", "ignored: nats.url is set, so no embedded server runs; fsync is the cluster's sync_interval setting")
	}
	if n.URL == "" && e.DataDir == "" {
		k.errorf("nats.embedded.data_dir", "required")
	} else if n.URL == "" {
		// serve makes it when absent; a file there stopped it at start
		// with "mkdir ...: not a directory" after config check said ok
		// (an operations audit, stop 41).
		if fi, err := os.Stat(e.DataDir); err == nil && !fi.IsDir() {
			k.errorf("nats.embedded.data_dir", "%s is a file, not a directory: point it at a directory (serve makes it when absent)", e.DataDir)
		}
	}
	if e.Listen != "" {
		if err := checkHostPort(e.Listen); err != nil {
			k.errorf("nats.embedded.listen", "%v", err)
		} else if n.URL != "" {
			k.warnf("nats.embedded.listen", "ignored: nats.url is set, so no embedded server runs")
		} else {
			if !loopbackListen(e.Listen) {
				// The token is the only credential and it allows everything
				// (publishing to webhooks.* past the signature checks,
				// deleting streams): README, "Running in production".
				k.warnf("nats.embedded.listen", "%s is not a loopback address: whoever reaches it with the token may read, write and delete every stream; keep it on 127.0.0.1 or put a NATS cluster with its own accounts in front (nats.url)", e.Listen)
			}
			// serve failed at start with "address already in use", after
			// config check said ok (review Y).
			for _, h := range []struct{ key, addr string }{{"http.listen", c.HTTP.Listen}, {"http.admin_listen", c.HTTP.AdminListen}} {
				if h.addr != "" && sameListen(e.Listen, h.addr) {
					k.errorf("nats.embedded.listen", "%s takes the same address as %s; give the embedded server its own port", e.Listen, h.key)
				}
			}
		}
	}
}

// loopbackListen reports whether a listen address (host:port) takes
// loopback only: an IP that is loopback, or localhost.
func loopbackListen(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// sameListen reports whether two listen addresses (host:port) would take
// the same socket: the same port (not 0, which picks a free one) on the
// same host, or on a host that is every address ("", 0.0.0.0, [::]).
func sameListen(a, b string) bool {
	ah, ap, err1 := net.SplitHostPort(a)
	bh, bp, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil {
		return a == b
	}
	// Ports as numbers: Go's listener reads "023880" as 23880 (audit 42:
	// the two passed, and serve failed to bind).
	if pa, err := strconv.ParseUint(ap, 10, 16); err == nil {
		ap = strconv.FormatUint(pa, 10)
	}
	if pb, err := strconv.ParseUint(bp, 10, 16); err == nil {
		bp = strconv.FormatUint(pb, 10)
	}
	if ap != bp || ap == "0" {
		return false
	}
	everyAddr := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return sameHost(ah, bh) || everyAddr(ah) || everyAddr(bh)
}

// sameHost reports whether two listen hosts are one: written alike, the
// same IP written two ways, or localhost and 127.0.0.1, which Go's
// listener takes for localhost (an operations audit, stop 41: the two
// passed, and serve failed to bind).
func sameHost(a, b string) bool {
	norm := func(h string) string {
		if strings.EqualFold(h, "localhost") {
			return "127.0.0.1"
		}
		if ip := net.ParseIP(h); ip != nil {
			return ip.String()
		}
		return h
	}
	return norm(a) == norm(b)
}

func validNATSURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Hostname() == "" {
		return false
	}
	switch u.Scheme {
	case "nats", "tls", "ws", "wss":
		return true
	}
	return false
}

func (c *Config) checkDedup(k *checker) {
	d := c.Dedup
	if d.Horizon <= 0 {
		k.errorf("dedup.horizon", "must be > 0")
	}
	switch {
	case d.Window < time.Second:
		k.errorf("dedup.window", "must be at least 1s")
	case d.Horizon > 0 && d.Window > d.Horizon:
		k.errorf("dedup.window", "%s exceeds dedup.horizon (%s); want window <= horizon", formatDuration(d.Window), formatDuration(d.Horizon))
	case d.Window < shortKeyIndexWindow && c.NATS.URL == "" && c.Roles.Gateway:
		// The key index's lag limit is half the window less a tick
		// (jetstream.KeyIndexPublisher): a second is a GC pause or a disk
		// stall away.
		k.warnf("dedup.window", "%s: on the embedded server the gateway answers 503 to new events whenever its key index is about half of it (%s) behind the stored events (a slow disk, a long pause); %s or more avoids that (default 2m)",
			formatDuration(d.Window), formatDuration(d.Window/2), formatDuration(shortKeyIndexWindow))
	}
}

// shortKeyIndexWindow: a dedup.window below it gets a warning on the
// embedded server.
const shortKeyIndexWindow = 10 * time.Second

// headerAllowance is the room a stream holding bodies should leave over
// http.max_body_bytes for an event's headers (serve's NATS max payload
// allows 64 KiB of them).
const headerAllowance = 64 << 10

// minAuditBytes is the AUDIT max_bytes under which config check warns.
const minAuditBytes = 1 << 20

func (c *Config) checkRetention(k *checker) {
	r := c.Retention
	for _, s := range []struct {
		name   string
		l      Limits
		bodies bool // holds whole webhook bodies
	}{
		{"webhooks", r.Webhooks, true}, {"grants", r.Grants, true},
		{"dlq", r.DLQ, true}, {"audit", r.Audit, false},
	} {
		key := "retention." + s.name
		if s.l.MaxAge <= 0 {
			k.errorf(key+".max_age", "must be > 0")
		}
		switch {
		case s.l.MaxBytes <= 0:
			k.errorf(key+".max_bytes", "must be > 0")
		case s.bodies && c.HTTP.MaxBodyBytes > 0 && s.l.MaxBytes < c.HTTP.MaxBodyBytes:
			k.errorf(key+".max_bytes", "%d is smaller than http.max_body_bytes (%d): one event would not fit", s.l.MaxBytes, c.HTTP.MaxBodyBytes)
		case s.bodies && c.HTTP.MaxBodyBytes > 0 && s.l.MaxBytes < c.HTTP.MaxBodyBytes+headerAllowance:
			// The stream refuses a message larger than its max_bytes with
			// the answer it gives when full: a GRANTS message of the
			// largest body was dead-lettered as "stream full" (review D).
			k.warnf(key+".max_bytes", "%d leaves less than 64 KiB over http.max_body_bytes (%d) for an event's headers: the largest events may never fit (WEBHOOKS answers them 503, GRANTS and DLQ refuse them as full)",
				s.l.MaxBytes, c.HTTP.MaxBodyBytes)
		case !s.bodies && s.l.MaxBytes < minAuditBytes:
			// AUDIT drops its oldest records when full: 2KB kept two
			// messages of 3000 events' records (a resource audit, stop 39).
			k.warnf(key+".max_bytes", "%d is under 1 MiB: AUDIT keeps only its newest records that fit (packed up to 32 KiB a message), so trace and the audit trail lose their history within minutes under load",
				s.l.MaxBytes)
		}
	}
	if r.Webhooks.MaxAge > 0 && c.Dedup.Horizon > 0 && r.Webhooks.MaxAge < c.Dedup.Horizon {
		k.errorf("retention.webhooks.max_age", "%s is shorter than dedup.horizon (%s); stored events must outlive their duplicate keys",
			formatDuration(r.Webhooks.MaxAge), formatDuration(c.Dedup.Horizon))
	}
	// GRANTS deduplicates over the horizon and is where watermark rules
	// remember applied keys; JetStream refuses a duplicate window longer
	// than the stream's max age (err 10052), so serve could not start.
	if r.Grants.MaxAge > 0 && c.Dedup.Horizon > 0 && r.Grants.MaxAge < c.Dedup.Horizon {
		k.errorf("retention.grants.max_age", "%s is shorter than dedup.horizon (%s); GRANTS keeps applied keys for the horizon",
			formatDuration(r.Grants.MaxAge), formatDuration(c.Dedup.Horizon))
	}
	// DLQ and AUDIT deduplicate their writers' retries over dedup.window.
	for _, s := range []struct {
		name string
		age  time.Duration
	}{{"dlq", r.DLQ.MaxAge}, {"audit", r.Audit.MaxAge}} {
		if s.age > 0 && c.Dedup.Window > 0 && s.age < c.Dedup.Window {
			k.errorf("retention."+s.name+".max_age", "%s is shorter than dedup.window (%s), the stream's duplicate window",
				formatDuration(s.age), formatDuration(c.Dedup.Window))
		}
	}
}

// maxWorkers bounds consumer.workers: far above what one instance's
// NATS connection keeps busy.
const maxWorkers = 4096

func (c *Config) checkConsumer(k *checker) {
	cs := c.Consumer
	switch {
	case cs.Workers < 1:
		k.errorf("consumer.workers", "must be at least 1, got %d", cs.Workers)
	case cs.Workers > maxWorkers:
		// Run starts a goroutine each, and the delivery window is 16
		// times as many: a typo of a few zeros ran out of memory at start.
		k.errorf("consumer.workers", "must be at most %d, got %d", maxWorkers, cs.Workers)
	}
	if cs.MaxDeliver < 1 {
		k.errorf("consumer.max_deliver", "must be at least 1 (it counts the first attempt), got %d", cs.MaxDeliver)
	}
	if len(cs.Backoff) == 0 {
		k.errorf("consumer.backoff", "must list at least one delay, like [1s, 5s, 30s]")
	}
	for i, d := range cs.Backoff {
		if d <= 0 {
			k.errorf(fmt.Sprintf("consumer.backoff[%d]", i), "must be > 0")
		}
	}
	c.checkRetriesWithinMaxAge(k)
}

// checkRetriesWithinMaxAge warns when an event's retries can outlast
// retention.webhooks.max_age: an event whose effect keeps failing is then
// deleted from WEBHOOKS before its last attempt, never applied and never
// dead-lettered, so no letter is left for dlq replay (audit 42: backoff
// [1000h] and max_deliver 5000 with the default backoff both checked ok).
// The delays are counted at their jitter's longest (+20%).
func (c *Config) checkRetriesWithinMaxAge(k *checker) {
	cs, maxAge := c.Consumer, c.Retention.Webhooks.MaxAge
	if maxAge <= 0 || cs.MaxDeliver < 2 || len(cs.Backoff) == 0 {
		return
	}
	longest := func(d time.Duration) time.Duration { return d + d/5 }
	for i, d := range cs.Backoff {
		if i < cs.MaxDeliver-1 && longest(d) > maxAge {
			k.warnf(fmt.Sprintf("consumer.backoff[%d]", i), "%s (up to %s with jitter) is longer than retention.webhooks.max_age (%s): an event still failing then leaves WEBHOOKS before its next attempt, and is neither applied nor dead-lettered",
				formatDuration(d), formatDuration(longest(d)), formatDuration(maxAge))
			return
		}
	}
	var total time.Duration
	for n := 1; n < cs.MaxDeliver; n++ {
		total += longest(cs.Backoff[min(n-1, len(cs.Backoff)-1)])
		if total > maxAge {
			k.warnf("consumer.max_deliver", "%d attempts with consumer.backoff's delays take up to %s or more, past retention.webhooks.max_age (%s): an event still failing then leaves WEBHOOKS before its last attempt, and is neither applied nor dead-lettered; lower max_deliver or raise max_age",
				cs.MaxDeliver, formatDuration(total), formatDuration(maxAge))
			return
		}
	}
}

// ValidProviderName reports whether s may name a provider: [a-z0-9_-]+
// (a URL path segment and a NATS subject token).
func ValidProviderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func checkProvider(k *checker, name string, p Provider) {
	key := "providers." + name
	if !ValidProviderName(name) {
		k.errorf(key, "provider name must match [a-z0-9_-]+ (it is a URL path segment and a NATS subject token)")
	}
	checkSignature(k, key+".signature", p.Signature)
	scheme := p.Signature.Scheme
	known := slices.Contains(Schemes(), scheme)

	if p.Account.Header != "" {
		if err := checkHeaderName(p.Account.Header); err != nil {
			k.errorf(key+".account.header", "%v", err)
		} else {
			refuseCredentialSource(k, key+".account.header", p.Account.Header)
		}
	}
	if p.Account.JSON != "" {
		checkBarePointer(k, key+".account.json", p.Account.JSON)
	}
	if h := p.Account.Header; h != "" && known && !CredentialHeader(h) && !signsHeader(scheme, h) {
		// The account is part of the key: another value makes a new event,
		// and any header-sourced subject, occurred_at or type rides along.
		k.warnf(key+".account.header", "header %s is not signed by the %s scheme: a captured delivery re-sent with another value is stored as a new event of that account (take the account from the body where the sender puts it there)", h, scheme)
	}

	if p.RateLimit.PerSecond < 0 {
		k.errorf(key+".rate_limit.per_second", "must be 0 (off) or more, got %d", p.RateLimit.PerSecond)
	}
	if p.RateLimit.Burst < 0 {
		k.errorf(key+".rate_limit.burst", "must be 0 (= per_second) or more, got %d", p.RateLimit.Burst)
	}
	if p.RateLimit.PerSecond == 0 && p.RateLimit.Burst > 0 {
		k.warnf(key+".rate_limit.burst", "ignored: rate_limit.per_second is 0 (off)")
	}

	for i, e := range p.EventID {
		ek := fmt.Sprintf("%s.event_id[%d]", key, i)
		src, err := ParseSource(e)
		if err != nil {
			k.errorf(ek, "%v", err)
			continue
		}
		if src.Kind == SourceHeader && refuseCredentialSource(k, ek, src.Name) {
			continue
		}
		if src.Kind == SourceHeader && known && !signsHeader(scheme, src.Name) {
			k.warnf(ek, "header %s is not signed by the %s scheme: a captured body re-sent under a new id would pass as a new event (event_id: [] keys on the payload digest instead)", src.Name, scheme)
		}
	}

	switch p.Fallback {
	case FallbackDigest, FallbackReject:
	case FallbackFields:
		if len(p.KeyFields) == 0 {
			k.errorf(key+".key_fields", "required with fallback: fields; list the JSON Pointers to hash, like [/grant_id, /status]")
		}
	default:
		k.errorf(key+".fallback", "unknown fallback %q; want digest, fields or reject", p.Fallback)
	}
	for i, f := range p.KeyFields {
		checkBarePointer(k, fmt.Sprintf("%s.key_fields[%d]", key, i), f)
	}
	if len(p.KeyFields) > 0 && p.Fallback != FallbackFields && p.Fallback != "" {
		k.warnf(key+".key_fields", "ignored: fallback is %s, not fields", p.Fallback)
	}

	for _, s := range []struct{ name, v string }{
		{"subject", p.Subject}, {"occurred_at", p.OccurredAt}, {"type", p.Type},
	} {
		if s.v == "" {
			continue
		}
		src, err := ParseSource(s.v)
		if err != nil {
			k.errorf(key+"."+s.name, "%v", err)
			continue
		}
		if src.Kind != SourceHeader || refuseCredentialSource(k, key+"."+s.name, src.Name) {
			continue
		}
		if known && !timestamped(scheme) && !signsHeader(scheme, src.Name) {
			// Within the horizon a replayed capture is a duplicate, and a
			// timestamped scheme refuses it past its tolerance; past the
			// horizon this one takes it as new, with the header as sent
			// (a security audit, stop 41).
			k.warnf(key+"."+s.name, "header %s is not signed by the %s scheme, which signs no timestamp: a delivery captured and re-sent once dedup.horizon has passed is stored as new with whatever %s it carries, %s (take it from the body where the sender puts it there)",
				src.Name, scheme, src.Name, unsignedSourceRisk[s.name])
		}
	}

	switch p.Ordering {
	case OrderingNone:
	case OrderingWatermark:
		var missing []string
		if p.Subject == "" {
			missing = append(missing, "subject")
		}
		if p.OccurredAt == "" {
			missing = append(missing, "occurred_at")
		}
		if len(missing) > 0 {
			k.errorf(key+".ordering", "watermark needs subject and occurred_at; %s not set", strings.Join(missing, " and "))
		}
	default:
		k.errorf(key+".ordering", "unknown ordering %q; want watermark or none", p.Ordering)
	}

	if tmpl, on := p.Effects.PublishTemplate(); on {
		for _, msg := range checkPublish(tmpl) {
			k.errorf(key+".effects.publish", "%s", msg)
		}
	}
	checkForward(k, key+".effects.forward", p.Effects.Forward)
}

// unsignedSourceRisk says what a replayer's value of an unsigned header
// source does.
var unsignedSourceRisk = map[string]string{
	"subject":     "and its body applies to whatever subject that names",
	"occurred_at": "and a far-future time holds every later event of its subject stale",
	"type":        "and it is published under whatever type that names",
}

func checkSignature(k *checker, key string, s Signature) {
	known := slices.Contains(Schemes(), s.Scheme)
	switch {
	case s.Scheme == "":
		k.errorf(key+".scheme", "required; want one of %s", strings.Join(Schemes(), ", "))
	case !known:
		k.errorf(key+".scheme", "unknown scheme %q; want one of %s", s.Scheme, strings.Join(Schemes(), ", "))
	}
	if len(s.Secrets) == 0 {
		k.errorf(key+".secrets", "at least one secret is required")
	}
	for i, sec := range s.Secrets {
		sk := fmt.Sprintf("%s.secrets[%d]", key, i)
		switch {
		case sec == "":
			k.errorf(sk, "empty secret")
		case s.Scheme == SchemeStandardWebhooks && !validWhsec(sec):
			k.errorf(sk, "not base64 after the optional whsec_ prefix, as standard-webhooks secrets are")
		case s.Scheme != SchemeStandardWebhooks && (strings.HasSuffix(string(sec), "\n") || strings.HasSuffix(string(sec), "\r")):
			// The gateway cannot use it (every request would be a 401):
			// a file or variable read with its trailing newline, usually.
			k.errorf(sk, "ends with a line break (is it a file or variable read with its trailing newline?)")
		case strings.TrimSpace(sec.Reveal()) == "":
			// Usable, but a blank: a variable or file set to spaces by
			// mistake, which anyone can sign with.
			k.warnf(sk, "only whitespace (a variable or file set to blanks by mistake?): anyone can sign with it")
		case known:
			key := []byte(sec.Reveal())
			if s.Scheme == SchemeStandardWebhooks {
				key, _ = whsecKey(sec)
			}
			warnShortKey(k, sk, len(key))
		}
		if j := slices.Index(s.Secrets[:i], sec); j >= 0 && sec != "" {
			k.warnf(sk, "same secret as secrets[%d]", j)
		}
	}
	switch {
	case timestamped(s.Scheme) && s.Tolerance <= 0:
		k.errorf(key+".tolerance", "must be > 0: the %s scheme signs a timestamp", s.Scheme)
	case s.Tolerance < 0:
		k.errorf(key+".tolerance", "must not be negative")
	case known && !timestamped(s.Scheme) && k.inFile(key+".tolerance"):
		// Set in the file for a scheme without a signed timestamp: an
		// operator may believe old captures are refused (review 9).
		k.warnf(key+".tolerance", "ignored: the %s scheme signs no timestamp, so nothing bounds a captured request's age", s.Scheme)
	}
	switch {
	case s.Header != "":
		if err := checkHeaderName(s.Header); err != nil {
			k.errorf(key+".header", "%v", err)
		} else if known && s.Scheme != SchemeHMACSHA256 {
			k.errorf(key+".header", "only hmac-sha256 reads it, the scheme is %s: remove it", s.Scheme)
		}
	case s.Scheme == SchemeHMACSHA256:
		k.errorf(key+".header", "required with hmac-sha256: the header carrying the hex or base64 digest")
	}
}

// MinKeyBytes is the shortest signing key config check passes without a
// warning: 128 bits. A shorter one (a word, "s3cret") can be found by
// trying guesses against one signed request anyone captured, offline.
const MinKeyBytes = 16

// warnShortKey warns when a signing key (decoded, for whsec_ secrets) is
// shorter than MinKeyBytes. Its length only: never the secret.
func warnShortKey(k *checker, key string, n int) {
	if n > 0 && n < MinKeyBytes {
		k.warnf(key, "only %d bytes: short enough to be guessed from one signed request; use %d random bytes or more (the sender's own generator, or: head -c 32 /dev/urandom | base64)", n, 2*MinKeyBytes)
	}
}

// whsecKey is the key a Standard Webhooks secret stands for: base64
// after the optional whsec_ prefix.
func whsecKey(s Secret) ([]byte, error) {
	return base64.StdEncoding.DecodeString(strings.TrimPrefix(s.Reveal(), "whsec_"))
}

// validWhsec reports whether s is a Standard Webhooks secret: base64,
// optionally prefixed with whsec_, of at least one byte.
func validWhsec(s Secret) bool {
	b, err := whsecKey(s)
	return err == nil && len(b) > 0
}

func checkBarePointer(k *checker, key, p string) {
	if strings.HasPrefix(p, "json:") || strings.HasPrefix(p, "header:") {
		k.errorf(key, "want a bare JSON Pointer like /account_id, without a json: or header: prefix")
		return
	}
	if err := CheckPointer(p); err != nil {
		k.errorf(key, "%v", err)
	}
}

func checkForward(k *checker, key string, f Forward) {
	if f.URL != "" {
		u, err := url.Parse(f.URL)
		// The URL may hold credentials or a token: never quote it.
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "":
			k.errorf(key+".url", "want an absolute http:// or https:// URL")
		case !PortOK(u.Port()):
			// A typo here (:80800) would fail every event as a
			// connection error, retried for half an hour each.
			k.errorf(key+".url", "port is not a number from 1 to 65535")
		}
	}
	if f.Timeout <= 0 {
		k.errorf(key+".timeout", "must be > 0")
	}
	if f.Secret != "" {
		if f.URL == "" {
			k.warnf(key+".secret", "ignored: forward.url is empty, so nothing is forwarded")
		}
		if !validWhsec(f.Secret) {
			k.errorf(key+".secret", "not base64 after the optional whsec_ prefix: forwarded requests are signed the Standard Webhooks way")
		} else {
			b, _ := whsecKey(f.Secret)
			warnShortKey(k, key+".secret", len(b))
		}
		if len(f.Secrets) > 0 {
			k.errorf(key+".secrets", "set secret or secrets, not both (secrets: [new, old] while the receiver moves to the new one)")
		}
	}
	if f.Secret == "" && len(f.Secrets) > 0 && f.URL == "" {
		k.warnf(key+".secrets", "ignored: forward.url is empty, so nothing is forwarded")
	}
	if len(f.Secrets) == 0 && k.inFile(key+".secrets") && f.URL != "" {
		if f.Secret == "" {
			// Written, and empty: every request goes unsigned, and a
			// receiver that verifies refuses each (a 4xx: dead-lettered).
			k.warnf(key+".secrets", "an empty list: forwarded requests are not signed (remove it to send them unsigned, or list the secrets)")
		} else {
			k.warnf(key+".secrets", "an empty list, ignored: secret signs the requests (set secret or secrets, not both)")
		}
	}
	if len(f.Secrets) > MaxForwardSecrets {
		// 49 bytes of webhook-signature each: a long list makes a header
		// receivers refuse (serve's own limit is 64 KiB, nginx's 8 KiB
		// line), and every event would be dead-lettered at once.
		k.errorf(key+".secrets", "more than %d secrets (%d): a rotation needs two", MaxForwardSecrets, len(f.Secrets))
	}
	keys := make([]string, len(f.Secrets)) // decoded, to compare
	for i, sec := range f.Secrets {
		sk := fmt.Sprintf("%s.secrets[%d]", key, i)
		switch {
		case sec == "":
			k.errorf(sk, "empty: remove it, or set the secret")
		case !validWhsec(sec):
			k.errorf(sk, "not base64 after the optional whsec_ prefix: forwarded requests are signed the Standard Webhooks way")
		default:
			b, _ := whsecKey(sec)
			keys[i] = string(b)
			warnShortKey(k, sk, len(b))
			// Two variables set to one value while rotating: not a
			// rotation, and the receiver moved to "the new one" refuses.
			if j := slices.Index(keys[:i], keys[i]); j >= 0 {
				k.warnf(sk, "same secret as secrets[%d]: a rotation lists two different secrets", j)
			}
		}
	}
}

// MaxForwardSecrets bounds forward.secrets: each adds a signature to
// every forwarded request's webhook-signature header.
const MaxForwardSecrets = 16

// PortOK reports whether a URL's port (u.Port(): "" when the URL gives
// none, for the scheme's own) can be dialled: forward.url's, nats.url's.
func PortOK(port string) bool {
	if port == "" {
		return true
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535 && port[0] != '+'
}

// publishPlaceholders are what a publish template may use.
var publishPlaceholders = []string{"provider", "account", "subject", "type"}

// checkPublish checks a publish template; it returns one message per fault.
func checkPublish(t string) []string {
	var msgs []string
	if !strings.HasPrefix(t, "grants.") {
		msgs = append(msgs, `must start with "grants." (the GRANTS stream binds grants.>)`)
	}
	var b strings.Builder
	for rest := t; ; {
		i := strings.IndexAny(rest, "{}")
		if i < 0 {
			b.WriteString(rest)
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if rest[i] == '}' || j < 0 {
			return append(msgs, "unbalanced { or }")
		}
		if name := rest[i+1 : i+j]; !slices.Contains(publishPlaceholders, name) {
			msgs = append(msgs, fmt.Sprintf("unknown placeholder {%s}; want {provider}, {account}, {subject} or {type}", name))
		}
		b.WriteString(rest[:i])
		b.WriteString("x") // any filled-in value is one or more valid tokens
		rest = rest[i+j+1:]
	}
	for _, tok := range strings.Split(b.String(), ".") {
		if tok == "" || strings.ContainsAny(tok, "*> \t\r\n") {
			msgs = append(msgs, "not a valid NATS subject: no empty tokens, spaces, * or >")
			break
		}
	}
	return msgs
}

func checkHostPort(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("want host:port like 127.0.0.1:8080, got %q", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}

// checkCA checks that path (when set) is a file holding at least one PEM
// certificate.
func checkCA(k *checker, key, path string) {
	if path == "" {
		return
	}
	before := len(k.ps)
	checkFile(k, key, path)
	if len(k.ps) != before {
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		k.errorf(key, "%v", err)
		return
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		k.errorf(key, "%s holds no PEM certificate", path)
	}
}

func checkFile(k *checker, key, path string) {
	if path == "" {
		return
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		k.errorf(key, "%v", err)
	case fi.IsDir():
		k.errorf(key, "%s is a directory, want a file", path)
	}
}

// formatDuration writes d without time.Duration's trailing zero units:
// 96h, not 96h0m0s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
