package consumer

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/event"
)

// Standard Webhooks request headers and secret prefix
// (https://www.standardwebhooks.com/).
const (
	forwardHeaderID        = "webhook-id"
	forwardHeaderTimestamp = "webhook-timestamp"
	forwardHeaderSignature = "webhook-signature"
	forwardSecretPrefix    = "whsec_"
)

const (
	// forwardMaxID bounds webhook-id, as the gateway bounds event ids:
	// a longer key is sent as its evt# hash.
	forwardMaxID = 200
	// forwardDrainMax is how much of a response body is read so the
	// connection can be reused; a longer body closes the connection.
	forwardDrainMax = 64 << 10
	// forwardMaxRetryAfter clamps a Retry-After: it is the receiver's wish,
	// and a day is past any backoff the consumer would honour.
	forwardMaxRetryAfter = 24 * time.Hour
	// forwardIdleConns sizes the idle pool of the default client: one
	// Forward talks to one host, and up to this many workers can keep a
	// connection each without churning through new ones.
	forwardIdleConns = 64
)

// ForwardOptions configures NewForward.
type ForwardOptions struct {
	// URL is the absolute http:// or https:// URL the event is POSTed to.
	URL string
	// Timeout bounds one request, from dialing through reading the response;
	// it must be > 0.
	Timeout time.Duration
	// Secrets, when set, sign each request the Standard Webhooks way, one
	// signature per secret in webhook-signature (so a receiver verifies
	// with whichever it holds while the secret is rotated): each base64
	// of the key, optionally prefixed with whsec_.
	Secrets []config.Secret
	// Client sends the requests. nil: a client of this Forward's own,
	// with keep-alive and an idle pool sized for many workers. Redirects
	// are never followed, whichever client is used.
	Client *http.Client
	// Now is the clock for webhook-timestamp; nil: time.Now.
	Now func() time.Time
	// Concurrency is how many forwards may run at once (consumer.workers):
	// the own client's idle pool keeps a connection for each, so workers
	// past its default of 64 do not dial anew per event (review AN).
	// 0: that default.
	Concurrency int
}

// Forward is the forward Effect: it POSTs the event to a URL. It is safe
// for concurrent use.
type Forward struct {
	url     string   // as configured, used for requests
	printed string   // scheme://host, used in errors: paths may hold tokens (Slack-style hook URLs)
	secrets []string // forwardSecrets: cut out of errors and a refusal's excerpt
	timeout time.Duration
	keys    [][]byte // HMAC keys; none: unsigned
	client  *http.Client
	now     func() time.Time
	// pauseOf is the receiver's last 429 or 503 with Retry-After: when
	// it came and when it said the receiver takes requests again (nil:
	// none). Times keep their monotonic reading, so a wall-clock step
	// neither lengthens nor shortens a pause; announced is the pause
	// PausedUntil last said was new.
	pauseOf, announced atomic.Pointer[forwardPause]
}

// forwardPause is one Retry-After: asked at from, until until.
type forwardPause struct{ from, until time.Time }

var (
	_ Effect = (*Forward)(nil)
	_ Pauser = (*Forward)(nil)
)

// Pauser is an effect whose target can ask to be left alone for a while
// (a receiver's 429 or 503 with Retry-After): until then the events that
// would run it wait, untried, instead of each trying and failing (an
// attempt counted towards max_deliver, and one more request to a receiver
// that asked for none).
type Pauser interface {
	// PausedUntil returns when the pause ends, at most limit after it was
	// asked for (zero, or not after now: none); fresh is true the first
	// time a pause is reported that was asked after the one reported
	// before it had ended (pauses asked together are one).
	PausedUntil(now time.Time, limit time.Duration) (until time.Time, fresh bool)
	// PauseEnd is PausedUntil's until, the pause's news left untaken.
	PauseEnd(now time.Time, limit time.Duration) time.Time
}

// PausedUntil implements Pauser. A pause is at most limit long from the
// answer that asked for it (a Retry-After of a day held every event of the
// provider for a day, re-parked limit at a time); a clock that went back
// past its start ends it.
func (f *Forward) PausedUntil(now time.Time, limit time.Duration) (time.Time, bool) {
	p, until := f.pauseEnd(now, limit)
	if until.IsZero() {
		return until, false
	}
	// News only when the pause announced last had ended before this one
	// was asked: at a pause's end every worker tries at once, each gets
	// its own Retry-After, and each was announced (the line logged once
	// a worker; an operations audit, stop 41).
	old := f.announced.Swap(p)
	return until, old != p && (old == nil || !capped(old, limit).After(p.from))
}

// capped is when p ends, at most limit after it was asked for.
func capped(p *forwardPause, limit time.Duration) time.Time {
	if limit > 0 && p.until.Sub(p.from) > limit {
		return p.from.Add(limit)
	}
	return p.until
}

// PauseEnd is PausedUntil without taking the pause's news: for a report
// of the pauses (status), which must not silence the consumer's line.
func (f *Forward) PauseEnd(now time.Time, limit time.Duration) time.Time {
	_, until := f.pauseEnd(now, limit)
	return until
}

func (f *Forward) pauseEnd(now time.Time, limit time.Duration) (*forwardPause, time.Time) {
	p := f.pauseOf.Load()
	if p == nil || now.Before(p.from) {
		return nil, time.Time{}
	}
	until := capped(p, limit)
	if !until.After(now) {
		return nil, time.Time{}
	}
	return p, until
}

// pause records a receiver's Retry-After, asked at from; the latest answer
// wins (one that says less than an earlier, longer one is the receiver's
// newer word), or, answered together, the later end.
func (f *Forward) pause(from, until time.Time) {
	n := &forwardPause{from: from, until: until}
	for {
		cur := f.pauseOf.Load()
		if cur != nil && (from.Before(cur.from) || (from.Equal(cur.from) && !until.After(cur.until))) {
			return
		}
		if f.pauseOf.CompareAndSwap(cur, n) {
			return
		}
	}
}

// NewForward checks o and returns the effect. Its errors never quote the
// URL (it may hold credentials) nor the secret.
func NewForward(o ForwardOptions) (*Forward, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Opaque != "" {
		return nil, errors.New("forward url: want an absolute http:// or https:// URL")
	}
	if !config.PortOK(u.Port()) {
		return nil, errors.New("forward url: port is not a number from 1 to 65535")
	}
	if o.Timeout <= 0 {
		return nil, errors.New("forward timeout: must be > 0")
	}
	f := &Forward{
		url:     o.URL,
		printed: u.Scheme + "://" + u.Host,
		timeout: o.Timeout,
		now:     o.Now,
	}
	if f.now == nil {
		f.now = time.Now
	}
	raw := make([]string, 0, len(o.Secrets))
	for _, sec := range o.Secrets {
		raw = append(raw, sec.Reveal())
	}
	f.secrets = forwardSecrets(u, raw)
	for i, sec := range o.Secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sec.Reveal(), forwardSecretPrefix))
		if err != nil || len(key) == 0 {
			// The decoder's message holds only an offset; still, keep
			// the text fixed so nothing about the secret can leak.
			return nil, fmt.Errorf("forward secret %d of %d: want base64 (standard alphabet, padded) after an optional whsec_ prefix", i+1, len(o.Secrets))
		}
		f.keys = append(f.keys, key)
	}
	client := o.Client
	if client == nil {
		client = &http.Client{Transport: newForwardTransport(max(o.Concurrency, forwardIdleConns))}
	}
	// A copy, so the caller's client keeps its own redirect policy.
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	f.client = &c
	return f, nil
}

func newForwardTransport(idle int) *http.Transport {
	// DefaultTransport's dialer, proxy-from-environment, HTTP/2 and TLS
	// handshake timeout, with an idle pool past its 2 per host.
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = idle
	t.MaxIdleConnsPerHost = idle
	t.IdleConnTimeout = 90 * time.Second
	return t
}

// ForwardError is the error of a forward that did not get a 2xx. A
// retryable one is returned as is; any other is wrapped with Permanent.
// Use errors.As to read it (for metrics, or to honour RetryAfter).
type ForwardError struct {
	// URL is scheme://host of the target: no userinfo, path, query or
	// fragment, which may hold credentials (Slack-style hook URLs carry a
	// token in the path).
	URL string
	// Status is the HTTP status of the response; 0 when none arrived.
	Status int
	// Retryable reports a failure worth retrying: 408, 409, 429, 5xx, a
	// timeout or a connection error.
	Retryable bool
	// RetryAfter is the delay a 429 or 503 asked for in Retry-After
	// (seconds or an HTTP date), clamped to 24h; 0 when absent. The
	// processor waits at least that long, up to its longest backoff step.
	RetryAfter time.Duration
	// Err is what failed when no response arrived (a dial error,
	// context.DeadlineExceeded, context.Canceled); nil otherwise.
	Err error
	// Response is an excerpt of the receiver's answer to a non-2xx
	// (responseExcerpt: one line, credentials of the URL and secret cut
	// out, at most a few hundred bytes); "" when it said nothing
	// readable. It is not part of Error(): the reason goes to logs and
	// AUDIT, and a receiver's answer may echo the event's payload, which
	// AUDIT (undeletable) must not keep. The dead letter carries it.
	Response string

	detail string
}

// Error reads like "forward: POST https://host: 503 Service Unavailable"
// (the URL without its path or query, which may hold tokens).
func (e *ForwardError) Error() string { return "forward: POST " + e.URL + ": " + e.detail }

// Unwrap returns Err.
func (e *ForwardError) Unwrap() error { return e.Err }

// Apply POSTs ev.Body unmodified to the URL with the original Content-Type
// (application/octet-stream when there was none), Idempotency-Key: ev.Key,
// every Hookgate-* header of ev.Header, and with a secret the Standard
// Webhooks signature headers. webhook-id is ev.Key, or "evt#" and the
// SHA-256 hex of the key when the key has a byte outside 0x21-0x7E or is
// longer than 200 bytes.
//
// A 2xx response returns nil. 408, 409, 429, 5xx, a timeout (ForwardOptions.
// Timeout or ctx) and connection errors return a *ForwardError to retry.
// 409 is retried because every request carries Idempotency-Key: a receiver
// that follows the IETF Idempotency-Key draft answers 409 to a retry that
// arrives while the first request with that key is still being processed
// (a forward that timed out, tried again), and dead-lettering then would
// turn hookgate's own retry into a dead letter of an event the receiver
// is applying. A 409 that means a lasting conflict is dead-lettered after
// max_deliver attempts.
// Any other status, 3xx included (redirects are not followed), and an
// event that cannot be sent as HTTP headers (a byte no header may hold)
// return Permanent wrapping a *ForwardError.
func (f *Forward) Apply(ctx context.Context, ev Event) error {
	header, err := f.header(ev)
	if err != nil {
		return Permanent(&ForwardError{URL: f.printed, detail: err.Error()})
	}

	reqCtx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, f.url, bytes.NewReader(ev.Body))
	if err != nil {
		// The URL was checked at construction; only an odd URL the
		// parser accepts and the client does not can land here.
		return Permanent(&ForwardError{URL: f.printed, detail: "cannot build the request"})
	}
	req.Header = header

	resp, err := f.client.Do(req)
	if err != nil {
		return f.transportError(ctx, reqCtx, err)
	}
	code := resp.StatusCode
	if code == http.StatusSwitchingProtocols {
		// net/http hands over the connection itself as the body and no
		// longer watches reqCtx: a drain would wait on it for good,
		// holding the worker, the subject's lease and serve's stop
		// (review AN). No webhook receiver upgrades a POST.
		resp.Body.Close()
		return Permanent(&ForwardError{URL: f.printed, Status: code, detail: forwardStatusText(code) + " (the receiver switched protocols instead of answering the POST)"})
	}
	// Read a little of the body so the connection goes back to the pool;
	// the read ends with reqCtx (net/http cuts a body read at it). A
	// refusal's first bytes are kept: why the receiver refused is what an
	// operator reading the dead letter needs first.
	var said []byte
	if code < 200 || code > 299 {
		said, _ = io.ReadAll(io.LimitReader(resp.Body, forwardResponseRead))
	}
	_, _ = io.CopyN(io.Discard, resp.Body, forwardDrainMax-int64(len(said)))
	resp.Body.Close()

	if code >= 200 && code <= 299 {
		return nil
	}
	fe := &ForwardError{URL: f.printed, Status: code, detail: forwardStatusText(code), Response: responseExcerpt(said, f.secrets)}
	switch {
	case code == http.StatusRequestTimeout || code == http.StatusConflict || code == http.StatusTooManyRequests || (code >= 500 && code <= 599):
		fe.Retryable = true
		if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
			now := f.now()
			fe.RetryAfter = forwardRetryAfter(resp.Header.Get("Retry-After"), now)
			if fe.RetryAfter > 0 {
				f.pause(now, now.Add(fe.RetryAfter))
			}
		}
		return fe
	case code >= 300 && code <= 399:
		fe.detail += " (redirects are not followed; configure the final URL"
		// Where it points, without path or query (they may hold tokens,
		// as forward.url's may).
		if loc, err := resp.Location(); err == nil && loc.Host != "" && plainASCII(loc.Scheme+loc.Host) {
			if resp.Request != nil && resp.Request.URL != nil && loc.Scheme == resp.Request.URL.Scheme && loc.Host == resp.Request.URL.Host {
				// Naming the configured host again told the operator
				// nothing (a 3 a.m. audit, stop 38).
				fe.detail += ": it points to another path on the same host"
			} else {
				fe.detail += ": it points to " + loc.Scheme + "://" + loc.Host
			}
		}
		fe.detail += ")"
	}
	return Permanent(fe)
}

// header builds the request headers, or says why ev cannot be sent.
func (f *Forward) header(ev Event) (http.Header, error) {
	if ev.Key == "" || !forwardHeaderValueOK(ev.Key) {
		return nil, errors.New("the key cannot be sent as Idempotency-Key: empty or a control byte")
	}
	h := make(http.Header, 8)
	var quoted []string // Hookgate-* headers this request Go-quotes
	for name, values := range ev.Header {
		// Stored headers may come back from NATS in any case.
		if len(name) < len(event.HeaderPrefix) || !strings.EqualFold(name[:len(event.HeaderPrefix)], event.HeaderPrefix) {
			continue
		}
		if !forwardHeaderNameOK(name) {
			return nil, fmt.Errorf("header %.80q: not a valid HTTP header name", name)
		}
		for _, v := range values {
			if !forwardHeaderValueOK(v) {
				// A control byte stored raw: only versions before the
				// quoting of extracted values wrote such values. Send it
				// the way hookgate stores them now, Go-quoted and listed in
				// Hookgate-Quoted, rather than never deliver the event.
				v = strconv.Quote(v)
				quoted = append(quoted, http.CanonicalHeaderKey(name))
			}
			h.Add(name, v)
		}
	}
	if len(quoted) > 0 {
		if prev := h.Get(event.HeaderQuoted); prev != "" {
			quoted = append(strings.Split(prev, ","), quoted...)
		}
		slices.Sort(quoted)
		h.Set(event.HeaderQuoted, strings.Join(slices.Compact(quoted), ","))
	}
	ct := forwardHeaderGet(ev.Header, "Content-Type")
	if ct == "" {
		ct = "application/octet-stream"
	} else if !forwardHeaderValueOK(ct) {
		return nil, errors.New("header Content-Type: value has a control byte no HTTP header may hold")
	}
	h.Set("Content-Type", ct)
	// Under its lower-case name (HTTP reads header names alike; HTTP/2
	// sends them so anyway): net/http's transport takes a request with
	// the canonical one for safe to send again, and resent the POST by
	// itself, at once and on the next pooled connection, when a reused
	// keep-alive connection closed before the answer: a receiver that
	// hung up got more POSTs than consumer.max_deliver, counted as one
	// attempt (audit 42: 6 for max_deliver 3). It looks the header up
	// under that name only (Request.isReplayable). A request it wrote
	// nothing of is still sent again, as the receiver never saw it.
	// Retries are consumer.backoff's alone.
	h[idempotencyKeyHeader] = []string{ev.Key}
	h.Set("User-Agent", "hookgate")
	if len(f.keys) > 0 {
		id := forwardWebhookID(ev.Key)
		ts := strconv.FormatInt(f.now().Unix(), 10)
		// One signature per key, space-separated, as the spec allows
		// for rotation: a receiver accepts the request when any of them
		// verifies with the secret it holds.
		var sigs []byte
		for i, key := range f.keys {
			m := hmac.New(sha256.New, key)
			m.Write([]byte(id))
			m.Write([]byte{'.'})
			m.Write([]byte(ts))
			m.Write([]byte{'.'})
			m.Write(ev.Body)
			if i > 0 {
				sigs = append(sigs, ' ')
			}
			sigs = append(sigs, "v1,"...)
			sigs = base64.StdEncoding.AppendEncode(sigs, m.Sum(nil))
		}
		// Lower-case names, as the spec writes them; set directly so Go
		// does not canonicalize them (HTTP names are case-insensitive
		// anyway, and HTTP/2 lower-cases every name).
		h[forwardHeaderID] = []string{id}
		h[forwardHeaderTimestamp] = []string{ts}
		h[forwardHeaderSignature] = []string{string(sigs)}
	}
	return h, nil
}

// forwardWebhookID is the key when it is safe as a webhook-id (printable
// ASCII without space, at most 200 bytes), else "evt#" and its SHA-256 hex,
// the way the gateway hashes an unsafe event id.
func forwardWebhookID(key string) string {
	safe := len(key) <= forwardMaxID
	for i := 0; safe && i < len(key); i++ {
		safe = key[i] >= 0x21 && key[i] <= 0x7E
	}
	if safe {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "evt#" + hex.EncodeToString(sum[:])
}

// forwardHeaderGet is h.Get, tolerating names stored in any case.
func forwardHeaderGet(h http.Header, name string) string {
	if v := h.Get(name); v != "" {
		return v
	}
	for k, vs := range h {
		if strings.EqualFold(k, name) && len(vs) > 0 {
			return vs[0]
		}
	}
	return ""
}

// forwardHeaderValueOK mirrors what net/http refuses to send: control
// bytes other than tab, and DEL.
func forwardHeaderValueOK(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; (b < 0x20 && b != '\t') || b == 0x7F {
			return false
		}
	}
	return true
}

// forwardHeaderNameOK reports whether name is an HTTP token (RFC 9110).
func forwardHeaderNameOK(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		b := name[i]
		switch {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0:
		default:
			return false
		}
	}
	return true
}

// transportError classifies a failure without a response. All are
// retryable: the receiver may never have seen the request, and one that
// did dedups on Idempotency-Key. ctx is Apply's context, reqCtx the
// request's, which adds the timeout.
func (f *Forward) transportError(ctx, reqCtx context.Context, err error) error {
	// A *url.Error quotes the whole URL, query included: keep its cause.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	fe := &ForwardError{URL: f.printed, Retryable: true, Err: err}
	// Once a context is done the client reports that in several ways
	// (the context's error, "request canceled", a closed connection): go
	// by the contexts themselves.
	switch {
	case ctx.Err() != nil:
		fe.Err = ctx.Err()
		fe.detail = "gave up: " + ctx.Err().Error()
	case reqCtx.Err() != nil:
		fe.Err = reqCtx.Err()
		fe.detail = "no response within " + f.timeout.String()
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		// net/http's word for a peer that hung up: "EOF" named no cause
		// (an operations audit, stop 41).
		fe.detail = "the receiver closed the connection without an answer (" + err.Error() + ")"
	default:
		fe.detail = err.Error()
		// Belt and braces: transport errors are not expected to quote
		// the URL, but if one did, its credentials are cut out of it.
		for _, s := range f.secrets {
			fe.detail = replaceFoldASCII(fe.detail, s, "REDACTED")
		}
	}
	return fe
}

// plainASCII reports whether s is printable ASCII only: a receiver's
// redirect host may decode to control or bidi characters (%E2%80%AE), which
// reasons carry into DLQ, AUDIT and terminals (review AQ).
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func forwardStatusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return strconv.Itoa(code) + " " + t
	}
	return strconv.Itoa(code)
}

// forwardRetryAfter reads Retry-After as delay-seconds or an HTTP date;
// 0 when absent, malformed or in the past.
func forwardRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if strings.Trim(v, "0123456789") == "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n >= uint64(forwardMaxRetryAfter/time.Second) {
			return forwardMaxRetryAfter // only a range error is possible
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), forwardMaxRetryAfter)
	}
	return 0
}

// idempotencyKeyHeader is Idempotency-Key as Forward writes it (see header).
const idempotencyKeyHeader = "idempotency-key"
