package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookgate/hookgate/config"
)

// Stripe (https://docs.stripe.com/webhooks#verify-manually):
//
//	Stripe-Signature: t=1492774577,v1=<hex>[,v1=<hex>...][,v0=<hex>]
//
// The MAC is HMAC-SHA256 over "{t}.{body}", keyed with the secret string as
// is (the `whsec_...` text, not decoded), sent in lowercase hex; only v1
// entries count.
//
// Where we differ from stripe-go, on purpose:
//   - A timestamp further in the future than the tolerance is refused too
//     (stripe-go checks only "too old"); Stripe signs at send time, so only
//     a skewed clock or a forged header is ahead of ours.
//   - Every element must be key=value (spaces around it are allowed), t must
//     appear exactly once in canonical Unix seconds, and every v1 value must
//     be 64 hex digits; otherwise the header is malformed. stripe-go skips
//     undecodable v1 values and, without t, checks against 1970.
//   - Keys other than t and v1 (v0, future schemes) are ignored.
//   - A repeated Stripe-Signature header is malformed, as for every scheme.
type stripeScheme struct {
	tolerance time.Duration
}

const stripeHeader = "Stripe-Signature"

func stripeMAC(secret config.Secret, t string, body []byte, dst []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret.Reveal()))
	m.Write([]byte(t))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(dst)
}

// stripeSignature is a parsed Stripe-Signature header.
type stripeSignature struct {
	t    string // canonical Unix seconds, as received
	unix int64
	v1   [][sha256.Size]byte
}

func parseStripeSignature(v string) (stripeSignature, error) {
	const name = SchemeStripe
	var sig stripeSignature
	malformed := func(detail string) error {
		return newSchemeError(name, ErrSignatureMalformed, stripeHeader+" "+detail)
	}
	for el := range strings.SplitSeq(v, ",") {
		key, val, ok := strings.Cut(strings.Trim(el, " \t"), "=")
		if !ok {
			return sig, malformed("element is not key=value")
		}
		switch key {
		case "t":
			if sig.t != "" {
				return sig, malformed("has t= twice")
			}
			unix, ok := parseSchemeUnix(val)
			if !ok {
				return sig, malformed("t= is not Unix seconds")
			}
			sig.t, sig.unix = val, unix
		case "v1":
			var raw [sha256.Size]byte
			if len(val) != hex.EncodedLen(sha256.Size) {
				return sig, malformed("v1= is not 64 hex digits")
			}
			if _, err := hex.Decode(raw[:], []byte(val)); err != nil {
				return sig, malformed("v1= is not 64 hex digits")
			}
			sig.v1 = append(sig.v1, raw)
		}
	}
	if sig.t == "" {
		return sig, malformed("has no t= timestamp")
	}
	if len(sig.v1) == 0 {
		return sig, malformed("has no v1= signature")
	}
	return sig, nil
}

// Verify implements Scheme.
func (s *stripeScheme) Verify(h http.Header, body []byte, secrets []config.Secret, now time.Time) error {
	const name = SchemeStripe
	v, err := singleHeaderValue(name, h, stripeHeader)
	if err != nil {
		return err
	}
	sig, err := parseStripeSignature(v)
	if err != nil {
		return err
	}
	if err := checkSchemeTolerance(name, stripeHeader+" timestamp", sig.unix, now, s.tolerance); err != nil {
		return err
	}
	usable := false
	var buf [sha256.Size]byte
	for _, secret := range secrets {
		if checkSchemePlainSecret(secret) != nil {
			continue
		}
		usable = true
		want := stripeMAC(secret, sig.t, body, buf[:0])
		for i := range sig.v1 {
			if hmac.Equal(want, sig.v1[i][:]) {
				return nil
			}
		}
	}
	if !usable {
		return newSchemeError(name, ErrSecretUnusable, "no usable secret configured")
	}
	return newSchemeError(name, ErrSignatureMismatch, "no matching v1 signature in "+stripeHeader)
}

// Sign implements Scheme. Stripe carries no id in its headers (the event id
// is in the body), so id is ignored.
func (s *stripeScheme) Sign(body []byte, secret config.Secret, _ string, ts time.Time) (http.Header, error) {
	const name = SchemeStripe
	if err := checkSchemePlainSecret(secret); err != nil {
		return nil, errors.New(name + " sign: secret " + err.Error())
	}
	unix, err := schemeSignUnix(name, ts)
	if err != nil {
		return nil, err
	}
	t := strconv.FormatInt(unix, 10)
	h := http.Header{}
	h.Set(stripeHeader, "t="+t+",v1="+hex.EncodeToString(stripeMAC(secret, t, body, nil)))
	return h, nil
}
