package consumer

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hookgate/hookgate/config"
)

// Review of forward.secrets (4843b88): each secret adds 49 bytes to
// webhook-signature. 2000 of them (config check said ok before the review)
// make a header past serve's own MaxHeaderBytes (64 KiB): a hookgate
// receiver answered 431 and every event was dead-lettered at once. As many
// as config check now allows fit, also nginx's default 8 KiB line.
func TestReviewAULongSecretsListFitsAReceiver(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.MaxHeaderBytes = 64 << 10 // cmd/hookgate/serve.go
	srv.Start()
	t.Cleanup(srv.Close)
	var secs []config.Secret
	for i := range config.MaxForwardSecrets {
		secs = append(secs, config.Secret("whsec_"+base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "secret-%04d", i))))
	}
	if n := len(forwardSignatureHeader(secs)); n > 8<<10 {
		t.Fatalf("webhook-signature of %d secrets: %d bytes, past 8 KiB", len(secs), n)
	}
	f := newTestForward(t, ForwardOptions{URL: srv.URL, Secrets: secs})
	if err := f.Apply(t.Context(), forwardTestEvent()); err != nil {
		status := 0
		if fe := (*ForwardError)(nil); errors.As(err, &fe) {
			status = fe.Status
		}
		t.Fatalf("forward with %d secrets: %v (status %d)", len(secs), err, status)
	}
}

// forwardSignatureHeader is the webhook-signature NewForward writes with secs.
func forwardSignatureHeader(secs []config.Secret) string {
	f, _ := NewForward(ForwardOptions{URL: "http://h/", Timeout: 1, Secrets: secs})
	h, _ := f.header(forwardTestEvent())
	return h.Get("webhook-signature")
}
