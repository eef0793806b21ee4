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

// A body declared and sent whole at the limit is read into a buffer of
// its size (the doubling stops at the declared length; a bytes.Buffer kept
// twice the body and allocated four times it).
func TestReadBodyAtTheLimit(t *testing.T) {
	const limit = 1 << 20
	body := strings.Repeat("a", limit)
	r := httptest.NewRequest(http.MethodPost, "/webhooks/p", strings.NewReader(body))
	r.ContentLength = limit
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, err := readBody(httptest.NewRecorder(), r, limit)
	runtime.ReadMemStats(&after)
	if err != nil || string(got) != body {
		t.Fatalf("read %d bytes, %v; want the whole body", len(got), err)
	}
	if cap(got) != limit || after.TotalAlloc-before.TotalAlloc > 2*limit+maxPrealloc {
		t.Fatalf("a %d-byte body kept cap %d and allocated %d bytes; want cap %d and under %d", limit, cap(got), after.TotalAlloc-before.TotalAlloc, limit, 2*limit+maxPrealloc)
	}
	// Declared longer than sent: the short read is an error.
	r = httptest.NewRequest(http.MethodPost, "/webhooks/p", strings.NewReader(body[:limit/2]))
	r.ContentLength = limit
	if _, err := readBody(httptest.NewRecorder(), r, limit); err == nil {
		t.Fatal("a body shorter than declared was read without an error")
	}
}
