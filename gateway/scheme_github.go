package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/hookgate/hookgate/config"
)

// GitHub (https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries):
//
//	X-Hub-Signature-256: sha256=<64 hex digits>
//
// HMAC-SHA256 over the raw body with the secret as is. There is no signed
// timestamp, so a captured delivery can be replayed at any time; dedup on
// X-GitHub-Delivery (which is not signed either, see CONTRACT.md's warning)
// is the only guard. The legacy SHA-1 X-Hub-Signature is not accepted.
//
// The "sha256=" prefix must be lowercase, as GitHub sends it; the hex digits
// may be either case.
type githubScheme struct{}

const (
	githubHeaderSignature = "X-Hub-Signature-256"
	githubHeaderDelivery  = "X-GitHub-Delivery"
	githubPrefix          = "sha256="
)

// schemeBodyMAC is HMAC-SHA256 of body under the secret as is, the MAC of every
// scheme that signs the raw body alone.
func schemeBodyMAC(secret config.Secret, body []byte, dst []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret.Reveal()))
	m.Write(body)
	return m.Sum(dst)
}

// verifySchemeBodyMAC checks got, an already decoded 32-byte MAC, against each
// usable secret.
func verifySchemeBodyMAC(scheme, header string, got []byte, body []byte, secrets []config.Secret) error {
	usable := false
	var buf [sha256.Size]byte
	for _, secret := range secrets {
		if checkSchemePlainSecret(secret) != nil {
			continue
		}
		usable = true
		if hmac.Equal(schemeBodyMAC(secret, body, buf[:0]), got) {
			return nil
		}
	}
	if !usable {
		return newSchemeError(scheme, ErrSecretUnusable, "no usable secret configured")
	}
	return newSchemeError(scheme, ErrSignatureMismatch, "signature in "+header+" does not match")
}

// Verify implements Scheme; now is unused (GitHub signs no timestamp).
func (githubScheme) Verify(h http.Header, body []byte, secrets []config.Secret, _ time.Time) error {
	const name = SchemeGitHub
	v, err := singleHeaderValue(name, h, githubHeaderSignature)
	if err != nil {
		return err
	}
	hexMAC, ok := strings.CutPrefix(v, githubPrefix)
	var got [sha256.Size]byte
	if !ok || len(hexMAC) != hex.EncodedLen(sha256.Size) {
		return newSchemeError(name, ErrSignatureMalformed, githubHeaderSignature+" is not sha256=<64 hex digits>")
	}
	if _, err := hex.Decode(got[:], []byte(hexMAC)); err != nil {
		return newSchemeError(name, ErrSignatureMalformed, githubHeaderSignature+" is not sha256=<64 hex digits>")
	}
	return verifySchemeBodyMAC(name, githubHeaderSignature, got[:], body, secrets)
}

// Sign implements Scheme: X-Hub-Signature-256 and X-GitHub-Delivery (id, or
// a random UUID like GitHub's). ts is unused. X-GitHub-Event is left out:
// it names the kind of body, which only the caller knows and which the
// signature does not cover, so a guess ("ping", "push") would mislabel
// events; add it yourself (curl -H 'X-GitHub-Event: push').
func (githubScheme) Sign(body []byte, secret config.Secret, id string, _ time.Time) (http.Header, error) {
	const name = SchemeGitHub
	if err := checkSchemePlainSecret(secret); err != nil {
		return nil, errors.New(name + " sign: secret " + err.Error())
	}
	id, err := schemeSignID(name, id, schemeUUID)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set(githubHeaderSignature, githubPrefix+hex.EncodeToString(schemeBodyMAC(secret, body, nil)))
	h.Set(githubHeaderDelivery, id)
	return h, nil
}
