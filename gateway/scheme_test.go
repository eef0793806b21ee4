package gateway_test

import (
	"bytes"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/gateway"
)

// schemeConformance describes one scheme for the suite every Scheme must
// pass; the scheme files test their own formats on top of it.
type schemeConformance struct {
	name      string
	opts      gateway.SchemeOptions
	secret    config.Secret // signs
	other     config.Secret // usable, but not the signer
	sigHeader string        // the header carrying the MAC
	idHeader  string        // where Sign puts the id; "" when the scheme carries none
	unusable  config.Secret // fails CheckSecret (besides the empty secret)
}

var schemeConformanceCases = []schemeConformance{
	{
		name:      "standard-webhooks",
		secret:    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		other:     "whsec_c2Vjb25kLXNlY3JldC1mb3Itcm90YXRpb24=",
		sigHeader: "webhook-signature",
		idHeader:  "webhook-id",
		unusable:  "whsec_not*base64",
	},
	{
		name:      "stripe",
		secret:    "whsec_stripe_first_secret_0123456789",
		unusable:  "whsec_stripe_first_secret_0123456789\n",
		other:     "whsec_stripe_second_secret_9876543210",
		sigHeader: "Stripe-Signature",
	},
	{
		name:      "github",
		secret:    "It's a Secret to Everybody",
		unusable:  "It's a Secret to Everybody\n",
		other:     "another github secret",
		sigHeader: "X-Hub-Signature-256",
		idHeader:  "X-GitHub-Delivery",
	},
	{
		name:      "shopify",
		secret:    "shpss_0123456789abcdef0123456789abcdef",
		unusable:  "shpss_0123456789abcdef0123456789abcdef\n",
		other:     "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",
		sigHeader: "X-Shopify-Hmac-Sha256",
		idHeader:  "X-Shopify-Event-Id",
	},
	{
		name:      "hmac-sha256",
		opts:      gateway.SchemeOptions{Header: "x-acme-signature"},
		secret:    "acme-shared-secret",
		unusable:  "acme-shared-secret\n",
		other:     "acme-rotated-secret",
		sigHeader: "X-Acme-Signature",
	},
}

// schemeLongToken finds anything shaped like a MAC (hex or base64 runs), so
// error messages can be checked not to carry one.
var schemeLongToken = regexp.MustCompile(`[A-Za-z0-9+/]{20,}`)

// schemeCheckErr asserts err is a signature error of the given kind whose
// message leaks neither a secret nor anything MAC-shaped.
func schemeCheckErr(t *testing.T, err, kind error, secrets ...config.Secret) {
	t.Helper()
	if err == nil {
		t.Fatalf("Verify = nil, want %v", kind)
	}
	if !errors.Is(err, gateway.ErrSignature) {
		t.Errorf("error %q does not wrap ErrSignature", err)
	}
	if !errors.Is(err, kind) {
		t.Errorf("error %q is not %v", err, kind)
	}
	schemeCheckNoLeak(t, err.Error(), secrets...)
}

func schemeCheckNoLeak(t *testing.T, msg string, secrets ...config.Secret) {
	t.Helper()
	for _, s := range secrets {
		if s.Reveal() != "" && strings.Contains(msg, s.Reveal()) {
			t.Errorf("message %q contains a secret", msg)
		}
	}
	if m := schemeLongToken.FindString(msg); m != "" {
		t.Errorf("message %q contains MAC-like text %q", msg, m)
	}
}

func schemeMust(t testing.TB, name string, opts gateway.SchemeOptions) gateway.Scheme {
	t.Helper()
	s, err := gateway.NewScheme(name, opts)
	if err != nil {
		t.Fatalf("NewScheme(%q): %v", name, err)
	}
	return s
}

func schemeSign(t testing.TB, s gateway.Scheme, body []byte, secret config.Secret, id string, ts time.Time) http.Header {
	t.Helper()
	h, err := s.Sign(body, secret, id, ts)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return h
}

func TestSchemeConformance(t *testing.T) {
	body := []byte(`{"id":"evt_1","type":"grant.updated","amount":1200}`)
	ts := time.Unix(1700000000, 0)
	for _, c := range schemeConformanceCases {
		t.Run(c.name, func(t *testing.T) {
			s := schemeMust(t, c.name, c.opts)
			signed := schemeSign(t, s, body, c.secret, "evt-123", ts)
			if signed.Get(c.sigHeader) == "" {
				t.Fatalf("Sign set no %s: %v", c.sigHeader, signed)
			}
			all := []config.Secret{c.secret, c.other}

			accept := []struct {
				name    string
				secrets []config.Secret
			}{
				{"signer only", []config.Secret{c.secret}},
				{"rotation, signer second", []config.Secret{c.other, c.secret}},
				{"rotation, signer first", []config.Secret{c.secret, c.other}},
				{"unusable secret skipped", []config.Secret{"", c.secret}},
			}
			for _, a := range accept {
				t.Run("accept/"+a.name, func(t *testing.T) {
					if err := s.Verify(signed.Clone(), body, a.secrets, ts); err != nil {
						t.Fatalf("Verify = %v, want nil", err)
					}
				})
			}

			reject := []struct {
				name    string
				header  func() http.Header
				body    []byte
				secrets []config.Secret
				kind    error
			}{
				{"wrong secret", signed.Clone, body, []config.Secret{c.other}, gateway.ErrSignatureMismatch},
				{"tampered body", signed.Clone, append(bytes.Clone(body), ' '), all, gateway.ErrSignatureMismatch},
				{"empty body", signed.Clone, nil, all, gateway.ErrSignatureMismatch},
				{"no secrets", signed.Clone, body, nil, gateway.ErrSecretUnusable},
				{"only unusable secrets", signed.Clone, body, []config.Secret{"", c.unusable}, gateway.ErrSecretUnusable},
				{"signature header missing", func() http.Header {
					h := signed.Clone()
					h.Del(c.sigHeader)
					return h
				}, body, all, gateway.ErrSignatureMissing},
				{"signature header empty", func() http.Header {
					h := signed.Clone()
					h.Set(c.sigHeader, "")
					return h
				}, body, all, gateway.ErrSignatureMissing},
				{"signature header repeated", func() http.Header {
					h := signed.Clone()
					h.Add(c.sigHeader, h.Get(c.sigHeader))
					return h
				}, body, all, gateway.ErrSignatureMalformed},
				{"no headers", func() http.Header { return http.Header{} }, body, all, gateway.ErrSignatureMissing},
				{"signature header garbage", func() http.Header {
					h := signed.Clone()
					h.Set(c.sigHeader, "garbage")
					return h
				}, body, all, gateway.ErrSignatureMalformed},
			}
			for _, r := range reject {
				t.Run("reject/"+r.name, func(t *testing.T) {
					err := s.Verify(r.header(), r.body, r.secrets, ts)
					schemeCheckErr(t, err, r.kind, c.secret, c.other)
				})
			}

			t.Run("sign/id", func(t *testing.T) {
				if c.idHeader == "" {
					return
				}
				if got := signed.Get(c.idHeader); got != "evt-123" {
					t.Errorf("%s = %q, want the given id", c.idHeader, got)
				}
				a := schemeSign(t, s, body, c.secret, "", ts).Get(c.idHeader)
				b := schemeSign(t, s, body, c.secret, "", ts).Get(c.idHeader)
				if a == "" || a == b {
					t.Errorf("generated ids %q, %q: want two distinct non-empty ids", a, b)
				}
				// Any id a header carries unchanged is signed, as the
				// gateway takes it (keyed by its hash, evt#): spaces and
				// bytes past ASCII too.
				for _, id := range []string{"grant award 7", "G-\u00e9t\u00e9", "a\tb"} {
					h := schemeSign(t, s, body, c.secret, id, ts)
					if got := h.Get(c.idHeader); got != id {
						t.Errorf("%s = %q, want %q", c.idHeader, got, id)
					}
					if err := s.Verify(h, body, []config.Secret{c.secret}, ts); err != nil {
						t.Errorf("Verify of the headers signed with id %q: %v", id, err)
					}
				}
				// What a header cannot carry as given is refused, naming why.
				for id, want := range map[string]string{"a\r\nX-Evil: 1": "control character", "a\x00": "control character", "a\x7f": "control character", " a": "whitespace", "a\t": "whitespace"} {
					_, err := s.Sign(body, c.secret, id, ts)
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("Sign with id %q: %v, want an error about a %s", id, err, want)
					}
				}
			})
			t.Run("sign/unusable secret", func(t *testing.T) {
				for _, bad := range []config.Secret{"", c.unusable} {
					_, err := s.Sign(body, bad, "", ts)
					if err == nil {
						t.Fatalf("Sign accepted an unusable secret")
					}
					schemeCheckNoLeak(t, err.Error(), c.secret)
				}
			})
			t.Run("concurrent", func(t *testing.T) {
				var wg sync.WaitGroup
				errs := make(chan error, 16)
				for range 8 {
					wg.Go(func() {
						errs <- s.Verify(signed, body, all, ts)
						_, err := s.Sign(body, c.secret, "", ts)
						errs <- err
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						t.Error(err)
					}
				}
			})
		})
	}
}

func TestSchemeNames(t *testing.T) {
	want := []string{"standard-webhooks", "stripe", "github", "shopify", "hmac-sha256"}
	got := gateway.SchemeNames()
	if !slices.Equal(got, want) {
		t.Fatalf("SchemeNames() = %v, want %v", got, want)
	}
	got[0] = "changed"
	if gateway.SchemeNames()[0] != want[0] {
		t.Error("SchemeNames returns shared state")
	}
	for _, name := range want {
		opts := gateway.SchemeOptions{}
		if name == "hmac-sha256" {
			opts.Header = "X-Signature"
		}
		if _, err := gateway.NewScheme(name, opts); err != nil {
			t.Errorf("NewScheme(%q): %v", name, err)
		}
	}
}

func TestNewSchemeErrors(t *testing.T) {
	tests := []struct {
		name    string
		scheme  string
		opts    gateway.SchemeOptions
		wantMsg string
	}{
		{"unknown lists valid names", "svix", gateway.SchemeOptions{}, "standard-webhooks, stripe, github, shopify, hmac-sha256"},
		{"empty name", "", gateway.SchemeOptions{}, "unknown signature scheme"},
		{"negative tolerance", "stripe", gateway.SchemeOptions{Tolerance: -time.Second}, "negative"},
		{"hmac without header", "hmac-sha256", gateway.SchemeOptions{}, "header is required"},
		{"hmac with invalid header", "hmac-sha256", gateway.SchemeOptions{Header: "X Sig"}, "not a valid header name"},
		{"header on another scheme", "github", gateway.SchemeOptions{Header: "X-Sig"}, "only used by hmac-sha256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := gateway.NewScheme(tt.scheme, tt.opts)
			if err == nil {
				t.Fatalf("NewScheme = %v, want error", s)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tt.wantMsg)
			}
		})
	}
}

func TestSchemeCheckSecret(t *testing.T) {
	tests := []struct {
		scheme string
		secret config.Secret
		ok     bool
	}{
		{"standard-webhooks", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", true},
		{"standard-webhooks", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", true},
		{"standard-webhooks", "whsec_not*base64!secret", false},
		{"standard-webhooks", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS", false}, // truncated
		{"standard-webhooks", "whsec_", false},
		{"standard-webhooks", "", false},
		{"stripe", "whsec_anything_goes_here", true},
		{"stripe", "", false},
		{"stripe", "whsec_trailing_newline\n", false},
		{"github", "It's a Secret to Everybody", true},
		{"github", "crlf\r\n", false},
		{"shopify", "shpss_x", true},
		{"hmac-sha256", "k", true},
		{"hmac-sha256", "", false},
		{"nope", "whatever-secret", false},
	}
	for _, tt := range tests {
		t.Run(tt.scheme+"/"+strings.ReplaceAll(tt.secret.Reveal(), "/", "_"), func(t *testing.T) {
			err := gateway.CheckSecret(tt.scheme, tt.secret)
			if (err == nil) != tt.ok {
				t.Fatalf("CheckSecret = %v, want ok=%v", err, tt.ok)
			}
			if err != nil {
				// The secret itself must not appear; strip the prefix the
				// message may legitimately name.
				if v := strings.TrimPrefix(strings.TrimSpace(tt.secret.Reveal()), "whsec_"); v != "" && strings.Contains(err.Error(), v) {
					t.Errorf("message %q contains the secret", err)
				}
			}
		})
	}
}

// BenchmarkVerify measures Verify of a 1 KiB body with one secret. Run with
// -benchmem (make bench); timings are never asserted.
func BenchmarkVerify(b *testing.B) {
	body := bytes.Repeat([]byte(`{"k":"0123456789abcdef"}`), 43)[:1024]
	ts := time.Unix(1700000000, 0)
	for _, c := range schemeConformanceCases {
		b.Run(c.name, func(b *testing.B) {
			s := schemeMust(b, c.name, c.opts)
			h := schemeSign(b, s, body, c.secret, "evt-1", ts)
			secrets := []config.Secret{c.secret}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Verify(h, body, secrets, ts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
