package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
)

// answer is the JSON body of every webhook answer.
type answer struct {
	Status string `json:"status,omitempty"`
	Key    string `json:"key,omitempty"`
	Error  string `json:"error,omitempty"`
}

// handleWebhook serves POST /webhooks/{provider}: body cap, signature,
// key, durable store, answer. The order is the security contract: nothing
// about an unauthenticated body is derived, claimed or stored.
func (s *server) handleWebhook() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The write timeout runs from when the request's headers were read:
		// the publish must end before it, whatever the body took, or the
		// answer is lost (a slow body leaves the store less time; at
		// worst the sender gets a 408 and retries).
		entered := time.Now()
		start := s.deps.Now()
		name := providerName(r)
		p := s.providers[name]
		if p == nil {
			s.metrics.unknownProvider.Inc()
			writeUnknownProvider(w, name)
			return
		}
		defer func() { p.metrics.requestSeconds.Observe(time.Since(start).Seconds()) }()

		if err := plainEncoding(r.Header); err != nil {
			s.reject(w, p, "", err)
			return
		}
		body, err := readBody(w, r, s.maxBody)
		if err != nil {
			s.reject(w, p, "", err)
			return
		}
		if err := p.scheme.Verify(r.Header, body, p.secrets, start); err != nil {
			s.reject(w, p, "", err)
			return
		}
		withHost(r)
		pl := NewPayload(r.Header, body, r.Header.Get("Content-Type"))
		pl.skimFor(p.skim)
		k, err := DeriveKey(p.rule, pl)
		if err != nil {
			s.reject(w, p, "", err)
			return
		}
		// The rate limit is for new events: a redelivery of a stored one
		// is answered duplicate whatever the rate (the contract's 200 for
		// a key seen before; a 429 kept the sender retrying it) and takes
		// nothing from the budget, so a storm of retries cannot hold new
		// events back.
		if p.limiter != nil && !s.knownKey(k.Key) {
			if res := p.limiter.ReserveN(start, 1); !res.OK() || res.DelayFrom(start) > 0 {
				delay := res.DelayFrom(start)
				res.CancelAt(start)
				s.rateLimited(w, p, k, delay)
				return
			}
		}
		hdr, err := s.storedHeaders(r.Header, p, pl, k, start)
		if err != nil {
			s.rejectAs(w, p, k.Account, k.Key, err)
			return
		}

		// Not cancelled when the sender hangs up: a publish under way may
		// land anyway, and the answer, audit record and log must say what
		// happened. Deadline bounds it instead (answer before the write
		// timeout; a slow store is a 503 the sender retries).
		pubStart := time.Now()
		deadline := s.publishDeadline(entered, pubStart)
		if deadline.Sub(pubStart) < config.MinPublishTime {
			// The body took the answer's time (http.timeouts.write runs
			// from the end of the headers): a publish now would fail
			// without a try and read as a store outage (a 503, an ERROR
			// line, the unavailable metric), and its answer could come
			// after the write deadline. The sender's slowness: 408.
			s.rejectAs(w, p, k.Account, k.Key, fmt.Errorf("%w: the request took %s to arrive, leaving no time to store it within http.timeouts.write (%s); retry",
				errBodyTimeout, pubStart.Sub(entered).Round(time.Millisecond), s.writeTimeout))
			return
		}
		res, err := s.deps.Publisher.Publish(context.WithoutCancel(r.Context()), jetstream.Message{
			Subject:  event.WebhookSubject(p.name, k.AccountInKey),
			Key:      k.Key,
			Header:   hdr,
			Body:     body,
			Deadline: deadline,
			// A first write whose answer came late is "accepted", not
			// "duplicate".
			TellOwnWrite: true,
		})
		took := time.Since(pubStart).Seconds()
		if err != nil {
			s.metrics.publishSeconds.WithLabelValues(name, "failed").Observe(took)
			if errors.Is(err, jetstream.ErrTooLarge) {
				// The store refuses this event for good (a cluster whose
				// limit is below the body's): a rejection the sender must
				// not retry, not an outage (it was counted and logged as
				// "unavailable", at error; a metrics audit, stop 38).
				s.rejectAs(w, p, k.Account, k.Key, fmt.Errorf("%w: event too large for the event store", errTooLarge))
				return
			}
			s.unavailable(w, p, k.Key, k.Account, err)
			return
		}
		decision, status := event.DecisionAccepted, "accepted"
		if res.Duplicate {
			decision, status = event.DecisionDuplicate, "duplicate"
			p.metrics.publishDuplicate.Observe(took)
			p.metrics.duplicate.Inc()
		} else {
			p.metrics.publishStored.Observe(took)
			p.metrics.accepted.Inc()
		}
		// Debug: AUDIT has this decision durably; see config.Log.
		s.log.LogAttrs(r.Context(), slog.LevelDebug, "webhook",
			slog.String("provider", name), slog.String("account", k.Account),
			slog.String("key", k.Key), slog.Uint64("seq", res.Seq), slog.String("decision", decision))
		// Stamped when the store answered, the decision's time: stamped at
		// the request's start, a write that waited out a failover read in
		// `trace` as accepted seconds before WEBHOOKS stored it (review BI).
		s.deps.Audit.Record(event.AuditRecord{
			Time: s.deps.Now().UTC(), Decision: decision, Provider: name, Account: k.Account,
			Key: k.Key, Seq: res.Seq, Status: http.StatusOK, Actor: event.ActorGateway,
		})
		writeOK(w, status, k.Key)
	})
}

// maxPrealloc is the most readBody allocates before the bytes arrive.
const maxPrealloc = 64 << 10

// readBody reads at most limit bytes; a larger body is errTooLarge.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, fmt.Errorf("%w: %d bytes, max_body_bytes is %d", errTooLarge, r.ContentLength, limit)
	}
	rd := http.MaxBytesReader(w, r.Body, limit)
	if n := r.ContentLength; n >= 0 {
		// Read exactly the declared length (net/http reports a body
		// shorter than declared as io.ErrUnexpectedEOF and never returns
		// bytes beyond it). Up to maxPrealloc in one allocation; beyond,
		// the declared length is not trusted with memory before the bytes
		// come (an unauthenticated sender could pin max_body_bytes per
		// connection for timeouts.read by declaring it and sending
		// nothing): the buffer doubles as they arrive, never past n.
		body := make([]byte, 0, min(n, maxPrealloc))
		for int64(len(body)) < n {
			if len(body) == cap(body) {
				body = append(make([]byte, 0, min(2*int64(cap(body)), n)), body...)
			}
			k, err := rd.Read(body[len(body):cap(body)])
			body = body[:len(body)+k]
			switch {
			case err == io.EOF && int64(len(body)) < n:
				return nil, bodyError(io.ErrUnexpectedEOF, limit)
			case err != nil && err != io.EOF:
				return nil, bodyError(err, limit)
			}
		}
		return body, nil
	}
	// No declared length (chunked): grow as bytes come.
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(rd); err != nil {
		return nil, bodyError(err, limit)
	}
	return buf.Bytes(), nil
}

// plainEncoding refuses a compressed body (415): stored as sent, it would
// reach GRANTS and forward receivers as bytes nobody can read, and a
// provider needing JSON would see a misleading "invalid UTF-8".
func plainEncoding(h http.Header) error {
	for _, v := range h.Values("Content-Encoding") {
		for _, enc := range strings.Split(v, ",") {
			if enc = strings.TrimSpace(enc); enc != "" && !strings.EqualFold(enc, "identity") {
				return fmt.Errorf("%w %q: send the body uncompressed", errEncoding, truncate(enc, 64))
			}
		}
	}
	return nil
}

// knownKey reports whether the publisher knows key as stored; false when
// it cannot tell without a write.
func (s *server) knownKey(key string) bool {
	l, ok := s.deps.Publisher.(KeyLookup)
	return ok && l.Known(key)
}

// publishDeadline bounds a publish started at pubStart for a request
// whose handler was entered at entered: publishLimit, and no later than
// config.PublishMargin before the write timeout, so the answer is written
// before the connection's write deadline. A publish is started only with
// config.MinPublishTime or more left (the store answers within
// milliseconds when well).
func (s *server) publishDeadline(entered, pubStart time.Time) time.Time {
	d := pubStart.Add(s.publishLimit)
	if s.writeTimeout > 0 {
		d = minTime(d, entered.Add(s.writeTimeout-config.PublishMargin(s.writeTimeout)))
	}
	return d
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// bodyError says why reading a request body failed.
func bodyError(err error, limit int64) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return fmt.Errorf("%w: over max_body_bytes (%d)", errTooLarge, limit)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: request body not received within http.timeouts.read", errBodyTimeout)
	}
	// A network error names the connection's addresses: keep them
	// out of the answer and the audit record.
	var op *net.OpError
	if errors.As(err, &op) {
		err = op.Err
	}
	return fmt.Errorf("%w: reading body: %v", errBodyRead, err)
}

var (
	errBodyRead    = errors.New("bad request body")
	errBodyTimeout = errors.New("request timeout")
)

// reject answers a 4xx for a known provider, audits it (rate-limited) and
// counts it.
func (s *server) reject(w http.ResponseWriter, p *provider, key string, err error) {
	s.rejectAs(w, p, "", key, err)
}

// rejectAs is reject for a request whose key (and account) were derived:
// the record names the account too (review 9: a 400 found after the key
// was recorded without it).
func (s *server) rejectAs(w http.ResponseWriter, p *provider, account, key string, err error) {
	status := statusOf(err)
	switch {
	case errors.Is(err, errBodyRead):
		status = http.StatusBadRequest
	case errors.Is(err, errBodyTimeout):
		status = http.StatusRequestTimeout
		// The write deadline (http.timeouts.write from the end of the
		// headers) falls about when the read one (timeouts.read from the
		// request's start) did, with the defaults' equal 30 s: the 408 was
		// cut off and the sender got a closed connection (review AL). A
		// few seconds more, for this answer only.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(5 * time.Second))
	}
	msg := err.Error()
	s.metrics.requests.WithLabelValues(p.name, event.DecisionRejected, fmt.Sprint(status)).Inc()
	now := s.deps.Now()
	// The log line goes with the audit record, under the same limit: an
	// unauthenticated flood must not fill the disk through the log either.
	write := func(suppressed int) {
		s.log.LogAttrs(context.Background(), slog.LevelWarn, "webhook rejected",
			slog.String("provider", p.name), slog.String("account", account), slog.String("key", key),
			slog.String("decision", event.DecisionRejected), slog.Int("status", status), slog.String("reason", msg),
			slog.Int("suppressed", suppressed))
		s.deps.Audit.Record(event.AuditRecord{
			Time: now.UTC(), Decision: event.DecisionRejected, Provider: p.name, Account: account, Key: key,
			Status: status, Reason: msg, Actor: event.ActorGateway, Suppressed: suppressed,
		})
	}
	// A window per status: "suppressed" counts like records, and a 400's
	// record carried the 401s held back before it (audit 42).
	s.limitedIn(p, p.name+" "+strconv.Itoa(status), now, write)
	writeJSON(w, status, answer{Error: msg})
}

// limitedIn runs write (a rejection's record and log line) now when the
// limiter's window named window lets it, with how many held-back ones it
// stands for; else counts it held back (metric) and keeps write for the
// end of the second, should no record come to carry the count
// (rejectLimiter). Each status has a window of its own; 429s have
// one of their own, so a sender over its rate cannot take the
// rejections' records (review Z: a 401 among 429s left no log line, its
// count carried by a 429's record, which logs nothing).
func (s *server) limitedIn(p *provider, window string, now time.Time, write func(suppressed int)) {
	if !s.rejects.do(window, now, write) {
		s.metrics.auditSuppressed.WithLabelValues(p.name).Inc()
	}
}

// rateLimited answers 429 with Retry-After (whole seconds, at least 1):
// the provider is over its configured rate. Nothing was stored.
func (s *server) rateLimited(w http.ResponseWriter, p *provider, k DerivedKey, delay time.Duration) {
	s.metrics.requests.WithLabelValues(p.name, "rate-limited", "429").Inc()
	secs := int((delay + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	now := s.deps.Now()
	s.limitedIn(p, p.name+" 429", now, func(suppressed int) {
		// Its key and account, as the other rejections found once the key
		// is derived: without them `trace KEY` said the event was never
		// seen (audit 42).
		s.deps.Audit.Record(event.AuditRecord{
			Time: now.UTC(), Decision: event.DecisionRejected, Provider: p.name, Account: k.Account, Key: k.Key,
			Status: http.StatusTooManyRequests, Reason: "rate limit", Actor: event.ActorGateway, Suppressed: suppressed,
		})
	})
	w.Header().Set("Retry-After", fmt.Sprint(secs))
	writeJSON(w, http.StatusTooManyRequests, answer{Error: fmt.Sprintf("rate limit for provider %s exceeded; retry in %ds", p.name, secs)})
}

// unavailable answers 503 with Retry-After: nothing was stored, the sender
// must retry.
func (s *server) unavailable(w http.ResponseWriter, p *provider, key, account string, err error) {
	status := statusOf(err)
	s.metrics.requests.WithLabelValues(p.name, "unavailable", fmt.Sprint(status)).Inc()
	// Limited like rejections: a store away for minutes under a steady
	// rate must not flood the log (the metric counts every one).
	logLine := func(suppressed int) {
		s.log.LogAttrs(context.Background(), slog.LevelError, "webhook not stored",
			slog.String("provider", p.name), slog.String("account", account), slog.String("key", key),
			slog.Int("status", status), slog.String("error", err.Error()), slog.Int("suppressed", suppressed))
	}
	s.unstored.do(p.name, s.deps.Now(), logLine)
	// The publish ended before the write deadline (publishDeadline), but
	// a deadline can be overshot (a GC pause, a busy host), and a 503 the
	// sender never reads is retried as a timeout, later: a few seconds
	// more for this answer, as for a 408. A safeguard no test forces.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(5 * time.Second))
	msg := "event store unavailable; retry later"
	retry := "5"
	switch {
	case errors.Is(err, jetstream.ErrStreamFull):
		msg, retry = "event store full; retry later", "60"
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retry)
	}
	writeJSON(w, status, answer{Error: msg})
}

// Bounds on what storedHeaders copies, so that with the Hookgate-* headers
// the header block stays under JetStream's 64 KiB limit (and the message
// under max_body_bytes + 64 KiB): 48 KiB + 4 x 1 KiB + key and fixed headers.
const (
	MaxStoredRequestHeaders = 48 << 10
	MaxExtractedValue       = 1 << 10
)

// storedHeaders is the header set stored with the event: the request's
// headers minus credentials, hop-by-hop ones and anything that would steer
// JetStream (Nats-*; Status and Description with an empty body) or
// impersonate hookgate (Hookgate-*), plus the Hookgate-* headers with the
// extracted raw values.
func (s *server) storedHeaders(in map[string][]string, p *provider, pl *Payload, k DerivedKey, now time.Time) (map[string][]string, error) {
	h := make(map[string][]string, len(in)+7)
	hop := hopHeaders(in)
	size := 0
	for name, vals := range in {
		if dropHeader(name, hop) || len(pl.body) == 0 && statusHeader(name) {
			continue
		}
		for _, v := range vals {
			size += len(name) + len(v) + 4 // "Name: value\r\n"
		}
		h[name] = vals
	}
	if size > MaxStoredRequestHeaders {
		return nil, fmt.Errorf("%w: %d bytes would be stored with the event, at most %d", errHeadersTooLarge, size, MaxStoredRequestHeaders)
	}
	var quoted []string // headers whose value is Go-quoted
	account, q := event.HeaderValue(k.Account)
	if q {
		quoted = append(quoted, event.HeaderAccount)
	}
	if len(account) > MaxExtractedValue {
		// The contract makes any account a key ("never an error"): store
		// the bounded form the key and the WEBHOOKS subject carry.
		account, quoted = k.AccountInKey, nil
	}
	// One backing array for the Hookgate-* values instead of a slice each.
	vals := make([]string, 0, 7)
	set := func(name, v string) {
		vals = append(vals, v)
		h[name] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	set(event.HeaderKey, k.Key)
	set(event.HeaderProvider, p.name)
	set(event.HeaderAccount, account)
	set(event.HeaderReceivedAt, now.UTC().Format(time.RFC3339Nano))
	for _, f := range []struct {
		src  *Source
		name string
	}{{p.subject, event.HeaderSubject}, {p.occurredAt, event.HeaderOccurredAt}, {p.typ, event.HeaderType}} {
		if f.src == nil {
			continue
		}
		v, ok, err := pl.Lookup(*f.src)
		if err != nil {
			return nil, err
		}
		if ok {
			if len(v) > MaxExtractedValue {
				return nil, fmt.Errorf("%w: %s is %d bytes, at most %d", errValueTooLong, f.src, len(v), MaxExtractedValue)
			}
			sv, q := event.HeaderValue(v)
			if q {
				quoted = append(quoted, f.name)
			}
			set(f.name, sv)
		}
	}
	if len(quoted) > 0 {
		h[event.HeaderQuoted] = []string{strings.Join(quoted, ",")}
	}
	for name, vs := range h {
		k, bad := hidesNatsHeader(name)
		for i := 0; !bad && i < len(vs); i++ {
			k, bad = hidesNatsHeader(vs[i])
		}
		if bad {
			return nil, fmt.Errorf("%w: header %s holds %q twice in a row, which NATS would take for hiding its own %s header (the event's key from the duplicate check); refused", errHidesNatsHeader, truncate(name, 64), k, k)
		}
	}
	return h, nil
}

// natsLookedUp are the headers nats-server looks up in a message hookgate
// stores (WEBHOOKS, GRANTS, DLQ): the key and the sequenced publish's
// conditions.
var natsLookedUp = []string{"Nats-Msg-Id", "Nats-Expected-Stream", "Nats-Expected-Last-Sequence",
	"Nats-Expected-Last-Msg-Id", "Nats-Expected-Last-Subject-Sequence", "Nats-Expected-Last-Subject-Sequence-Subject"}

// hidesNatsHeader reports text that would hide a header nats-server looks
// up, and which. nats-server (2.15) finds a header by searching the header
// block for its name; after a match that does not start a line it gives up
// when the next match begins within two bytes ("Nats-Msg-IdNats-Msg-Id"),
// and the header block's order is nats.go's map order: a stored request
// header holding that, written before the real Nats-Msg-Id, hid the key
// from JetStream's duplicate check, and one captured delivery sent again
// with such a header was stored again each time (review AL; the key index
// caught repeats on the embedded server, an external one stored them).
func hidesNatsHeader(text string) (string, bool) {
	for i := strings.Index(text, "Nats-"); i >= 0; {
		for _, k := range natsLookedUp {
			if !strings.HasPrefix(text[i:], k) {
				continue
			}
			if rest := text[i+len(k):]; strings.HasPrefix(rest, k) || rest != "" && strings.HasPrefix(rest[1:], k) {
				return k, true
			}
		}
		j := strings.Index(text[i+1:], "Nats-")
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return "", false
}

func hopHeaders(in map[string][]string) map[string]bool {
	conn := in["Connection"]
	if len(conn) == 0 {
		return nil
	}
	m := map[string]bool{}
	for _, v := range conn {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				m[textproto.CanonicalMIMEHeaderKey(f)] = true
			}
		}
	}
	return m
}

func dropHeader(name string, hop map[string]bool) bool {
	switch name {
	case "Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	if hop[name] || config.CredentialHeader(name) {
		return true
	}
	return hasPrefixFold(name, "nats-") || hasPrefixFold(name, "hookgate-")
}

// statusHeader reports the headers NATS gives a message without payload
// as a status: stored with an empty body, a request's "Status: 408" made
// nats.go's pull take the event for a pull timeout and never hand it over
// ("Status: 409" with "Description: Consumer Deleted" ended the consumer's
// pull; review F). They are not stored with an empty body.
func statusHeader(name string) bool {
	return strings.EqualFold(name, "Status") || strings.EqualFold(name, "Description")
}

// hasPrefixFold is strings.HasPrefix ignoring ASCII case, without the
// allocation of lower-casing every header name of every request.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{"error":"internal error"}`)
		status = http.StatusInternalServerError
	}
	setJSONContentType(w.Header())
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// setJSONContentType sets Content-Type to application/json without
// allocating its value: every answer pays for it.
func setJSONContentType(h http.Header) {
	// A fresh slice literal of constant strings is still an allocation
	// per call; this one is shared, and full (len == cap), so an Add
	// elsewhere copies it rather than write into it.
	h["Content-Type"] = jsonContentType[:1:1]
}

var jsonContentType = []string{"application/json"}

// writeOK writes a 200 answer as writeJSON(answer{Status, Key}) would,
// without reflection: every stored or duplicate request pays for it. Keys
// are printable ASCII by construction; one with a character encoding/json
// escapes takes the general path, so the bytes are always the same.
func writeOK(w http.ResponseWriter, status, key string) {
	if key == "" { // omitempty
		writeJSON(w, http.StatusOK, answer{Status: status})
		return
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			writeJSON(w, http.StatusOK, answer{Status: status, Key: key})
			return
		}
	}
	b := make([]byte, 0, len(`{"status":"","key":""}`)+len(status)+len(key)+1)
	b = append(b, `{"status":"`...)
	b = append(b, status...)
	b = append(b, `","key":"`...)
	b = append(b, key...)
	b = append(b, "\"}\n"...)
	setJSONContentType(w.Header())
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// writeUnknownProvider answers a webhook to a provider the config lacks.
func writeUnknownProvider(w http.ResponseWriter, name string) {
	writeJSON(w, http.StatusNotFound, answer{Error: fmt.Sprintf("unknown provider %q", truncate(name, 64))})
}

// withHost puts the request's Host back among its headers: net/http
// moves it to r.Host, so a `header:Host` source (an account per tenant
// host name) found nothing and every tenant shared one account, and the
// stored event lacked a request header the contract keeps.
func withHost(r *http.Request) {
	if _, ok := r.Header["Host"]; !ok && r.Host != "" {
		r.Header["Host"] = []string{r.Host}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
