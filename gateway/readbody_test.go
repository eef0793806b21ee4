package gateway

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
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

// The publish gets publishLimit, but never runs into the last second of
// the write timeout, which started when the handler was entered.
func TestPublishDeadline(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := &server{publishLimit: 10 * time.Second, writeTimeout: 30 * time.Second}
	for _, tc := range []struct {
		bodyTook, want time.Duration
	}{
		{0, 10 * time.Second},                // publishLimit
		{12 * time.Second, 22 * time.Second}, // still publishLimit
		{25 * time.Second, 29 * time.Second}, // the write timeout's last second
		{31 * time.Second, 29 * time.Second}, // past: the publish fails at once, a 503
	} {
		if got := s.publishDeadline(t0, t0.Add(tc.bodyTook)).Sub(t0); got != tc.want {
			t.Errorf("body took %s: deadline %s after entry, want %s", tc.bodyTook, got, tc.want)
		}
	}
	s.writeTimeout = 0 // no write timeout: publishLimit alone
	if got := s.publishDeadline(t0, t0.Add(time.Minute)).Sub(t0); got != 70*time.Second {
		t.Errorf("no write timeout: %s, want 70s", got)
	}
}
