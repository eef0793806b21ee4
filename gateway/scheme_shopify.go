package gateway

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"time"

	"github.com/hookgate/hookgate/config"
)

// Shopify (https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-5-verify-the-webhook):
//
//	X-Shopify-Hmac-Sha256: <standard base64 of 32 bytes>
//
// HMAC-SHA256 over the raw body with the app's client secret as is. No
// signed timestamp: X-Shopify-Triggered-At and X-Shopify-Event-Id are not
// covered by the MAC, so they are not checked here. The value must be
// canonical padded standard base64, which is what Shopify sends.
type shopifyScheme struct{}

const (
	shopifyHeaderHMAC        = "X-Shopify-Hmac-Sha256"
	shopifyHeaderEventID     = "X-Shopify-Event-Id"
	shopifyHeaderTriggeredAt = "X-Shopify-Triggered-At"
)

// Verify implements Scheme; now is unused (Shopify signs no timestamp).
func (shopifyScheme) Verify(h http.Header, body []byte, secrets []config.Secret, _ time.Time) error {
	const name = SchemeShopify
	v, err := singleHeaderValue(name, h, shopifyHeaderHMAC)
	if err != nil {
		return err
	}
	var got [sha256.Size]byte
	if len(v) != base64.StdEncoding.EncodedLen(sha256.Size) || !decodeScheme32(base64.StdEncoding, v, &got) {
		return newSchemeError(name, ErrSignatureMalformed, shopifyHeaderHMAC+" is not base64 of 32 bytes")
	}
	return verifySchemeBodyMAC(name, shopifyHeaderHMAC, got[:], body, secrets)
}

// Sign implements Scheme: X-Shopify-Hmac-Sha256, X-Shopify-Event-Id (id, or
// a random UUID like Shopify's) and X-Shopify-Triggered-At (ts in UTC,
// RFC 3339 with as many fraction digits as ts has). X-Shopify-Topic and
// X-Shopify-Shop-Domain are left out: only the caller knows them.
func (shopifyScheme) Sign(body []byte, secret config.Secret, id string, ts time.Time) (http.Header, error) {
	const name = SchemeShopify
	if err := checkSchemePlainSecret(secret); err != nil {
		return nil, errors.New(name + " sign: secret " + err.Error())
	}
	id, err := schemeSignID(name, id, schemeUUID)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set(shopifyHeaderHMAC, base64.StdEncoding.EncodeToString(schemeBodyMAC(secret, body, nil)))
	h.Set(shopifyHeaderEventID, id)
	h.Set(shopifyHeaderTriggeredAt, schemeSignTime(ts).UTC().Format(time.RFC3339Nano))
	return h, nil
}
