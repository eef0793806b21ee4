package consumer

// Review AN: the forward effect against real HTTP receivers over loopback.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
)

// reviewANSign is the Standard Webhooks v1 recipe written from the spec
// (NOTES-providers.md), not from hookgate: strip whsec_, base64-decode,
// HMAC-SHA256 over "{id}.{timestamp}.{body}", std base64, "v1," prefix.
func reviewANSign(t *testing.T, secret, id, ts string, body []byte) string {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatalf("test secret: %v", err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// TestReviewANSignatureKnownAnswer (holds): the forward's signature
// matches the published known answer and an independent implementation of
// the recipe, with a whsec_ secret, the same key without the prefix, and a
// key too long for webhook-id (sent as evt#<sha256 hex>).
func TestReviewANSignatureKnownAnswer(t *testing.T) {
	const (
		secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		id     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		want   = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	body := []byte(`{"test": 2432232314}`)
	if got := reviewANSign(t, secret, id, "1614265330", body); got != want {
		t.Fatalf("the test's own recipe gives %s, want %s", got, want)
	}
	srv, seen := newCaptureServer(t, http.StatusOK)
	clock := func() time.Time { return time.Unix(1614265330, 0) }
	longKey := "p:default:evt:" + strings.Repeat("x", 200)
	sum := sha256.Sum256([]byte(longKey))
	for _, tc := range []struct{ secret, key, wantID string }{
		{secret, id, id},
		{strings.TrimPrefix(secret, "whsec_"), id, id},
		{secret, longKey, "evt#" + hex.EncodeToString(sum[:])},
	} {
		f := newTestForward(t, ForwardOptions{URL: srv.URL, Secrets: []config.Secret{config.Secret(tc.secret)}, Now: clock})
		ev := forwardTestEvent()
		ev.Key, ev.Body = tc.key, body
		if err := f.Apply(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
		got := <-seen
		gotID, ts, sig := got.header.Get("Webhook-Id"), got.header.Get("Webhook-Timestamp"), got.header.Get("Webhook-Signature")
		if gotID != tc.wantID || ts != "1614265330" || sig != reviewANSign(t, secret, tc.wantID, ts, got.body) {
			t.Errorf("secret %.12s key %.30s: webhook-id %q ts %q sig %q; want id %q", tc.secret, tc.key, gotID, ts, sig, tc.wantID)
		}
		if tc.key == id && sig != want {
			t.Errorf("signature %s, want the known answer %s", sig, want)
		}
		if got.header.Get("Idempotency-Key") != tc.key {
			t.Errorf("Idempotency-Key %q, want the key", got.header.Get("Idempotency-Key"))
		}
	}
}

// TestReviewANKeepAliveAcrossWorkers (holds): 8 concurrent appliers x 40
// forwards, every fourth answered 503, reuse their connections: far fewer
// than one per forward. net/http may dial a spare while a connection is on
// its way back to the pool (a CI run saw 9), so the bound is twice the
// workers, not one each.
func TestReviewANKeepAliveAcrossWorkers(t *testing.T) {
	var conns, n atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if n.Add(1)%4 == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	f := newTestForward(t, ForwardOptions{URL: srv.URL})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 40 {
				_ = f.Apply(t.Context(), forwardTestEvent())
			}
		})
	}
	wg.Wait()
	if c := conns.Load(); c > 16 {
		t.Errorf("320 forwards from 8 workers opened %d connections, want at most 16 (about one per worker)", c)
	}
}

// TestReviewANSwitchingProtocolsHoldsTheWorker: Apply promises that
// ForwardOptions.Timeout "bounds one request, from dialing through reading
// the response". A receiver (or something in front of it) answering the
// POST with "101 Switching Protocols" and then saying nothing holds the
// forward for good: net/http hands the raw connection over as the body
// and stops watching the request's context, and Apply's io.CopyN drain
// blocks on it. The worker, the event's subject lease (kept alive every
// 5 s) and, at a stop, serve's shutdown wait on it; `workers` such events
// stop every provider. Fixed: a 101 is a permanent failure, its
// connection closed at once.
func TestReviewANSwitchingProtocolsHoldsTheWorker(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var held []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			go func() {
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n")
				// then nothing, the connection left open
			}()
		}
	}()
	f := newTestForward(t, ForwardOptions{URL: "http://" + ln.Addr().String() + "/hook", Timeout: 300 * time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- f.Apply(context.Background(), forwardTestEvent()) }()
	select {
	case err := <-done:
		t.Logf("Apply = %v", err)
		var fe *ForwardError
		if !errors.Is(err, ErrPermanent) || !errors.As(err, &fe) || fe.Status != http.StatusSwitchingProtocols {
			t.Errorf("Apply after a 101 = %v; want a permanent failure with status 101 (no receiver upgrades a POST)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Apply with a 300ms timeout has not returned after 10 s: a 101 answer without a body holds the forward (and its worker) for good")
	}
}

// TestReviewANTransportEnvironmentDocumented: the forward's transport is
// http.DefaultTransport's clone, so HTTP_PROXY / HTTPS_PROXY / NO_PROXY
// route forwards through a proxy (loopback excepted), and SSL_CERT_FILE /
// SSL_CERT_DIR are the only way to trust a private CA (forward has no CA
// option). Neither is in the README: a user with a system-wide proxy sees
// internal receivers' forwards go to the proxy (a 403/407 from it is a
// "4xx other than 408/429": dead-lettered at once), and a user with an
// internal CA sees "x509: certificate signed by unknown authority" retried
// max_deliver times, with nothing saying how to fix it.
func TestReviewANTransportEnvironmentDocumented(t *testing.T) {
	f := newTestForward(t, ForwardOptions{URL: "http://receiver.example/hook"})
	tr, ok := f.client.Transport.(*http.Transport)
	if !ok || tr.Proxy == nil || reflect.ValueOf(tr.Proxy).Pointer() != reflect.ValueOf(http.ProxyFromEnvironment).Pointer() {
		t.Fatalf("forward transport does not use http.ProxyFromEnvironment; this test's premise is gone")
	}
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"HTTP_PROXY", "NO_PROXY", "SSL_CERT_FILE"} {
		if !bytes.Contains(readme, []byte(name)) {
			t.Errorf("README never mentions %s, which the forward effect honours", name)
		}
	}
}

// TestReviewANIdlePoolChurnsPastSixtyFourWorkers: the forward's own
// transport keeps at most 64 idle connections to its receiver
// (forwardIdleConns), whatever consumer.workers is (up to 4096). With more
// workers than that forwarding to one slow receiver (the case for raising
// workers), every round of forwards closes all but 64 of its connections
// and dials as many anew: a socket, and a TIME_WAIT on hookgate's side, per
// event for each worker past 64. Here 128 workers forward 3 rounds, all
// 128 in flight at once in each round (a receiver that answers once all
// arrived, like a slow one), each worker busy with the rest of its event
// between two forwards. Fixed: ForwardOptions.Concurrency (serve passes
// consumer.workers) sizes the pool.
func TestReviewANIdlePoolChurnsPastSixtyFourWorkers(t *testing.T) {
	const workers, rounds = 128, 3
	var conns, arrived atomic.Int32
	gates := make([]chan struct{}, rounds)
	for i := range gates {
		gates[i] = make(chan struct{})
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		n := int(arrived.Add(1))
		round := (n - 1) / workers
		if n%workers == 0 {
			close(gates[round])
		}
		select {
		case <-gates[round]:
		case <-time.After(10 * time.Second): // only ends a wait that went wrong
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	f := newTestForward(t, ForwardOptions{URL: srv.URL, Timeout: 20 * time.Second, Concurrency: workers})
	// Between two forwards a worker does the rest of the event (the
	// GRANTS publish, the watermark commit): here each waits for the
	// round's last forward to finish before its next one.
	var done atomic.Int32
	after := make([]chan struct{}, rounds)
	for i := range after {
		after[i] = make(chan struct{})
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for r := range rounds {
				if err := f.Apply(t.Context(), forwardTestEvent()); err != nil {
					t.Error(err)
				}
				if int(done.Add(1)) == workers*(r+1) {
					close(after[r])
				}
				<-after[r]
			}
		})
	}
	wg.Wait()
	t.Logf("connections: %d", conns.Load())
	if c := conns.Load(); c > workers*5/4 {
		t.Errorf("%d workers x %d forwards to one receiver opened %d connections; want about %d (one per worker)", workers, rounds, c, workers)
	}
}
