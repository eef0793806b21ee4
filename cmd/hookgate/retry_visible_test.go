package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// An event whose forward keeps failing shows where it is: trace's
// consumer line says it was delivered and is not settled (it said only
// "no event applied yet"), and status names events delivered again as a
// problem (it said "PROBLEMS none" for the half hour of retries before
// the first dead letter). A 3 a.m. audit, stop 38.
func TestRetryingEventIsVisible(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer down.Close()
	path := forwardConfig(t, down.URL, "consumer: { max_deliver: 1000, backoff: [200ms] }")
	s := review7Start(t, path, true)
	if code := review6Post(t, s.base, `{"id":"r1","grant_id":"G-1","at":"2026-11-30T10:00:00Z"}`); code != 200 {
		t.Fatalf("post: %d", code)
	}
	var st, tr review9Result
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st = review9Run(t, "", "status", "--config", path)
		tr = review9Run(t, "", "trace", "p:default:evt:r1", "--config", path)
		if strings.Contains(st.stdout, "events delivered again and not yet settled") &&
			strings.Contains(tr.stdout, "hookgate-apply delivered WEBHOOKS seq 1 and has not settled it") {
			return
		}
		if time.Now().After(end) {
			break
		}
	}
	t.Fatalf("an event retrying for 30 s: want status's problem line and trace's consumer line\nstatus:\n%s%s\ntrace:\n%s%s", st.stdout, st.stderr, tr.stdout, tr.stderr)
}
