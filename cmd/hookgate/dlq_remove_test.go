package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// `dlq remove` takes letters no re-feed can apply out of DLQ, audited,
// their events left in WEBHOOKS; a dry run changes nothing, and a letter
// not there is exit 1. Before it, such letters stayed a status problem
// until DLQ's max_age and a re-feed only appended them anew (a 3 a.m.
// audit, stop 38).
func TestDLQRemove(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nnats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n%s",
		t.TempDir(), freeAddr(t), review6Provider)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	s := review7Start(t, path, true)
	// No occurred_at under ordering: watermark: dead-lettered at once,
	// and every re-feed fails the same way.
	for _, id := range []string{"x1", "x2"} {
		if code := review6Post(t, s.base, `{"id":"`+id+`","grant_id":"G-1"}`); code != 200 {
			t.Fatalf("post %s: %d", id, code)
		}
	}
	letterRe := regexp.MustCompile(`(?m)^(\d+)\s+p:default:evt:(x\d)\s`)
	letters := func() map[string]string {
		r := review9Run(t, "", "dlq", "list", "--config", path)
		if r.code != 0 {
			t.Fatalf("dlq list: %+v", r)
		}
		got := map[string]string{}
		for _, m := range letterRe.FindAllStringSubmatch(r.stdout, -1) {
			got[m[2]] = m[1]
		}
		return got
	}
	var got map[string]string
	for end := time.Now().Add(20 * time.Second); len(got) < 2; got = letters() {
		if time.Now().After(end) {
			t.Fatalf("letters %v, want x1 and x2 dead-lettered (no occurred_at)", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	dry := review9Run(t, "", "dlq", "remove", "--all", "--reason", "occurred_at", "--dry-run", "--config", path)
	if dry.code != 0 || !strings.Contains(dry.stdout, "dry run, nothing changed: 2 letters would be removed") || len(letters()) != 2 {
		t.Fatalf("dry run: exit %d\n%s%s; want 2 letters named and both left", dry.code, dry.stdout, dry.stderr)
	}
	r := review9Run(t, "", "dlq", "remove", got["x1"], "--config", path)
	if r.code != 0 || !strings.Contains(r.stdout, "removed 1 letters") || !strings.Contains(r.stdout, "p:default:evt:x1") {
		t.Fatalf("dlq remove %s: exit %d\n%s%s", got["x1"], r.code, r.stdout, r.stderr)
	}
	if left := letters(); len(left) != 1 || left["x2"] == "" {
		t.Fatalf("letters after removing x1: %v, want x2 only", left)
	}
	// Audited, and the event is still stored (replay can re-feed it).
	var tr review9Result
	for end := time.Now().Add(10 * time.Second); ; {
		tr = review9Run(t, "", "trace", "p:default:evt:x1", "--config", path)
		if strings.Contains(tr.stdout, "dlq-removed") || time.Now().After(end) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(tr.stdout, "dlq-removed") || !strings.Contains(tr.stdout, "operator") || !strings.Contains(tr.stdout, "removed by an operator (dlq remove)") || !strings.Contains(tr.stdout, "WEBHOOKS") {
		t.Fatalf("trace of the removed letter's event:\n%s%s\nwant its dlq-removed record (operator) and its stored event", tr.stdout, tr.stderr)
	}
	again := review9Run(t, "", "dlq", "remove", got["x1"], "--config", path)
	if again.code != 1 || !strings.Contains(again.stdout, "not found") {
		t.Fatalf("removing it again: exit %d\n%s%s; want exit 1, not found", again.code, again.stdout, again.stderr)
	}
	if u := review9Run(t, "", "dlq", "remove", "--config", path); u.code != 2 {
		t.Fatalf("dlq remove with neither SEQ nor --all: exit %d, want 2", u.code)
	}
}
