package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// `dlq replay --all` re-feeds letters in the order their events were
// stored, not DLQ's: a letter re-fed and failed again is appended anew,
// and re-fed after the newer events of its subject, the oldest event was
// dropped as stale, its letter removed, though it had never been applied
// (a 3 a.m. audit, stop 38). The summary says what "resolved" was.
func TestDLQReplayAllFollowsStoredOrder(t *testing.T) {
	var refuse atomic.Bool
	refuse.Store(true)
	var mu sync.Mutex
	var got []string // ids the receiver took, in order
	idRe := regexp.MustCompile(`"id":"(e\d)"`)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse.Load() {
			w.WriteHeader(http.StatusBadRequest) // dead-lettered at once
			return
		}
		var b strings.Builder
		buf := make([]byte, 4096)
		n, _ := r.Body.Read(buf)
		b.Write(buf[:n])
		if m := idRe.FindStringSubmatch(b.String()); m != nil {
			mu.Lock()
			got = append(got, m[1])
			mu.Unlock()
		}
	}))
	defer recv.Close()
	path := forwardConfig(t, recv.URL, "dedup: { horizon: 1h, window: 1s }")
	s := review7Start(t, path, true)
	for i, at := range []string{"10:00", "11:00", "12:00"} {
		if code := review6Post(t, s.base, fmt.Sprintf(`{"id":"e%d","grant_id":"G-1","at":"2026-11-30T%s:00Z"}`, i+1, at)); code != 200 {
			t.Fatalf("post e%d: %d", i+1, code)
		}
	}
	letterRe := regexp.MustCompile(`(?m)^(\d+)\s+p:default:evt:(e\d)\s`)
	letters := func() (seqs, ids []string) {
		r := review9Run(t, "", "dlq", "list", "--config", path)
		if r.code != 0 {
			t.Fatalf("dlq list: %+v", r)
		}
		for _, m := range letterRe.FindAllStringSubmatch(r.stdout, -1) {
			seqs, ids = append(seqs, m[1]), append(ids, m[2])
		}
		return seqs, ids
	}
	var seqs, ids []string
	for end := time.Now().Add(20 * time.Second); len(seqs) < 3; seqs, ids = letters() {
		if time.Now().After(end) {
			t.Fatalf("the consumer dead-lettered %v, want e1, e2 and e3 (their forward answered 400)", ids)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The operator tries the oldest first, while the receiver still
	// refuses: its letter goes to the end of DLQ.
	oldest := seqs[slices.Index(ids, "e1")]
	if r := review9Run(t, "", "dlq", "replay", oldest, "--config", path); r.code != 1 || !strings.Contains(r.stdout, "failed again") {
		t.Fatalf("dlq replay %s with the receiver refusing: exit %d\n%s%s; want failed again", oldest, r.code, r.stdout, r.stderr)
	}
	if _, ids = letters(); strings.Join(ids, ",") != "e2,e3,e1" {
		t.Fatalf("DLQ order %v, want e2,e3,e1 (the re-fed letter appended anew)", ids)
	}
	refuse.Store(false)
	r := review9Run(t, "", "dlq", "replay", "--all", "--config", path)
	if r.code != 0 || !strings.Contains(r.stdout, "re-fed 3 letters: 3 resolved (3 applied), 0 failed again") {
		t.Fatalf("dlq replay --all: exit %d\n%s%s; want all three applied", r.code, r.stdout, r.stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, ",") != "e1,e2,e3" {
		t.Fatalf("the receiver got %v, want e1,e2,e3: each event once, in its subject's order", got)
	}
}
