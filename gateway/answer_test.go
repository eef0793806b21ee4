package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// writeOK must give the bytes writeJSON gives, for every key shape.
func TestWriteOKMatchesWriteJSON(t *testing.T) {
	keys := []string{
		"grants:default:evt:msg_1",
		"p:acct#" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + ":dig:ff",
		`p:a:evt:quote"back\slash`,
		"p:a:evt:<script>&amp;",
		"p:a:evt:tab\there",
		"p:a:evt:caf\xc3\xa9",
		"p:a:evt:bad\xff",
		"",
	}
	for _, status := range []string{"accepted", "duplicate"} {
		for _, key := range keys {
			fast, slow := httptest.NewRecorder(), httptest.NewRecorder()
			writeOK(fast, status, key)
			writeJSON(slow, http.StatusOK, answer{Status: status, Key: key})
			if fast.Body.String() != slow.Body.String() || fast.Code != slow.Code ||
				fast.Header().Get("Content-Type") != slow.Header().Get("Content-Type") {
				t.Errorf("key %q: writeOK %d %q %q, writeJSON %d %q %q", key,
					fast.Code, fast.Header().Get("Content-Type"), fast.Body, slow.Code, slow.Header().Get("Content-Type"), slow.Body)
			}
		}
	}
}

func TestDropHeaderIgnoresCase(t *testing.T) {
	hop := map[string]bool{"X-Hop": true}
	for name, want := range map[string]bool{
		"Nats-Msg-Id": true, "NATS-Expected-Stream": true, "nats-rollup": true,
		"Hookgate-Key": true, "HOOKGATE-Provider": true, "Proxy-Authorization": true, "proxy-x": true,
		"Authorization": true, "Cookie": true, "Connection": true, "X-Hop": true,
		"X-Nats-Trace": false, "Natsy": false, "Hookgate": false, "Content-Type": false, "X-Signature": false,
	} {
		if got := dropHeader(name, hop); got != want {
			t.Errorf("dropHeader(%q) = %v, want %v", name, got, want)
		}
	}
}
