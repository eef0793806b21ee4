package gateway_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/gateway"
)

// The known answer from NOTES-providers.md (the Standard Webhooks test vector).
const (
	stdVecSecret config.Secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	stdVecID     string        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	stdVecTS     string        = "1614265330"
	stdVecBody   string        = `{"test": 2432232314}`
	stdVecSig    string        = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

var stdVecTime = time.Unix(1614265330, 0)

func stdHeader(id, ts, sig string) http.Header {
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", ts)
	h.Set("webhook-signature", sig)
	return h
}

func TestSchemeStandardKnownAnswer(t *testing.T) {
	s := schemeMust(t, "standard-webhooks", gateway.SchemeOptions{})
	h := schemeSign(t, s, []byte(stdVecBody), stdVecSecret, stdVecID, stdVecTime)
	want := stdHeader(stdVecID, stdVecTS, stdVecSig)
	for _, k := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		if got := h.Get(k); got != want.Get(k) {
			t.Errorf("Sign %s = %q, want %q", k, got, want.Get(k))
		}
	}
	for _, secret := range []config.Secret{stdVecSecret, config.Secret(strings.TrimPrefix(stdVecSecret.Reveal(), "whsec_"))} {
		if err := s.Verify(want, []byte(stdVecBody), []config.Secret{secret}, stdVecTime); err != nil {
			t.Errorf("Verify(known answer) = %v", err)
		}
	}
}

// TestSchemeStandardInterop checks our Sign against the Standard Webhooks Go
// library's Verify and the library's Sign against our Verify. The library
// reads the clock itself, so these use time.Now().
func TestSchemeStandardInterop(t *testing.T) {
	s := schemeMust(t, "standard-webhooks", gateway.SchemeOptions{})
	wh, err := standardwebhooks.NewWebhook(stdVecSecret.Reveal())
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"grant.awarded","data":{"grant_id":"G-42","amount":1.5e3}}`)
	now := time.Now()

	t.Run("ours verified by library", func(t *testing.T) {
		h := schemeSign(t, s, body, stdVecSecret, "", now)
		if err := wh.Verify(body, h); err != nil {
			t.Fatalf("library Verify = %v", err)
		}
	})
	t.Run("library verified by ours", func(t *testing.T) {
		sig, err := wh.Sign("msg_interop", now, body)
		if err != nil {
			t.Fatal(err)
		}
		h := stdHeader("msg_interop", strconv.FormatInt(now.Unix(), 10), sig)
		if err := s.Verify(h, body, []config.Secret{stdVecSecret}, now); err != nil {
			t.Fatalf("Verify = %v", err)
		}
	})
	t.Run("library rejects our tampered body", func(t *testing.T) {
		h := schemeSign(t, s, body, stdVecSecret, "", now)
		if err := wh.Verify(append(body, '\n'), h); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
			t.Fatalf("library Verify = %v, want ErrNoMatchingSignature", err)
		}
	})
}

func TestSchemeStandardSignatureList(t *testing.T) {
	s := schemeMust(t, "standard-webhooks", gateway.SchemeOptions{})
	body := []byte(stdVecBody)
	otherSig := "v1," + base64.StdEncoding.EncodeToString(make([]byte, 32))
	ed25519Sig := "v1a," + base64.StdEncoding.EncodeToString(make([]byte, 64))
	tests := []struct {
		name string
		sig  string
		kind error // nil: accepted
	}{
		{"only ours", stdVecSig, nil},
		{"ours second", otherSig + " " + stdVecSig, nil},
		{"ours first", stdVecSig + " " + otherSig, nil},
		{"other versions ignored", ed25519Sig + " v2,whatever " + stdVecSig, nil},
		{"extra spaces", "  " + stdVecSig + "   " + otherSig + " ", nil},
		{"only other v1", otherSig, gateway.ErrSignatureMismatch},
		{"only v1a", ed25519Sig, gateway.ErrSignatureMalformed},
		{"garbage", "garbage", gateway.ErrSignatureMalformed},
		{"garbage next to ours", stdVecSig + " garbage", gateway.ErrSignatureMalformed},
		{"v1 with empty signature", "v1,", gateway.ErrSignatureMalformed},
		{"v1 with bad base64", "v1,!!!!M9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", gateway.ErrSignatureMalformed},
		{"v1 unpadded", strings.TrimSuffix(stdVecSig, "="), gateway.ErrSignatureMalformed},
		{"v1 url alphabet", "v1,g0hM9SsE-OTPJTGt_tmIKtSyZlE3uFJELVlNIOLJ1OE=", gateway.ErrSignatureMalformed},
		{"v1 of 31 bytes", "v1," + base64.StdEncoding.EncodeToString(make([]byte, 31)), gateway.ErrSignatureMalformed},
		{"v1 of 33 bytes", "v1," + base64.StdEncoding.EncodeToString(make([]byte, 33)), gateway.ErrSignatureMalformed},
		{"V1 uppercase is another version", "V1," + stdVecSig[3:], gateway.ErrSignatureMalformed},
		{"comma only", ",", gateway.ErrSignatureMalformed},
		{"spaces only", "   ", gateway.ErrSignatureMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Verify(stdHeader(stdVecID, stdVecTS, tt.sig), body, []config.Secret{stdVecSecret}, stdVecTime)
			if tt.kind == nil {
				if err != nil {
					t.Fatalf("Verify = %v, want nil", err)
				}
				return
			}
			schemeCheckErr(t, err, tt.kind, stdVecSecret)
		})
	}
}

func TestSchemeStandardHeaders(t *testing.T) {
	s := schemeMust(t, "standard-webhooks", gateway.SchemeOptions{})
	body := []byte(stdVecBody)
	tests := []struct {
		name   string
		header func(h http.Header)
		kind   error
	}{
		{"id missing", func(h http.Header) { h.Del("webhook-id") }, gateway.ErrSignatureMissing},
		{"timestamp missing", func(h http.Header) { h.Del("webhook-timestamp") }, gateway.ErrSignatureMissing},
		{"id empty", func(h http.Header) { h.Set("webhook-id", "") }, gateway.ErrSignatureMissing},
		{"id changed", func(h http.Header) { h.Set("webhook-id", stdVecID+"x") }, gateway.ErrSignatureMismatch},
		{"id repeated", func(h http.Header) { h.Add("webhook-id", "msg_other") }, gateway.ErrSignatureMalformed},
		{"timestamp repeated", func(h http.Header) { h.Add("webhook-timestamp", stdVecTS) }, gateway.ErrSignatureMalformed},
		{"timestamp changed by one second", func(h http.Header) { h.Set("webhook-timestamp", "1614265331") }, gateway.ErrSignatureMismatch},
		{"timestamp not a number", func(h http.Header) { h.Set("webhook-timestamp", "yesterday") }, gateway.ErrSignatureMalformed},
		{"timestamp RFC 3339", func(h http.Header) { h.Set("webhook-timestamp", "2021-02-25T15:02:10Z") }, gateway.ErrSignatureMalformed},
		{"timestamp leading zero", func(h http.Header) { h.Set("webhook-timestamp", "0"+stdVecTS) }, gateway.ErrSignatureMalformed},
		{"timestamp plus sign", func(h http.Header) { h.Set("webhook-timestamp", "+"+stdVecTS) }, gateway.ErrSignatureMalformed},
		{"timestamp negative", func(h http.Header) { h.Set("webhook-timestamp", "-1") }, gateway.ErrSignatureMalformed},
		{"timestamp fraction", func(h http.Header) { h.Set("webhook-timestamp", stdVecTS+".5") }, gateway.ErrSignatureMalformed},
		{"timestamp milliseconds", func(h http.Header) { h.Set("webhook-timestamp", stdVecTS+"000") }, gateway.ErrTimestampTooNew},
		{"timestamp overflow", func(h http.Header) { h.Set("webhook-timestamp", "99999999999999999999999") }, gateway.ErrSignatureMalformed},
		{"timestamp huge but parseable", func(h http.Header) { h.Set("webhook-timestamp", "999999999999999999") }, gateway.ErrTimestampTooNew},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := stdHeader(stdVecID, stdVecTS, stdVecSig)
			tt.header(h)
			schemeCheckErr(t, s.Verify(h, body, []config.Secret{stdVecSecret}, stdVecTime), tt.kind, stdVecSecret)
		})
	}
}

func TestSchemeStandardTolerance(t *testing.T) {
	body := []byte(stdVecBody)
	h := stdHeader(stdVecID, stdVecTS, stdVecSig)
	tests := []struct {
		name      string
		tolerance time.Duration
		now       time.Time
		kind      error // nil: accepted
	}{
		{"same second", 0, stdVecTime, nil},
		{"default: just inside, old", 0, stdVecTime.Add(5*time.Minute - time.Nanosecond), nil},
		{"default: exactly at the edge, old", 0, stdVecTime.Add(5 * time.Minute), nil},
		{"default: just past the edge, old", 0, stdVecTime.Add(5*time.Minute + time.Nanosecond), gateway.ErrTimestampTooOld},
		{"default: exactly at the edge, new", 0, stdVecTime.Add(-5 * time.Minute), nil},
		{"default: just past the edge, new", 0, stdVecTime.Add(-5*time.Minute - time.Nanosecond), gateway.ErrTimestampTooNew},
		{"default: a day old", 0, stdVecTime.Add(24 * time.Hour), gateway.ErrTimestampTooOld},
		{"default: a day ahead", 0, stdVecTime.Add(-24 * time.Hour), gateway.ErrTimestampTooNew},
		{"custom 30s: 31s old", 30 * time.Second, stdVecTime.Add(31 * time.Second), gateway.ErrTimestampTooOld},
		{"custom 30s: 30s old", 30 * time.Second, stdVecTime.Add(30 * time.Second), nil},
		{"custom 1h: 59m ahead", time.Hour, stdVecTime.Add(-59 * time.Minute), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := schemeMust(t, "standard-webhooks", gateway.SchemeOptions{Tolerance: tt.tolerance})
			err := s.Verify(h.Clone(), body, []config.Secret{stdVecSecret}, tt.now)
			if tt.kind == nil {
				if err != nil {
					t.Fatalf("Verify = %v, want nil", err)
				}
				return
			}
			schemeCheckErr(t, err, tt.kind, stdVecSecret)
			if !strings.Contains(err.Error(), "webhook-timestamp") {
				t.Errorf("error %q does not name the header", err)
			}
		})
	}
}

// The timestamp is checked before any MAC is computed: a stale delivery
// signed with the right secret is still refused.
func TestSchemeStandardToleranceBeforeMAC(t *testing.T) {
	s := schemeMust(t, "standard-webhooks", gateway.SchemeOptions{})
	h := stdHeader(stdVecID, stdVecTS, stdVecSig)
	err := s.Verify(h, []byte(stdVecBody), []config.Secret{stdVecSecret}, stdVecTime.Add(time.Hour))
	schemeCheckErr(t, err, gateway.ErrTimestampTooOld, stdVecSecret)
}

func TestSchemeStandardSign(t *testing.T) {
	s := schemeMust(t, "standard-webhooks", gateway.SchemeOptions{})
	t.Run("generated id", func(t *testing.T) {
		h := schemeSign(t, s, []byte("{}"), stdVecSecret, "", stdVecTime)
		if id := h.Get("webhook-id"); !strings.HasPrefix(id, "msg_") || len(id) != len("msg_")+26 {
			t.Errorf("webhook-id = %q, want msg_ and 26 characters", id)
		}
	})
	t.Run("zero time is now", func(t *testing.T) {
		before := time.Now().Unix()
		h := schemeSign(t, s, []byte("{}"), stdVecSecret, "", time.Time{})
		got, err := strconv.ParseInt(h.Get("webhook-timestamp"), 10, 64)
		if err != nil || got < before || got > time.Now().Unix() {
			t.Errorf("webhook-timestamp = %q, want now", h.Get("webhook-timestamp"))
		}
	})
	t.Run("before 1970", func(t *testing.T) {
		if _, err := s.Sign([]byte("{}"), stdVecSecret, "", time.Unix(-10, 0)); err == nil {
			t.Error("Sign accepted a timestamp before 1970")
		}
	})
	t.Run("bad base64 secret", func(t *testing.T) {
		_, err := s.Sign([]byte("{}"), "whsec_%%%notbase64%%%", "", stdVecTime)
		if err == nil {
			t.Fatal("Sign accepted a secret that is not base64")
		}
		schemeCheckNoLeak(t, err.Error(), "%%%notbase64%%%")
	})
	t.Run("independent MAC", func(t *testing.T) {
		key, _ := base64.StdEncoding.DecodeString("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
		m := hmac.New(sha256.New, key)
		m.Write([]byte("id-1.1614265330.payload"))
		want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
		h := schemeSign(t, s, []byte("payload"), stdVecSecret, "id-1", stdVecTime)
		if got := h.Get("webhook-signature"); got != want {
			t.Errorf("webhook-signature = %q, want %q", got, want)
		}
	})
}

// FuzzSchemeVerifyStandardWebhooks feeds arbitrary headers and bodies to
// Verify. It must not panic, must fail with ErrSignature without leaking
// the secret, and may succeed only when the header holds the signature Sign
// computes for the same id, timestamp and body (so a fuzzer can never make
// up an accepted signature). Valid inputs check that Sign round-trips.
func FuzzSchemeVerifyStandardWebhooks(f *testing.F) {
	f.Add(stdVecID, stdVecTS, stdVecSig, []byte(stdVecBody))
	f.Add(stdVecID, stdVecTS, "v1a,abc "+stdVecSig+" v1,", []byte(stdVecBody))
	f.Add("", "", "", []byte(nil))
	f.Add("a.b", "0", "v1,AAAA", []byte("."))
	s := schemeMust(f, "standard-webhooks", gateway.SchemeOptions{})
	secrets := []config.Secret{stdVecSecret}
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		now := stdVecTime
		if n, err := strconv.ParseInt(ts, 10, 64); err == nil && n > 0 && n < 1<<40 {
			now = time.Unix(n, 0) // reach the MAC check, not just the tolerance check
		}
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", sig)
		err := s.Verify(h, body, secrets, now)
		if err != nil {
			if !errors.Is(err, gateway.ErrSignature) {
				t.Fatalf("error %q does not wrap ErrSignature", err)
			}
			schemeCheckNoLeak(t, err.Error(), stdVecSecret, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
		} else {
			want, serr := s.Sign(body, stdVecSecret, id, now)
			if serr != nil || want.Get("webhook-timestamp") != ts || !strings.Contains(" "+sig+" ", " "+want.Get("webhook-signature")+" ") {
				t.Fatalf("Verify accepted id=%q ts=%q sig=%q, which is not the signature Sign makes", id, ts, sig)
			}
		}
		// Round trip for any id Sign accepts.
		if signed, serr := s.Sign(body, stdVecSecret, id, now); serr == nil {
			if err := s.Verify(signed, body, secrets, now); err != nil {
				t.Fatalf("Verify(Sign(...)) = %v", err)
			}
		}
	})
}
