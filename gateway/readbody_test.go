package gateway

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
)

// A declared Content-Length is not trusted with memory before the bytes
// arrive: a request declaring 1 MiB and sending 1 byte costs readBody
// about maxPrealloc, not the 1 MiB (which an unauthenticated sender could
// pin per connection for http.timeouts.read).
func TestReadBodyDoesNotTrustDeclaredLength(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/webhooks/p", strings.NewReader("{"))
	r.ContentLength = 1 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readBody(httptest.NewRecorder(), r, 1<<20)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("a body shorter than declared was read without an error")
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 4*maxPrealloc {
		t.Fatalf("readBody allocated %d bytes for a body of 1 byte declared as 1 MiB; want at most %d (1 MiB before the fix)", got, 4*maxPrealloc)
	}
}
