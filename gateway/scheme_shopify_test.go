package gateway_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/gateway"
)

// The GitHub known answer (same MAC: HMAC-SHA256 of the raw body, secret as
// is) in Shopify's base64.
const shopifyVecSig = "dXEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhc="

func shopifyH(v string) http.Header {
	h := http.Header{}
	h.Set("X-Shopify-Hmac-Sha256", v)
	return h
}

func TestSchemeShopifyKnownAnswer(t *testing.T) {
	s := schemeMust(t, "shopify", gateway.SchemeOptions{})
	ts := time.Date(2024, 3, 29, 18, 0, 27, 877041000, time.FixedZone("EST", -5*3600))
	h := schemeSign(t, s, []byte(githubVecBody), githubVecSecret, "98880550-7158-44d4-b7cd-2c97c8a091b5", ts)
	want := map[string]string{
		"X-Shopify-Hmac-Sha256":  shopifyVecSig,
		"X-Shopify-Event-Id":     "98880550-7158-44d4-b7cd-2c97c8a091b5",
		"X-Shopify-Triggered-At": "2024-03-29T23:00:27.877041Z",
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if len(h) != len(want) {
		t.Errorf("Sign set %d headers, want %d: %v", len(h), len(want), h)
	}
	if err := s.Verify(shopifyH(shopifyVecSig), []byte(githubVecBody), []config.Secret{githubVecSecret}, time.Time{}); err != nil {
		t.Errorf("Verify(known answer) = %v", err)
	}
	if got := schemeSign(t, s, nil, githubVecSecret, "", time.Unix(1700000000, 0)).Get("X-Shopify-Triggered-At"); got != "2023-11-14T22:13:20Z" {
		t.Errorf("X-Shopify-Triggered-At = %q for a whole second", got)
	}
}

func TestSchemeShopifyHeader(t *testing.T) {
	s := schemeMust(t, "shopify", gateway.SchemeOptions{})
	tests := []struct {
		name string
		v    string
		kind error // nil: accepted
	}{
		{"as Shopify sends", shopifyVecSig, nil},
		{"garbage", "garbage", gateway.ErrSignatureMalformed},
		{"hex instead of base64", "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", gateway.ErrSignatureMalformed},
		{"unpadded", strings.TrimSuffix(shopifyVecSig, "="), gateway.ErrSignatureMalformed},
		{"url alphabet", strings.ReplaceAll(shopifyVecSig, "/", "_"), gateway.ErrSignatureMalformed},
		{"sha256= prefix", "sha256=" + shopifyVecSig, gateway.ErrSignatureMalformed},
		{"31 bytes", base64.StdEncoding.EncodeToString(make([]byte, 31)), gateway.ErrSignatureMalformed},
		{"non-canonical padding bits", shopifyVecSig[:42] + "d=", gateway.ErrSignatureMalformed},
		{"other MAC", base64.StdEncoding.EncodeToString(make([]byte, 32)), gateway.ErrSignatureMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Verify(shopifyH(tt.v), []byte(githubVecBody), []config.Secret{githubVecSecret}, time.Now())
			if tt.kind == nil {
				if err != nil {
					t.Fatalf("Verify = %v, want nil", err)
				}
				return
			}
			schemeCheckErr(t, err, tt.kind, githubVecSecret)
		})
	}
}

// FuzzSchemeVerifyShopify: no panic, ErrSignature without the secret, and
// acceptance only of the real HMAC of the body in standard base64.
func FuzzSchemeVerifyShopify(f *testing.F) {
	f.Add(shopifyVecSig, []byte(githubVecBody))
	f.Add("====", []byte(nil))
	f.Add(strings.Repeat("A", 43)+"=", []byte("x"))
	s := schemeMust(f, "shopify", gateway.SchemeOptions{})
	secrets := []config.Secret{githubVecSecret}
	f.Fuzz(func(t *testing.T, v string, body []byte) {
		err := s.Verify(shopifyH(v), body, secrets, time.Time{})
		if err != nil {
			if !errors.Is(err, gateway.ErrSignature) {
				t.Fatalf("error %q does not wrap ErrSignature", err)
			}
			schemeCheckNoLeak(t, err.Error(), githubVecSecret)
			return
		}
		m := hmac.New(sha256.New, []byte(githubVecSecret.Reveal()))
		m.Write(body)
		if v != base64.StdEncoding.EncodeToString(m.Sum(nil)) {
			t.Fatalf("Verify accepted %q for body %q", v, body)
		}
	})
}
