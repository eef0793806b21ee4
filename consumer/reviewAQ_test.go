package consumer

// Review AQ: what a forward's 3xx puts in its reason.

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode"
)

// TestReviewAQForwardRedirectReasonIsPlainText: the receiver's Location
// host goes into the error, which becomes the DLQ reason
// (Hookgate-Dlq-Reason, printed raw by `hookgate dlq list`), the AUDIT
// record's reason and the log line. url.Parse refuses ASCII control bytes
// but takes percent-encoded non-ASCII in a host, decoded: a receiver (or
// anything between, a captive proxy) can put a right-to-left override or
// a C1 CSI (U+009B, an escape sequence on many terminals) into text an
// operator reads: "it points to https://pay<RLO>moc.elpmaxe" shows as a
// different host. Userinfo does not leak (Host has none).
func TestReviewAQForwardRedirectReasonIsPlainText(t *testing.T) {
	for _, loc := range []string{
		"https://pay%E2%80%AEmoc.elpmaxe/x",         // U+202E right-to-left override
		"https://a%C2%9B31mred.example/x",           // U+009B CSI
		"https://user:s3cret@ok.example:8443/p?t=1", // userinfo, path and query: must not show
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header()["Location"] = []string{loc}
			w.WriteHeader(http.StatusFound)
		}))
		f := newTestForward(t, ForwardOptions{URL: srv.URL + "/hook"})
		err := f.Apply(t.Context(), forwardTestEvent())
		srv.Close()
		if err == nil {
			t.Fatalf("Location %s: Apply = nil", loc)
		}
		msg := err.Error()
		if strings.Contains(msg, "s3cret") || strings.Contains(msg, "t=1") {
			t.Errorf("Location %s: reason %q quotes userinfo or query", loc, msg)
		}
		for _, r := range msg {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == unicode.ReplacementChar {
				t.Errorf("Location %s: reason %q holds %U from the receiver's Location, which dlq list, trace and the logs print as is", loc, msg, r)
				break
			}
		}
	}
}
