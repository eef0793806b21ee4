package consumer

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookgate/hookgate/config"
)

// forwardTestSecret is a Standard Webhooks secret; its decoded key is
// "forward-test-secret-0123456789ab".
var forwardTestSecret = config.Secret("whsec_" + base64.StdEncoding.EncodeToString([]byte("forward-test-secret-0123456789ab")))

// forwardBody has bytes a careless forwarder would touch: CRLF, trailing
// space, a NUL, invalid UTF-8.
var forwardBody = []byte("{\"grant_id\":\"G-42\", \"amount\": 1.50 }\r\n\x00\xff ")

// capturedRequest is what the test server saw.
type capturedRequest struct {
	method, path, query string
	header              http.Header
	body                []byte
}

// newCaptureServer answers every request with status (200 when 0) and
// hands what it saw to the returned channel.
func newCaptureServer(t *testing.T, status int) (*httptest.Server, <-chan capturedRequest) {
	t.Helper()
	seen := make(chan capturedRequest, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("server: reading body: %v", err)
		}
		seen <- capturedRequest{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), body}
		if status != 0 {
			w.WriteHeader(status)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, seen
}

func newTestForward(t *testing.T, o ForwardOptions) *Forward {
	t.Helper()
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	f, err := NewForward(o)
	if err != nil {
		t.Fatalf("NewForward: %v", err)
	}
	t.Cleanup(f.client.CloseIdleConnections)
	return f
}

func forwardTestEvent() Event {
	return Event{
		Key:      "grantsgov:default:evt:msg_2a3b4c",
		Provider: "grantsgov",
		Account:  "default",
		Body:     bytes.Clone(forwardBody),
		Header: http.Header{
			"Content-Type":         {"application/json; charset=utf-8"},
			"Hookgate-Key":         {"grantsgov:default:evt:msg_2a3b4c"},
			"Hookgate-Provider":    {"grantsgov"},
			"Hookgate-Account":     {"default"},
			"Hookgate-Received-At": {"2026-11-30T10:00:01.123456789Z"},
			"Hookgate-Subject":     {"G-42"},
			"Hookgate-Occurred-At": {"2026-11-30T10:00:00Z"},
			"hookgate-type":        {"award.disbursed"}, // NATS keeps the case it was given
			// The sender's own headers stay behind.
			"Webhook-Id":        {"msg_2a3b4c"},
			"Webhook-Signature": {"v1,c2VuZGVyJ3Mgb3duIHNpZ25hdHVyZQ=="},
			"X-Request-Id":      {"abc"},
			"User-Agent":        {"Svix-Webhooks/1.0"},
		},
	}
}

func TestForwardRequest(t *testing.T) {
	srv, seen := newCaptureServer(t, http.StatusNoContent)
	f := newTestForward(t, ForwardOptions{URL: srv.URL + "/hooks/grants?team=7", Secrets: []config.Secret{forwardTestSecret}})
	ev := forwardTestEvent()
	if err := f.Apply(t.Context(), ev); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	got := <-seen

	if got.method != http.MethodPost || got.path != "/hooks/grants" || got.query != "team=7" {
		t.Errorf("request = %s %s?%s, want POST /hooks/grants?team=7", got.method, got.path, got.query)
	}
	if !bytes.Equal(got.body, forwardBody) {
		t.Errorf("body = %q, want %q", got.body, forwardBody)
	}
	for name, want := range map[string]string{
		"Content-Type":         "application/json; charset=utf-8",
		"Content-Length":       strconv.Itoa(len(forwardBody)),
		"Idempotency-Key":      ev.Key,
		"Hookgate-Key":         ev.Key,
		"Hookgate-Provider":    "grantsgov",
		"Hookgate-Account":     "default",
		"Hookgate-Received-At": "2026-11-30T10:00:01.123456789Z",
		"Hookgate-Subject":     "G-42",
		"Hookgate-Occurred-At": "2026-11-30T10:00:00Z",
		"Hookgate-Type":        "award.disbursed",
		"Webhook-Id":           ev.Key,
		"User-Agent":           "hookgate",
		"X-Request-Id":         "",
	} {
		if vs := got.header.Values(name); strings.Join(vs, ", ") != want || len(vs) > 1 {
			t.Errorf("header %s = %q, want %q", name, vs, want)
		}
	}
	if err := mustWebhook(t, forwardTestSecret.Reveal()).Verify(got.body, got.header); err != nil {
		t.Errorf("standardwebhooks Verify: %v (headers %v)", err, got.header)
	}
	other := "whsec_" + base64.StdEncoding.EncodeToString([]byte("some-other-secret"))
	if err := mustWebhook(t, other).Verify(got.body, got.header); err == nil {
		t.Error("standardwebhooks Verify with another secret succeeded")
	}
}

// Several secrets (forward.secrets, a rotation) sign each request once
// each, space-separated in webhook-signature: the reference library
// verifies it with either secret, and with no other.
func TestForwardSignsWithEverySecretWhileRotating(t *testing.T) {
	srv, seen := newCaptureServer(t, 0)
	next := config.Secret("whsec_" + base64.StdEncoding.EncodeToString([]byte("the-next-forward-secret")))
	f := newTestForward(t, ForwardOptions{URL: srv.URL, Secrets: []config.Secret{next, forwardTestSecret}})
	if err := f.Apply(t.Context(), forwardTestEvent()); err != nil {
		t.Fatal(err)
	}
	got := <-seen
	sigs := strings.Fields(got.header.Get("webhook-signature"))
	if len(sigs) != 2 {
		t.Fatalf("webhook-signature = %q, want two signatures", got.header.Get("webhook-signature"))
	}
	for _, sec := range []config.Secret{next, forwardTestSecret} {
		if err := mustWebhook(t, sec.Reveal()).Verify(got.body, got.header); err != nil {
			t.Errorf("standardwebhooks Verify with one of the secrets: %v (headers %v)", err, got.header)
		}
	}
	other := "whsec_" + base64.StdEncoding.EncodeToString([]byte("some-other-secret"))
	if err := mustWebhook(t, other).Verify(got.body, got.header); err == nil {
		t.Error("standardwebhooks Verify with another secret succeeded")
	}
}

func mustWebhook(t *testing.T, secret string) *standardwebhooks.Webhook {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatalf("standardwebhooks.NewWebhook: %v", err)
	}
	return wh
}

func TestForwardSignatureClock(t *testing.T) {
	srv, seen := newCaptureServer(t, 0)
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	// The secret without its whsec_ prefix works the same.
	secret := config.Secret(strings.TrimPrefix(forwardTestSecret.Reveal(), "whsec_"))
	f := newTestForward(t, ForwardOptions{URL: srv.URL, Secrets: []config.Secret{secret}, Now: func() time.Time { return now }})
	if err := f.Apply(t.Context(), forwardTestEvent()); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	got := <-seen
	if ts := got.header.Get("webhook-timestamp"); ts != "1796032800" {
		t.Errorf("webhook-timestamp = %q, want 1796032800", ts)
	}
	if err := mustWebhook(t, forwardTestSecret.Reveal()).VerifyIgnoringTimestamp(got.body, got.header); err != nil {
		t.Errorf("VerifyIgnoringTimestamp: %v", err)
	}
	// Five minutes of tolerance: the 2026 timestamp is far from now.
	if err := mustWebhook(t, forwardTestSecret.Reveal()).Verify(got.body, got.header); !errors.Is(err, standardwebhooks.ErrMessageTooOld) && !errors.Is(err, standardwebhooks.ErrMessageTooNew) {
		t.Errorf("Verify of a fixed-clock signature = %v, want a timestamp error", err)
	}
}

func TestForwardUnsigned(t *testing.T) {
	srv, seen := newCaptureServer(t, 0)
	f := newTestForward(t, ForwardOptions{URL: srv.URL})
	ev := forwardTestEvent()
	delete(ev.Header, "Content-Type")
	if err := f.Apply(t.Context(), ev); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	got := <-seen
	for _, name := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		if vs := got.header.Values(name); len(vs) != 0 {
			t.Errorf("unsigned forward sent %s: %q", name, vs)
		}
	}
	if ct := got.header.Get("Content-Type"); ct != "application/octet-stream" {
		t.Errorf("Content-Type without a stored one = %q, want application/octet-stream", ct)
	}
	if k := got.header.Get("Idempotency-Key"); k != ev.Key {
		t.Errorf("Idempotency-Key = %q, want %q", k, ev.Key)
	}
}

func TestForwardContentTypeAnyCase(t *testing.T) {
	srv, seen := newCaptureServer(t, 0)
	f := newTestForward(t, ForwardOptions{URL: srv.URL})
	ev := forwardTestEvent()
	delete(ev.Header, "Content-Type")
	ev.Header["content-type"] = []string{"application/x-www-form-urlencoded"}
	if err := f.Apply(t.Context(), ev); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if ct := (<-seen).header.Get("Content-Type"); ct != "application/x-www-form-urlencoded" {
		t.Errorf("Content-Type = %q, want application/x-www-form-urlencoded", ct)
	}
}

func TestForwardWebhookID(t *testing.T) {
	hashed := func(key string) string {
		sum := sha256.Sum256([]byte(key))
		return "evt#" + hex.EncodeToString(sum[:])
	}
	long := "grantsgov:default:evt:" + strings.Repeat("x", 200-len("grantsgov:default:evt:"))
	tests := []struct{ name, key, want string }{
		{"plain", "grantsgov:default:evt:msg_1", "grantsgov:default:evt:msg_1"},
		{"200 bytes", long, long},
		{"201 bytes", long + "y", hashed(long + "y")},
		{"space", "grantsgov:default:evt:a b", hashed("grantsgov:default:evt:a b")},
		{"non-ASCII", "grantsgov:d\xc3\xa9faut:evt:1", hashed("grantsgov:d\xc3\xa9faut:evt:1")},
		{"tab", "grantsgov:default:evt:a\tb", hashed("grantsgov:default:evt:a\tb")},
	}
	srv, seen := newCaptureServer(t, 0)
	f := newTestForward(t, ForwardOptions{URL: srv.URL, Secrets: []config.Secret{forwardTestSecret}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := forwardTestEvent()
			ev.Key = tt.key
			if err := f.Apply(t.Context(), ev); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			got := <-seen
			if id := got.header.Get("webhook-id"); id != tt.want {
				t.Errorf("webhook-id = %q, want %q", id, tt.want)
			}
			if k := got.header.Get("Idempotency-Key"); k != tt.key {
				t.Errorf("Idempotency-Key = %q, want the key %q", k, tt.key)
			}
			if err := mustWebhook(t, forwardTestSecret.Reveal()).Verify(got.body, got.header); err != nil {
				t.Errorf("Verify: %v", err)
			}
		})
	}
}

// TestForwardUnsendable: an event HTTP cannot carry fails for good, before
// any request.
func TestForwardUnsendable(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	f := newTestForward(t, ForwardOptions{URL: srv.URL})
	tests := []struct {
		name   string
		modify func(*Event)
		want   string
	}{
		{"empty key", func(ev *Event) { ev.Key = "" }, "Idempotency-Key"},
		{"newline in key", func(ev *Event) { ev.Key = "p:a:evt:x\r\nX-Injected: 1" }, "Idempotency-Key"},
		{"bad Hookgate header name", func(ev *Event) { ev.Header["Hookgate-Bad Name"] = []string{"x"} }, "not a valid HTTP header name"},
		{"DEL in Content-Type", func(ev *Event) { ev.Header.Set("Content-Type", "text/plain\x7f") }, "header Content-Type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := forwardTestEvent()
			tt.modify(&ev)
			err := f.Apply(t.Context(), ev)
			if !errors.Is(err, ErrPermanent) {
				t.Fatalf("Apply = %v, want a permanent error", err)
			}
			var fe *ForwardError
			if !errors.As(err, &fe) || fe.Retryable || fe.Status != 0 {
				t.Errorf("Apply = %#v, want a non-retryable *ForwardError without status", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("server got %d requests, want 0", n)
	}
}

// A value with a control byte in a Hookgate-* header (stored raw by a
// version before extracted values were quoted) is sent Go-quoted and listed
// in Hookgate-Quoted, as hookgate stores such values now: never as raw
// bytes (no header injection), and not as a permanent failure that would
// keep the event from ever being delivered.
func TestForwardQuotesRawControlBytes(t *testing.T) {
	srv, seen := newCaptureServer(t, http.StatusOK)
	f := newTestForward(t, ForwardOptions{URL: srv.URL})
	ev := forwardTestEvent()
	ev.Header.Set("Hookgate-Subject", "G-42\r\nX-Injected: 1")
	delete(ev.Header, "hookgate-type")
	ev.Header.Set("Hookgate-Type", "award\x01paid")
	if err := f.Apply(t.Context(), ev); err != nil {
		t.Fatalf("Apply = %v, want delivered", err)
	}
	r := <-seen
	if got := r.header.Get("Hookgate-Subject"); got != `"G-42\r\nX-Injected: 1"` {
		t.Errorf("Hookgate-Subject = %q, want it Go-quoted", got)
	}
	if got := r.header.Get("Hookgate-Type"); got != `"award\x01paid"` {
		t.Errorf("Hookgate-Type = %q, want it Go-quoted", got)
	}
	if got := r.header.Get("Hookgate-Quoted"); got != "Hookgate-Subject,Hookgate-Type" {
		t.Errorf("Hookgate-Quoted = %q, want both listed", got)
	}
	if r.header.Get("X-Injected") != "" {
		t.Error("a header was injected")
	}
}

// An empty body goes out with Content-Length: 0, not chunked, to the
// receiver. (Keeping net/http from resending a POST by itself by taking
// away its GetBody, tried first, chunked an empty one; Forward writes
// Idempotency-Key lower-case instead.)
func TestForwardEmptyBodyIsContentLengthZero(t *testing.T) {
	type seen struct {
		length int64
		te     []string
		body   []byte
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.ContentLength, r.TransferEncoding, body}
	}))
	t.Cleanup(srv.Close)
	f := newTestForward(t, ForwardOptions{URL: srv.URL})
	for _, body := range [][]byte{nil, {}} {
		ev := forwardTestEvent()
		ev.Body = body
		if err := f.Apply(t.Context(), ev); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		if s := <-got; s.length != 0 || len(s.te) != 0 || len(s.body) != 0 {
			t.Errorf("body %#v arrived with Content-Length %d, Transfer-Encoding %q, %d bytes; want Content-Length 0, not chunked, empty", body, s.length, s.te, len(s.body))
		}
	}
}

// A receiver that reads the POST and hangs up without answering sees it
// once per Apply: net/http resends a request carrying Idempotency-Key
// when a reused keep-alive connection closes before the answer, and again
// on the next pooled one, all inside one attempt (Forward.header). The
// attempt fails as a connection error, for consumer.backoff to retry.
func TestForwardHangUpOnAReusedConnectionIsOnePost(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		posts.Add(1)
		if string(body) == "hang up" {
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	f := newTestForward(t, ForwardOptions{URL: srv.URL})
	ev := forwardTestEvent()
	// Warm the pool: several connections, so a resend would find another.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := f.Apply(t.Context(), ev); err != nil {
				t.Errorf("warm-up Apply: %v", err)
			}
		})
	}
	wg.Wait()
	warm := posts.Load()
	ev.Body = []byte("hang up")
	err := f.Apply(t.Context(), ev)
	if err == nil || errors.Is(err, ErrPermanent) {
		t.Fatalf("Apply to a receiver that hung up = %v, want a retryable error", err)
	}
	if got := posts.Load() - warm; got != 1 {
		t.Fatalf("the receiver got %d POSTs of one Apply (it hung up on each), want 1: %v", got, err)
	}
}
