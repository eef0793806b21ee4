package gateway_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/gateway"
)

// The known answer from NOTES-providers.md (GitHub's documentation example).
const (
	githubVecSecret config.Secret = "It's a Secret to Everybody"
	githubVecBody   string        = "Hello, World!"
	githubVecSig    string        = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
)

func githubH(v string) http.Header {
	h := http.Header{}
	h.Set("X-Hub-Signature-256", v)
	return h
}

func TestSchemeGitHubKnownAnswer(t *testing.T) {
	s := schemeMust(t, "github", gateway.SchemeOptions{})
	h := schemeSign(t, s, []byte(githubVecBody), githubVecSecret, "72d3162e-cc78-11e3-81ab-4c9367dc0958", time.Time{})
	if got := h.Get("X-Hub-Signature-256"); got != githubVecSig {
		t.Errorf("X-Hub-Signature-256 = %q, want %q", got, githubVecSig)
	}
	if got := h.Get("X-GitHub-Delivery"); got != "72d3162e-cc78-11e3-81ab-4c9367dc0958" {
		t.Errorf("X-GitHub-Delivery = %q", got)
	}
	if got := h.Get("X-GitHub-Event"); got != "" {
		t.Errorf("X-GitHub-Event = %q, want it left to the caller", got)
	}
	// No timestamp is signed: any now verifies.
	for _, now := range []time.Time{{}, time.Unix(0, 0), time.Now().Add(24 * 365 * time.Hour)} {
		if err := s.Verify(githubH(githubVecSig), []byte(githubVecBody), []config.Secret{githubVecSecret}, now); err != nil {
			t.Errorf("Verify(known answer, now=%v) = %v", now, err)
		}
	}
}

func TestSchemeGitHubSignUUID(t *testing.T) {
	s := schemeMust(t, "github", gateway.SchemeOptions{})
	id := schemeSign(t, s, nil, githubVecSecret, "", time.Time{}).Get("X-GitHub-Delivery")
	if len(id) != 36 || strings.Count(id, "-") != 4 || id[14] != '4' || !strings.ContainsRune("89ab", rune(id[19])) {
		t.Errorf("X-GitHub-Delivery = %q, want a random (v4) UUID", id)
	}
}

func TestSchemeGitHubHeader(t *testing.T) {
	s := schemeMust(t, "github", gateway.SchemeOptions{})
	hexMAC := strings.TrimPrefix(githubVecSig, "sha256=")
	tests := []struct {
		name string
		v    string
		kind error // nil: accepted
	}{
		{"as GitHub sends", githubVecSig, nil},
		{"uppercase hex", "sha256=" + strings.ToUpper(hexMAC), nil},
		{"garbage", "garbage", gateway.ErrSignatureMalformed},
		{"prefix only", "sha256=", gateway.ErrSignatureMalformed},
		{"no prefix", hexMAC, gateway.ErrSignatureMalformed},
		{"uppercase prefix", "SHA256=" + hexMAC, gateway.ErrSignatureMalformed},
		{"sha1 form", "sha1=" + hexMAC[:40], gateway.ErrSignatureMalformed},
		{"odd hex", githubVecSig[:len(githubVecSig)-1], gateway.ErrSignatureMalformed},
		{"not hex", "sha256=" + strings.Repeat("zz", 32), gateway.ErrSignatureMalformed},
		{"too long", githubVecSig + "00", gateway.ErrSignatureMalformed},
		{"base64 instead of hex", "sha256=dXEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhc=", gateway.ErrSignatureMalformed},
		{"space after prefix", "sha256= " + hexMAC, gateway.ErrSignatureMalformed},
		{"one digit off", "sha256=657107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", gateway.ErrSignatureMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Verify(githubH(tt.v), []byte(githubVecBody), []config.Secret{githubVecSecret}, time.Now())
			if tt.kind == nil {
				if err != nil {
					t.Fatalf("Verify = %v, want nil", err)
				}
				return
			}
			schemeCheckErr(t, err, tt.kind, githubVecSecret)
		})
	}
	t.Run("legacy X-Hub-Signature alone", func(t *testing.T) {
		h := http.Header{}
		h.Set("X-Hub-Signature", "sha1=01dc10d0c83e72ed246219cdd91669667fe2ca59")
		schemeCheckErr(t, s.Verify(h, []byte(githubVecBody), []config.Secret{githubVecSecret}, time.Now()), gateway.ErrSignatureMissing, githubVecSecret)
	})
}

// FuzzSchemeVerifyGitHub: no panic, ErrSignature without the secret, and
// acceptance only of the real HMAC of the body.
func FuzzSchemeVerifyGitHub(f *testing.F) {
	f.Add(githubVecSig, []byte(githubVecBody))
	f.Add("sha256=", []byte(nil))
	f.Add("sha256="+strings.Repeat("G", 64), []byte("x"))
	s := schemeMust(f, "github", gateway.SchemeOptions{})
	secrets := []config.Secret{githubVecSecret}
	f.Fuzz(func(t *testing.T, v string, body []byte) {
		err := s.Verify(githubH(v), body, secrets, time.Time{})
		if err != nil {
			if !errors.Is(err, gateway.ErrSignature) {
				t.Fatalf("error %q does not wrap ErrSignature", err)
			}
			schemeCheckNoLeak(t, err.Error(), githubVecSecret)
			return
		}
		m := hmac.New(sha256.New, []byte(githubVecSecret.Reveal()))
		m.Write(body)
		if strings.ToLower(v) != "sha256="+hex.EncodeToString(m.Sum(nil)) {
			t.Fatalf("Verify accepted %q for body %q", v, body)
		}
	})
}
