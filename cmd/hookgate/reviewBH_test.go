package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Review BH: `hookgate replay` of an event whose forward keeps failing
// dead-letters it again; once DLQ's duplicate window (dedup.window) had
// passed since its letter, that wrote a second, identical letter for the
// same stored event (which `dlq replay --all` then re-fed twice). Now the
// new letter replaces the old one, as `dlq replay` does for a letter that
// fails again: each replay leaves exactly one letter, and the replay that
// wrote a new one (the window passed) says which it replaced.
func TestReviewBHReplayKeepsOneLetterPerEvent(t *testing.T) {
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadRequest) }))
	defer refuse.Close()
	path := forwardConfig(t, refuse.URL, "dedup: { horizon: 1h, window: 1s }")
	s := review7Start(t, path, true)
	if code := review6Post(t, s.base, `{"id":"e1","grant_id":"G-1","at":"2026-11-30T10:00:00Z"}`); code != 200 {
		t.Fatalf("post: %d", code)
	}
	seqRe := regexp.MustCompile(`(?m)^(\d+)\s+p:default:evt:e1\s`)
	letters := func() []string {
		r := review9Run(t, "", "dlq", "list", "--config", path)
		if r.code != 0 {
			t.Fatalf("dlq list: %+v", r)
		}
		var seqs []string
		for _, m := range seqRe.FindAllStringSubmatch(r.stdout, -1) {
			seqs = append(seqs, m[1])
		}
		return seqs
	}
	var first []string
	for end := time.Now().Add(10 * time.Second); len(first) == 0; first = letters() {
		if time.Now().After(end) {
			t.Fatal("the consumer did not dead-letter the event (its forward answered 400)")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(first) != 1 {
		t.Fatalf("letters after the consumer: %v, want one", first)
	}
	// Replay until one replay writes a new letter (DLQ's window has passed):
	// after every replay there is one letter of the event.
	for end := time.Now().Add(20 * time.Second); ; {
		r := review9Run(t, "", "replay", "--config", path)
		if !strings.Contains(r.stdout, "dead-lettered") {
			t.Fatalf("replay: exit %d\n%s%s; want the event dead-lettered again", r.code, r.stdout, r.stderr)
		}
		// Not applied: exit 1, saying so (it exited 0 before).
		if r.code != 1 || !strings.Contains(r.stderr, "1 events were dead-lettered, not applied") {
			t.Errorf("replay that dead-lettered the event: exit %d, stderr %q; want 1 and a line saying so", r.code, r.stderr)
		}
		now := letters()
		if len(now) != 1 {
			t.Fatalf("after a replay the stored event has letters %v, want one:\n%s", now, r.stdout)
		}
		if now[0] != first[0] {
			if want := fmt.Sprintf("letter %s replaces letter %s in DLQ", now[0], first[0]); !strings.Contains(r.stdout, want) {
				t.Errorf("the replay that wrote letter %s does not say %q:\n%s", now[0], want, r.stdout)
			}
			return
		}
		if !strings.Contains(r.stdout, "already in DLQ as letter "+first[0]) {
			t.Errorf("a replay that wrote no new letter does not point to letter %s:\n%s", first[0], r.stdout)
		}
		if time.Now().After(end) {
			t.Fatal("no replay wrote a new letter within 20 s (DLQ's duplicate window is 1 s)")
		}
	}
}

// forwardConfig writes a config whose provider p (review6Provider)
// forwards to url, with top (YAML lines) beside it, an embedded server
// listening on a free port with token tok; it returns the file's path.
func forwardConfig(t *testing.T, url, top string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	provider := strings.Replace(review6Provider, `    occurred_at: "json:/at"`, `    occurred_at: "json:/at"
    effects: { forward: { url: "`+url+`" } }`, 1)
	yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\n%s\nnats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n%s",
		top, t.TempDir(), freeAddr(t), provider)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
