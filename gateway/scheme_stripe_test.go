package gateway_test

import (
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v84/webhook"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/gateway"
)

const (
	stripeSecret config.Secret = "whsec_test_0123456789abcdefghijklmnopqrstuv"
	stripeOther  config.Secret = "whsec_test_rotated_zyxwvutsrqponmlkjihgfedc"
	stripeBody                 = `{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","type":"invoice.paid"}`
)

var stripeTime = time.Unix(1700000000, 0)

// stripeHeaderFor is the Stripe-Signature the sender would send, generated
// by stripe-go.
func stripeHeaderFor(secret config.Secret, body string, ts time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{
		Payload:   []byte(body),
		Secret:    secret.Reveal(),
		Timestamp: ts,
	}).Header
}

func stripeH(v string) http.Header {
	h := http.Header{}
	h.Set("Stripe-Signature", v)
	return h
}

func TestSchemeStripeInterop(t *testing.T) {
	s := schemeMust(t, "stripe", gateway.SchemeOptions{})
	body := []byte(stripeBody)

	t.Run("stripe-go header verified by ours", func(t *testing.T) {
		h := stripeH(stripeHeaderFor(stripeSecret, stripeBody, stripeTime))
		if err := s.Verify(h, body, []config.Secret{stripeSecret}, stripeTime); err != nil {
			t.Fatalf("Verify = %v", err)
		}
	})
	t.Run("ours verified by stripe-go", func(t *testing.T) {
		now := time.Now()
		h := schemeSign(t, s, body, stripeSecret, "", now)
		if err := webhook.ValidatePayloadWithTolerance(body, h.Get("Stripe-Signature"), stripeSecret.Reveal(), webhook.DefaultTolerance); err != nil {
			t.Fatalf("stripe-go ValidatePayloadWithTolerance = %v", err)
		}
	})
	t.Run("ours equals stripe-go's", func(t *testing.T) {
		h := schemeSign(t, s, body, stripeSecret, "ignored", stripeTime)
		if got, want := h.Get("Stripe-Signature"), stripeHeaderFor(stripeSecret, stripeBody, stripeTime); got != want {
			t.Errorf("Stripe-Signature = %q, want %q", got, want)
		}
	})
	t.Run("stripe-go rejects our tampered body", func(t *testing.T) {
		h := schemeSign(t, s, body, stripeSecret, "", time.Now())
		err := webhook.ValidatePayloadWithTolerance(append(body, ' '), h.Get("Stripe-Signature"), stripeSecret.Reveal(), webhook.DefaultTolerance)
		if !errors.Is(err, webhook.ErrNoValidSignature) {
			t.Fatalf("stripe-go = %v, want ErrNoValidSignature", err)
		}
	})
}

func TestSchemeStripeHeader(t *testing.T) {
	s := schemeMust(t, "stripe", gateway.SchemeOptions{})
	body := []byte(stripeBody)
	good := stripeHeaderFor(stripeSecret, stripeBody, stripeTime)   // t=...,v1=...
	goodV1 := good[strings.Index(good, "v1="):]                     // v1=<hex>
	otherV1 := stripeHeaderFor(stripeOther, stripeBody, stripeTime) // same t, other secret
	otherV1 = otherV1[strings.Index(otherV1, "v1="):]
	v0 := "v0=" + strings.Repeat("ab", 32)
	ts := strconv.FormatInt(stripeTime.Unix(), 10)
	tests := []struct {
		name string
		v    string
		kind error // nil: accepted
	}{
		{"as stripe-go sends", good, nil},
		{"rolled secret: two v1, ours second", "t=" + ts + "," + otherV1 + "," + goodV1, nil},
		{"rolled secret: two v1, ours first", "t=" + ts + "," + goodV1 + "," + otherV1, nil},
		{"v0 alongside is ignored", good + "," + v0, nil},
		{"t after v1", goodV1 + ",t=" + ts, nil},
		{"unknown keys ignored", good + ",v2=zzz,foo=bar", nil},
		{"spaces around elements", "t=" + ts + ", " + goodV1 + " ", nil},
		{"uppercase hex", "t=" + ts + ",v1=" + strings.ToUpper(goodV1[3:]), nil},
		{"only the other secret's v1", "t=" + ts + "," + otherV1, gateway.ErrSignatureMismatch},
		{"v1 moved to v0", "t=" + ts + ",v0=" + goodV1[3:], gateway.ErrSignatureMalformed},
		{"garbage", "garbage", gateway.ErrSignatureMalformed},
		{"t only", "t=" + ts, gateway.ErrSignatureMalformed},
		{"v1 only", goodV1, gateway.ErrSignatureMalformed},
		{"empty t", "t=," + goodV1, gateway.ErrSignatureMalformed},
		{"t not a number", "t=now," + goodV1, gateway.ErrSignatureMalformed},
		{"t negative", "t=-1," + goodV1, gateway.ErrSignatureMalformed},
		{"t leading zero", "t=0" + ts + "," + goodV1, gateway.ErrSignatureMalformed},
		{"t twice", "t=" + ts + ",t=" + ts + "," + goodV1, gateway.ErrSignatureMalformed},
		{"t other second", "t=" + strconv.FormatInt(stripeTime.Unix()+1, 10) + "," + goodV1, gateway.ErrSignatureMismatch},
		{"v1 odd hex", "t=" + ts + "," + goodV1[:len(goodV1)-1], gateway.ErrSignatureMalformed},
		{"v1 not hex", "t=" + ts + ",v1=" + strings.Repeat("zz", 32), gateway.ErrSignatureMalformed},
		{"v1 empty", "t=" + ts + ",v1=", gateway.ErrSignatureMalformed},
		{"v1 too long", "t=" + ts + "," + goodV1 + "00", gateway.ErrSignatureMalformed},
		{"bad v1 next to good one", good + ",v1=xyz", gateway.ErrSignatureMalformed},
		{"element without =", good + ",v1", gateway.ErrSignatureMalformed},
		{"trailing comma", good + ",", gateway.ErrSignatureMalformed},
		{"commas only", ",,,", gateway.ErrSignatureMalformed},
		{"semicolons", strings.ReplaceAll(good, ",", ";"), gateway.ErrSignatureMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Verify(stripeH(tt.v), body, []config.Secret{stripeSecret}, stripeTime)
			if tt.kind == nil {
				if err != nil {
					t.Fatalf("Verify = %v, want nil", err)
				}
				return
			}
			schemeCheckErr(t, err, tt.kind, stripeSecret, stripeOther)
		})
	}
}

func TestSchemeStripeRepeatedHeader(t *testing.T) {
	s := schemeMust(t, "stripe", gateway.SchemeOptions{})
	h := http.Header{}
	h.Add("Stripe-Signature", stripeHeaderFor(stripeSecret, stripeBody, stripeTime))
	h.Add("stripe-signature", stripeHeaderFor(stripeOther, stripeBody, stripeTime))
	err := s.Verify(h, []byte(stripeBody), []config.Secret{stripeSecret, stripeOther}, stripeTime)
	schemeCheckErr(t, err, gateway.ErrSignatureMalformed, stripeSecret, stripeOther)
}

// Stripe's own libraries refuse only old timestamps; we refuse new ones too.
func TestSchemeStripeTolerance(t *testing.T) {
	body := []byte(stripeBody)
	tests := []struct {
		name      string
		tolerance time.Duration
		signedAt  time.Time
		kind      error // nil: accepted
	}{
		{"same second", 0, stripeTime, nil},
		{"exactly 300s old", 0, stripeTime.Add(-300 * time.Second), nil},
		{"301s old", 0, stripeTime.Add(-301 * time.Second), gateway.ErrTimestampTooOld},
		{"exactly 300s ahead", 0, stripeTime.Add(300 * time.Second), nil},
		{"301s ahead", 0, stripeTime.Add(301 * time.Second), gateway.ErrTimestampTooNew},
		{"3 days old (a late retry re-signs, this is a replay)", 0, stripeTime.Add(-72 * time.Hour), gateway.ErrTimestampTooOld},
		{"epoch", 0, time.Unix(0, 0), gateway.ErrTimestampTooOld},
		{"custom 10m: 9m old", 10 * time.Minute, stripeTime.Add(-9 * time.Minute), nil},
		{"custom 10s: 11s old", 10 * time.Second, stripeTime.Add(-11 * time.Second), gateway.ErrTimestampTooOld},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := schemeMust(t, "stripe", gateway.SchemeOptions{Tolerance: tt.tolerance})
			h := stripeH(stripeHeaderFor(stripeSecret, stripeBody, tt.signedAt))
			err := s.Verify(h, body, []config.Secret{stripeSecret}, stripeTime)
			if tt.kind == nil {
				if err != nil {
					t.Fatalf("Verify = %v, want nil", err)
				}
				return
			}
			schemeCheckErr(t, err, tt.kind, stripeSecret)
		})
	}
	t.Run("just past the edge by a nanosecond", func(t *testing.T) {
		s := schemeMust(t, "stripe", gateway.SchemeOptions{})
		h := stripeH(stripeHeaderFor(stripeSecret, stripeBody, stripeTime))
		err := s.Verify(h, body, []config.Secret{stripeSecret}, stripeTime.Add(5*time.Minute+time.Nanosecond))
		schemeCheckErr(t, err, gateway.ErrTimestampTooOld, stripeSecret)
	})
}

// FuzzSchemeVerifyStripe: Verify must not panic, must fail with ErrSignature
// without leaking the secret, and may accept only a header that holds the
// v1 signature stripe-go computes for its t and the body.
func FuzzSchemeVerifyStripe(f *testing.F) {
	f.Add(stripeHeaderFor(stripeSecret, stripeBody, stripeTime), []byte(stripeBody))
	f.Add("t=1700000000,v1="+strings.Repeat("0", 64)+",v0=ff", []byte(stripeBody))
	f.Add("t=,v1=", []byte{})
	f.Add(" t = 1 , v1 = 00 ", []byte("x"))
	s := schemeMust(f, "stripe", gateway.SchemeOptions{})
	secrets := []config.Secret{stripeSecret}
	f.Fuzz(func(t *testing.T, v string, body []byte) {
		now := stripeTime
		var ts int64 = -1
		for el := range strings.SplitSeq(v, ",") {
			if val, ok := strings.CutPrefix(strings.Trim(el, " \t"), "t="); ok {
				if n, err := strconv.ParseInt(val, 10, 64); err == nil && n > 0 && n < 1<<40 {
					ts, now = n, time.Unix(n, 0) // reach the MAC check
				}
			}
		}
		err := s.Verify(stripeH(v), body, secrets, now)
		if err != nil {
			if !errors.Is(err, gateway.ErrSignature) {
				t.Fatalf("error %q does not wrap ErrSignature", err)
			}
			schemeCheckNoLeak(t, err.Error(), stripeSecret)
			return
		}
		want := hex.EncodeToString(webhook.ComputeSignature(time.Unix(ts, 0), body, stripeSecret.Reveal()))
		if ts < 0 || !strings.Contains(strings.ToLower(v), "v1="+want) {
			t.Fatalf("Verify accepted %q, which holds no v1 signature stripe-go computes", v)
		}
	})
}
