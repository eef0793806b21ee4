package consumer

// How Forward fails: status classes, timeouts, refused connections,
// Retry-After, and errors that never quote a secret.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
)

func TestForwardStatus(t *testing.T) {
	var followed atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/elsewhere", func(http.ResponseWriter, *http.Request) { followed.Add(1) })
	mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
		// The test drives the answer through Hookgate-* headers, which
		// Forward passes on.
		code, err := strconv.Atoi(r.Header.Get("Hookgate-Test-Status"))
		if err != nil {
			t.Errorf("server: Hookgate-Test-Status: %v", err)
			code = http.StatusTeapot
		}
		if ra := r.Header.Get("Hookgate-Test-Retry-After"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		if code >= 300 && code < 400 {
			w.Header().Set("Location", "/elsewhere")
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, `{"error":"from the receiver"}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	f := newTestForward(t, ForwardOptions{URL: srv.URL + "/hook", Now: func() time.Time { return now }})

	const ok, retry, permanent = 0, 1, 2
	tests := []struct {
		status     int
		retryAfter string
		want       int
		wantAfter  time.Duration
	}{
		{200, "", ok, 0},
		{204, "", ok, 0},
		{301, "", permanent, 0},
		{302, "", permanent, 0},
		{307, "", permanent, 0},
		{400, "", permanent, 0},
		{401, "", permanent, 0},
		{404, "", permanent, 0},
		{408, "", retry, 0},
		{409, "", retry, 0}, // Idempotency-Key: the first request with the key still in progress
		{422, "", permanent, 0},
		{429, "", retry, 0},
		{429, "7", retry, 7 * time.Second},
		{429, "99999999999999999999", retry, 24 * time.Hour},
		{500, "", retry, 0},
		{500, "7", retry, 0}, // Retry-After counts only on 429 and 503
		{502, "", retry, 0},
		{503, "", retry, 0},
		{503, "30", retry, 30 * time.Second},
		{503, now.Add(90 * time.Second).Format(http.TimeFormat), retry, 90 * time.Second},
		{503, now.Add(-time.Hour).Format(http.TimeFormat), retry, 0},
		{503, "soon", retry, 0},
		{503, "-5", retry, 0},
		{504, "", retry, 0},
		{599, "", retry, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d %s", tt.status, tt.retryAfter), func(t *testing.T) {
			ev := forwardTestEvent()
			ev.Header.Set("Hookgate-Test-Status", strconv.Itoa(tt.status))
			if tt.retryAfter != "" {
				ev.Header.Set("Hookgate-Test-Retry-After", tt.retryAfter)
			}
			err := f.Apply(t.Context(), ev)
			if tt.want == ok {
				if err != nil {
					t.Fatalf("Apply = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Apply = nil, want an error")
			}
			if got := errors.Is(err, ErrPermanent); got != (tt.want == permanent) {
				t.Errorf("Apply = %v: permanent %v, want %v", err, got, tt.want == permanent)
			}
			var fe *ForwardError
			if !errors.As(err, &fe) {
				t.Fatalf("Apply = %v, not a *ForwardError", err)
			}
			if fe.Status != tt.status || fe.Retryable != (tt.want == retry) || fe.RetryAfter != tt.wantAfter || fe.Err != nil {
				t.Errorf("ForwardError = {Status %d, Retryable %v, RetryAfter %v, Err %v}, want {%d, %v, %v, nil}",
					fe.Status, fe.Retryable, fe.RetryAfter, fe.Err, tt.status, tt.want == retry, tt.wantAfter)
			}
			want := fmt.Sprintf("forward: POST %s: %d", srv.URL, tt.status)
			if text := http.StatusText(tt.status); text != "" {
				want += " " + text
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not contain %q", err, want)
			}
		})
	}
	if n := followed.Load(); n != 0 {
		t.Errorf("redirect target got %d requests, want 0", n)
	}
}

// TestForwardCallerClient: a caller's client is used, without following
// redirects, and its own redirect policy is left alone.
func TestForwardCallerClient(t *testing.T) {
	var followed atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/elsewhere", func(http.ResponseWriter, *http.Request) { followed.Add(1) })
	mux.Handle("/hook", http.RedirectHandler("/elsewhere", http.StatusPermanentRedirect))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	client := srv.Client()
	f := newTestForward(t, ForwardOptions{URL: srv.URL + "/hook", Client: client})
	err := f.Apply(t.Context(), forwardTestEvent())
	var fe *ForwardError
	if !errors.Is(err, ErrPermanent) || !errors.As(err, &fe) || fe.Status != http.StatusPermanentRedirect {
		t.Fatalf("Apply = %v, want a permanent 308", err)
	}
	if !strings.Contains(err.Error(), "redirects are not followed") {
		t.Errorf("error %q does not say redirects are not followed", err)
	}
	// A relative Location is on the configured host: said so, without
	// the path (naming the configured host again told nothing).
	if want := "it points to another path on the same host)"; !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "elsewhere") {
		t.Errorf("error %q: want %q and no path", err, want)
	}
	if n := followed.Load(); n != 0 {
		t.Errorf("redirect followed %d times", n)
	}
	if client.CheckRedirect != nil {
		t.Error("NewForward changed the caller's client")
	}
}

func TestForwardTimeout(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: frees the handlers for Close

	f := newTestForward(t, ForwardOptions{URL: srv.URL + "/hook", Timeout: 200 * time.Millisecond})

	t.Run("timeout", func(t *testing.T) {
		err := f.Apply(t.Context(), forwardTestEvent())
		if err == nil || errors.Is(err, ErrPermanent) {
			t.Fatalf("Apply = %v, want a retryable error", err)
		}
		var fe *ForwardError
		if !errors.As(err, &fe) || !fe.Retryable || fe.Status != 0 {
			t.Fatalf("Apply = %#v, want a retryable *ForwardError without status", err)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Apply = %v, want it to wrap context.DeadlineExceeded", err)
		}
		want := "forward: POST " + srv.URL + ": no response within 200ms"
		if err.Error() != want {
			t.Errorf("error = %q, want %q", err, want)
		}
	})

	t.Run("caller gives up", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		drained := len(entered)
		for range drained {
			<-entered
		}
		go func() {
			<-entered
			cancel()
		}()
		err := f.Apply(ctx, forwardTestEvent())
		var fe *ForwardError
		if !errors.As(err, &fe) || !fe.Retryable || errors.Is(err, ErrPermanent) {
			t.Fatalf("Apply = %v, want a retryable *ForwardError", err)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Apply = %v, want it to wrap context.Canceled", err)
		}
		if !strings.Contains(err.Error(), "gave up: context canceled") {
			t.Errorf("error %q does not say the caller gave up", err)
		}
	})
}

func TestForwardConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f := newTestForward(t, ForwardOptions{URL: "http://" + addr + "/hook"})
	err = f.Apply(t.Context(), forwardTestEvent())
	var fe *ForwardError
	if !errors.As(err, &fe) || !fe.Retryable || fe.Status != 0 || fe.Err == nil || errors.Is(err, ErrPermanent) {
		t.Fatalf("Apply = %#v, want a retryable *ForwardError with a cause", err)
	}
	var opErr *net.OpError
	if !errors.As(err, &opErr) {
		t.Errorf("Apply = %v, want it to wrap the *net.OpError", err)
	}
	if want := "forward: POST http://" + addr + ": "; !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "refused") {
		t.Errorf("error = %q, want %q and connection refused", err, want)
	}
}

// TestForwardKeepAlive: sequential applies, failing ones included, share
// one connection.
func TestForwardKeepAlive(t *testing.T) {
	var conns, requests atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if requests.Add(1)%3 == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = w.Write(bytes.Repeat([]byte("x"), 4<<10)) // a body to drain
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	f := newTestForward(t, ForwardOptions{URL: srv.URL, Secrets: []config.Secret{forwardTestSecret}})
	for i := range 8 {
		err := f.Apply(t.Context(), forwardTestEvent())
		if want503 := (i+1)%3 == 0; (err != nil) != want503 {
			t.Fatalf("Apply #%d = %v, want an error: %v", i+1, err, want503)
		}
	}
	if n := requests.Load(); n != 8 {
		t.Fatalf("server got %d requests, want 8", n)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("8 applies opened %d connections, want 1", n)
	}
}

// TestForwardErrorsHideSecrets: no error quotes the secret, the URL's
// password or its query, whatever went wrong.
func TestForwardErrorsHideSecrets(t *testing.T) {
	const password, query = "pa55-w0rd-xyz", "token=qu3ry-s3cr3t"
	secret := forwardTestSecret.Reveal()
	key := "forward-test-secret-0123456789ab"
	check := func(t *testing.T, err error) {
		t.Helper()
		if err == nil {
			t.Fatal("want an error")
		}
		for _, s := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
			for _, leak := range []string{password, "qu3ry", "token=", secret, key, strings.TrimPrefix(secret, "whsec_")} {
				if strings.Contains(s, leak) {
					t.Errorf("error %q contains %q", s, leak)
				}
			}
		}
	}
	withCreds := func(hostport string) string { return "http://user:" + password + "@" + hostport + "/hook?" + query }

	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Hookgate-Test") {
		case "hang":
			select {
			case <-r.Context().Done():
			case <-release:
			}
		case "redirect":
			http.Redirect(w, r, "/elsewhere?"+query, http.StatusFound)
		default:
			// Echo the request URL, as some error pages do.
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, r.URL.String())
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	hostport := strings.TrimPrefix(srv.URL, "http://")

	f := newTestForward(t, ForwardOptions{URL: withCreds(hostport), Secrets: []config.Secret{forwardTestSecret}, Timeout: 200 * time.Millisecond})
	for _, mode := range []string{"status", "redirect", "hang"} {
		t.Run(mode, func(t *testing.T) {
			ev := forwardTestEvent()
			ev.Header.Set("Hookgate-Test", mode)
			err := f.Apply(t.Context(), ev)
			check(t, err)
			if want := "forward: POST " + srv.URL + ": "; err != nil && !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		})
	}

	t.Run("refused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		f := newTestForward(t, ForwardOptions{URL: withCreds(addr), Secrets: []config.Secret{forwardTestSecret}})
		check(t, f.Apply(t.Context(), forwardTestEvent()))
	})

	t.Run("bad host", func(t *testing.T) {
		f := newTestForward(t, ForwardOptions{URL: withCreds("bad-host.invalid:1"), Secrets: []config.Secret{forwardTestSecret}, Timeout: 2 * time.Second})
		check(t, f.Apply(t.Context(), forwardTestEvent()))
	})

	t.Run("NewForward", func(t *testing.T) {
		_, err := NewForward(ForwardOptions{URL: withCreds(hostport), Timeout: time.Second, Secrets: []config.Secret{"whsec_" + config.Secret(password) + "!"}})
		check(t, err)
		_, err = NewForward(ForwardOptions{URL: "ftp://user:" + password + "@host/?" + query, Timeout: time.Second})
		check(t, err)
	})
}

func TestNewForwardValidates(t *testing.T) {
	tests := []struct {
		name string
		o    ForwardOptions
		want string // "" = valid
	}{
		{"http", ForwardOptions{URL: "http://example.com/hook", Timeout: time.Second}, ""},
		{"https with port and query", ForwardOptions{URL: "https://example.com:8443/a/b?x=1", Timeout: time.Second}, ""},
		{"ipv6", ForwardOptions{URL: "http://[::1]:8080/", Timeout: time.Second}, ""},
		{"secret with prefix", ForwardOptions{URL: "http://h/", Timeout: time.Second, Secrets: []config.Secret{forwardTestSecret}}, ""},
		{"secret without prefix", ForwardOptions{URL: "http://h/", Timeout: time.Second, Secrets: []config.Secret{"c2VjcmV0"}}, ""},
		{"empty url", ForwardOptions{Timeout: time.Second}, "forward url"},
		{"relative", ForwardOptions{URL: "/hook", Timeout: time.Second}, "forward url"},
		{"no scheme", ForwardOptions{URL: "example.com/hook", Timeout: time.Second}, "forward url"},
		{"ftp", ForwardOptions{URL: "ftp://example.com/", Timeout: time.Second}, "forward url"},
		{"no host", ForwardOptions{URL: "http:///hook", Timeout: time.Second}, "forward url"},
		{"port only", ForwardOptions{URL: "http://:8080/hook", Timeout: time.Second}, "forward url"},
		{"opaque", ForwardOptions{URL: "http:example.com", Timeout: time.Second}, "forward url"},
		{"unparseable", ForwardOptions{URL: "http://a b/", Timeout: time.Second}, "forward url"},
		{"zero timeout", ForwardOptions{URL: "http://h/"}, "forward timeout"},
		{"negative timeout", ForwardOptions{URL: "http://h/", Timeout: -time.Second}, "forward timeout"},
		{"secret not base64", ForwardOptions{URL: "http://h/", Timeout: time.Second, Secrets: []config.Secret{"whsec_not base64!"}}, "forward secret"},
		{"secret unpadded", ForwardOptions{URL: "http://h/", Timeout: time.Second, Secrets: []config.Secret{"whsec_c2VjcmV0Mg"}}, "forward secret"},
		{"secret prefix only", ForwardOptions{URL: "http://h/", Timeout: time.Second, Secrets: []config.Secret{"whsec_"}}, "forward secret"},
		{"second secret not base64", ForwardOptions{URL: "http://h/", Timeout: time.Second, Secrets: []config.Secret{forwardTestSecret, "whsec_not base64!"}}, "forward secret 2 of 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := NewForward(tt.o)
			if tt.want == "" {
				if err != nil || f == nil {
					t.Fatalf("NewForward = %v, want it to succeed", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewForward = %v, want an error about %s", err, tt.want)
			}
			if tt.o.URL != "" && strings.Contains(err.Error(), tt.o.URL) {
				t.Errorf("error %q quotes the URL", err)
			}
			for _, sec := range tt.o.Secrets {
				if s := strings.TrimPrefix(sec.Reveal(), "whsec_"); s != "" && strings.Contains(err.Error(), s) {
					t.Errorf("error %q quotes the secret", err)
				}
			}
		})
	}
}

func TestForwardRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"120", 2 * time.Minute},
		{" 5 ", 5 * time.Second},
		{"86400", 24 * time.Hour},
		{"86401", 24 * time.Hour},
		{"18446744073709551616", 24 * time.Hour}, // past uint64
		{"1.5", 0},
		{"-1", 0},
		{now.Add(time.Minute).Format(http.TimeFormat), time.Minute},
		{now.Add(48 * time.Hour).Format(http.TimeFormat), 24 * time.Hour},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"Mon, 30 Nov 2026", 0},
	}
	for _, tt := range tests {
		if got := forwardRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("forwardRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// A redirect to another host names that host, scheme and host only (a
// path or query may hold tokens).
func TestForwardRedirectToAnotherHostNamesIt(t *testing.T) {
	srv := httptest.NewServer(http.RedirectHandler("https://other.example:8443/in?token=s3cret", http.StatusFound))
	t.Cleanup(srv.Close)
	f := newTestForward(t, ForwardOptions{URL: srv.URL + "/hook", Client: srv.Client()})
	err := f.Apply(t.Context(), forwardTestEvent())
	if err == nil || !strings.Contains(err.Error(), "it points to https://other.example:8443)") || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "/in") {
		t.Fatalf("Apply = %v; want the other host named, without path or query", err)
	}
}
