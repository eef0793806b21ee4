package consumer

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
)

func TestResponseExcerpt(t *testing.T) {
	u, err := url.Parse("https://bot:pa55w0rd-x@hooks.example/services/T0001/B0002/XyZsecretPathTok?token=qu3ry-s3cr3t&v=1#frag-s3cret")
	if err != nil {
		t.Fatal(err)
	}
	secrets := forwardSecrets(u, []string{"whsec_c2VjcmV0LWtleS1ieXRlcw=="})
	long := strings.Repeat("é", 400) // 800 bytes
	for _, tc := range []struct {
		name, body, want string
	}{
		{"empty", "", ""},
		{"json", `{"error":"grant G-1 unknown"}`, `{"error":"grant G-1 unknown"}`},
		{"white space folded", "  <h1>Bad\r\n\tRequest</h1>\n\n ", "<h1>Bad Request</h1>"},
		{"query value echoed", `bad token qu3ry-s3cr3t for /services`, `bad token REDACTED for /services`},
		{"query echoed escaped", `got token=qu3ry-s3cr3t&v=1`, `got REDACTED`},
		{"path token", `no hook /services/T0001/B0002/XyZsecretPathTok`, `no hook /services/T0001/B0002/REDACTED`},
		{"password and fragment", `pa55w0rd-x frag-s3cret`, `REDACTED REDACTED`},
		{"signing secret", `secret whsec_c2VjcmV0LWtleS1ieXRlcw== or c2VjcmV0LWtleS1ieXRlcw==`, `secret REDACTED or REDACTED`},
		{"controls and bidi dropped", "a\x1b[31mb\u202ec\u0000", ""},
		{"bidi dropped", "a\x1b[31mb\u202ec", "a[31mbc"},
		{"binary", "\xff\xfe\x00", ""},
		{"cut rune at the end", "ok \xc3", "ok"},
		{"bounded", long, strings.Repeat("é", forwardResponseMax/2) + "..."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := responseExcerpt([]byte(tc.body), secrets); got != tc.want {
				t.Fatalf("responseExcerpt(%q) = %q, want %q", tc.body, got, tc.want)
			}
		})
	}
	// The URL's short words are not taken for credentials (the user
	// info is, however short).
	for _, word := range []string{"services", "T0001", "B0002", "1", "v"} {
		if slices.Contains(secrets, word) {
			t.Errorf("%q taken for a credential: %q", word, secrets)
		}
	}
}

// A receiver's refusal reaches the ForwardError as an excerpt, the URL's
// credentials cut out, and stays out of Error() (logs, AUDIT).
func TestForwardRefusalKeepsAnExcerpt(t *testing.T) {
	const tok = "p4thT0ken-0123456789"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = io.WriteString(w, "{\n  \"error\": \"grant G-1 is closed\",\n  \"path\": \""+r.URL.Path+"\"\n}\n"+strings.Repeat("x", 100<<10))
	}))
	t.Cleanup(srv.Close)
	f := newTestForward(t, ForwardOptions{URL: srv.URL + "/hooks/" + tok, Secrets: []config.Secret{forwardTestSecret}, Timeout: 5 * time.Second})
	err := f.Apply(t.Context(), forwardTestEvent())
	var fe *ForwardError
	if !errors.As(err, &fe) {
		t.Fatalf("Apply: %v, want a *ForwardError", err)
	}
	if fe.Status != http.StatusUnprocessableEntity || fe.Retryable {
		t.Fatalf("status %d retryable %v, want 422 not retryable", fe.Status, fe.Retryable)
	}
	want := `{ "error": "grant G-1 is closed", "path": "/hooks/REDACTED" } xxx`
	if !strings.HasPrefix(fe.Response, want) || len(fe.Response) > forwardResponseMax+3 || !strings.HasSuffix(fe.Response, "...") {
		t.Fatalf("Response = %q, want it to start %q, cut at %d bytes", fe.Response, want, forwardResponseMax)
	}
	if strings.Contains(fe.Response, tok) {
		t.Fatalf("Response %q holds the URL's path token", fe.Response)
	}
	if strings.Contains(err.Error(), "closed") {
		t.Fatalf("Error() %q carries the receiver's body; it goes to logs and AUDIT", err)
	}
}

// The forms a receiver echoes a credential in that a plain match missed
// (found by review): net/http's Basic header of the user info, a short
// password, JSON's "\/", a percent-encoding in lower case, and a
// credential cut by the end of the read.
func TestResponseExcerptEchoedForms(t *testing.T) {
	u, err := url.Parse("https://bot:p%40s@hooks.example/hooks?token=ab%2Bcd%2Fef0123%3D%3D")
	if err != nil {
		t.Fatal(err)
	}
	secrets := forwardSecrets(u, nil)
	for _, body := range []string{
		"401: Authorization: Basic Ym90OnBAcw== refused", // base64("bot:p@s")
		`{"user":"bot","password":"p@s"}`,
		`{"url":"/hooks?token=ab+cd\/ef0123=="}`,
		"token=ab%2bcd%2fef0123%3d%3d",
	} {
		got := responseExcerpt([]byte(body), secrets)
		for _, leak := range []string{"Ym90OnBAcw", "p@s", "ab+cd", "ab%2bcd", "ef0123"} {
			if strings.Contains(got, leak) {
				t.Errorf("responseExcerpt(%q) = %q: holds %q", body, got, leak)
			}
		}
	}
	// A credential cut by the end of the read leaves no part of itself.
	cut := strings.Repeat(" ", forwardResponseRead-4) + "ab+c"
	if got := responseExcerpt([]byte(cut), secrets); strings.Contains(got, "ab+c") {
		t.Errorf("a credential cut at the read's end: %q", got)
	}
}
