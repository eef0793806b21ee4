package gateway_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/gateway"
)

const hmacSecret config.Secret = "acme-shared-secret"

func hmacOf(secret config.Secret, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret.Reveal()))
	m.Write(body)
	return m.Sum(nil)
}

// hmacEncodings are the spellings of one digest the scheme accepts.
func hmacEncodings(mac []byte) []string {
	return []string{
		hex.EncodeToString(mac),
		strings.ToUpper(hex.EncodeToString(mac)),
		base64.StdEncoding.EncodeToString(mac),
		base64.RawStdEncoding.EncodeToString(mac),
		base64.URLEncoding.EncodeToString(mac),
		base64.RawURLEncoding.EncodeToString(mac),
	}
}

func TestSchemeHMACEncodings(t *testing.T) {
	// A body whose MAC has both '+' and '/' in standard base64 (and so '-'
	// and '_' in the URL alphabet) tells the alphabets apart.
	var body []byte
	for i := 0; ; i++ {
		body = fmt.Appendf(nil, `{"n":%d}`, i)
		if b := base64.StdEncoding.EncodeToString(hmacOf(hmacSecret, body)); strings.Contains(b, "+") && strings.Contains(b, "/") {
			break
		}
	}
	s := schemeMust(t, "hmac-sha256", gateway.SchemeOptions{Header: "X-Acme-Signature"})
	for _, enc := range hmacEncodings(hmacOf(hmacSecret, body)) {
		for _, prefix := range []string{"", "sha256=", "SHA256=", "Sha256="} {
			t.Run(prefix+enc, func(t *testing.T) {
				h := http.Header{}
				h.Set("x-acme-signature", prefix+enc)
				if err := s.Verify(h, body, []config.Secret{hmacSecret}, time.Time{}); err != nil {
					t.Fatalf("Verify = %v", err)
				}
			})
		}
	}
}

func TestSchemeHMACSign(t *testing.T) {
	s := schemeMust(t, "hmac-sha256", gateway.SchemeOptions{Header: "x-acme-signature"})
	body := []byte(`{"a":1}`)
	h := schemeSign(t, s, body, hmacSecret, "ignored-id", time.Time{})
	want := "sha256=" + hex.EncodeToString(hmacOf(hmacSecret, body))
	if got := h.Get("X-Acme-Signature"); got != want {
		t.Errorf("X-Acme-Signature = %q, want %q", got, want)
	}
	if keys := slices.Collect(func(yield func(string) bool) {
		for k := range h {
			if !yield(k) {
				return
			}
		}
	}); !slices.Equal(keys, []string{"X-Acme-Signature"}) {
		t.Errorf("Sign set headers %v, want only the canonical configured one", keys)
	}
}

func TestSchemeHMACHeader(t *testing.T) {
	s := schemeMust(t, "hmac-sha256", gateway.SchemeOptions{Header: "X-Acme-Signature"})
	body := []byte("payload")
	mac := hmacOf(hmacSecret, body)
	hexMAC := hex.EncodeToString(mac)
	tests := []struct {
		name string
		v    string
		kind error
	}{
		{"garbage", "garbage", gateway.ErrSignatureMalformed},
		{"prefix only", "sha256=", gateway.ErrSignatureMalformed},
		{"odd hex", hexMAC[:63], gateway.ErrSignatureMalformed},
		{"hex one byte short", hexMAC[:62], gateway.ErrSignatureMalformed},
		{"hex with a non-hex digit", "g" + hexMAC[1:], gateway.ErrSignatureMalformed},
		{"44 characters not base64", strings.Repeat("*", 44), gateway.ErrSignatureMalformed},
		{"43 characters not base64", strings.Repeat("*", 43), gateway.ErrSignatureMalformed},
		{"mixed alphabets", "+_" + base64.StdEncoding.EncodeToString(mac)[2:], gateway.ErrSignatureMalformed},
		{"other prefix", "sha1=" + hexMAC, gateway.ErrSignatureMalformed},
		{"prefix twice", "sha256=sha256=" + hexMAC, gateway.ErrSignatureMalformed},
		{"sha512 length", hexMAC + hexMAC, gateway.ErrSignatureMalformed},
		{"other digest", strings.Repeat("0", 64), gateway.ErrSignatureMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			h.Set("X-Acme-Signature", tt.v)
			schemeCheckErr(t, s.Verify(h, body, []config.Secret{hmacSecret}, time.Time{}), tt.kind, hmacSecret)
		})
	}
	t.Run("other header ignored", func(t *testing.T) {
		h := http.Header{}
		h.Set("X-Signature", hexMAC)
		err := s.Verify(h, body, []config.Secret{hmacSecret}, time.Time{})
		schemeCheckErr(t, err, gateway.ErrSignatureMissing, hmacSecret)
		if !strings.Contains(err.Error(), "X-Acme-Signature") {
			t.Errorf("error %q does not name the configured header", err)
		}
	})
}

// FuzzSchemeVerifyHMAC: no panic, ErrSignature without the secret, and
// acceptance only of a spelling of the real HMAC of the body.
func FuzzSchemeVerifyHMAC(f *testing.F) {
	f.Add("sha256="+hex.EncodeToString(hmacOf(hmacSecret, []byte("x"))), []byte("x"))
	f.Add(base64.RawURLEncoding.EncodeToString(hmacOf(hmacSecret, nil)), []byte(nil))
	f.Add("SHA256="+strings.Repeat("=", 44), []byte("y"))
	s := schemeMust(f, "hmac-sha256", gateway.SchemeOptions{Header: "X-Acme-Signature"})
	secrets := []config.Secret{hmacSecret}
	f.Fuzz(func(t *testing.T, v string, body []byte) {
		h := http.Header{}
		h.Set("X-Acme-Signature", v)
		err := s.Verify(h, body, secrets, time.Time{})
		if err != nil {
			if !errors.Is(err, gateway.ErrSignature) {
				t.Fatalf("error %q does not wrap ErrSignature", err)
			}
			schemeCheckNoLeak(t, err.Error(), hmacSecret)
			return
		}
		digest := v
		if len(v) >= 7 && strings.EqualFold(v[:7], "sha256=") {
			digest = v[7:]
		}
		if !slices.Contains(hmacEncodings(hmacOf(hmacSecret, body)), digest) &&
			strings.ToLower(digest) != hex.EncodeToString(hmacOf(hmacSecret, body)) {
			t.Fatalf("Verify accepted %q for body %q", v, body)
		}
	})
}
