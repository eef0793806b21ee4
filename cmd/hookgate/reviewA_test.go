package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// reviewAConfig writes an embedded config (NATS on natsAddr, token tok)
// over dataDir with the given providers block.
func reviewAConfig(t *testing.T, dataDir, natsAddr, extra, providers string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\n%snats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n%s",
		extra, dataDir, natsAddr, providers)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// reviewAWaitFor polls cmd (a CLI command line) until its stdout contains
// want.
func reviewAWaitFor(t *testing.T, want string, within time.Duration, args ...string) review9Result {
	t.Helper()
	var r review9Result
	for end := time.Now().Add(within); ; {
		r = review9Run(t, "", args...)
		if strings.Contains(r.stdout, want) {
			return r
		}
		if time.Now().After(end) {
			t.Fatalf("%v: no %q within %s: exit %d\n%s%s", args, want, within, r.code, r.stdout, r.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReviewAReplayWithAConfigMissingAProviderDoesNotDeadLetterAppliedEvents:
// the contract's replay "re-feeds stored events through the consumer
// rules ... one line per event with its key and decision (apply, stale,
// already-applied, beyond-horizon)". Run with a config that lacks one of
// the providers whose events are stored (a copy for another instance, a
// provider renamed for the next rollout), `hookgate replay` reports those
// events not-in-config, leaves them alone and exits 1 naming the
// provider. Before (review A) it dead-lettered every stored event of that
// provider, already-applied ones included, and exited 0: DLQ (the
// operator's alert) filled with letters for events that were applied, and
// AUDIT recorded them as dead-lettered.
func TestReviewAReplayWithAConfigMissingAProviderDoesNotDeadLetterAppliedEvents(t *testing.T) {
	dataDir, natsAddr := t.TempDir(), freeAddr(t)
	live := reviewAConfig(t, dataDir, natsAddr, "", review6Provider+`  q:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["`+review6Secret+`"] }
    event_id: ["json:/id"]
    ordering: none
`)
	s := review7Start(t, live, true)
	if code := review6Post(t, s.base, `{"id":"e1","grant_id":"G-1","at":"2026-11-30T10:00:00Z"}`); code != 200 {
		t.Fatalf("post: %d", code)
	}
	reviewAWaitFor(t, "already-applied", 15*time.Second, "replay", "--dry-run", "--config", live)

	// The same system, a config without provider p.
	other := reviewAConfig(t, dataDir, natsAddr, "", `providers:
  q:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["`+review6Secret+`"] }
    event_id: ["json:/id"]
    ordering: none
`)
	r := review9Run(t, "", "replay", "--config", other)
	t.Logf("replay with a config lacking p: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	if strings.Contains(r.stdout, "dead-lettered") {
		t.Errorf("replay with a config lacking provider p decided its applied event dead-lettered:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "not-in-config") || r.code != 1 || !strings.Contains(r.stderr, "not in the config were left alone (p)") {
		t.Errorf("replay with a config lacking provider p: exit %d, want 1, its event reported not-in-config and p named:\n%s%s", r.code, r.stdout, r.stderr)
	}
	l := review9Run(t, "", "dlq", "list", "--config", live)
	if !strings.Contains(l.stdout, "0 letters") {
		t.Errorf("after that replay DLQ holds letters for an event that was applied:\n%s", l.stdout)
	}
}

// Review A's smaller findings in dlq replay: a SEQ given twice was re-fed
// once and then reported "not found" (exit 1); a dry run counted a letter
// that would be dead-lettered again among the rest and exited 0; a letter
// of a provider missing from the config was re-fed, dead-lettered again
// for want of a rule, its letter replaced by a new one.
func TestReviewADLQReplaySmallerFindings(t *testing.T) {
	dataDir, natsAddr := t.TempDir(), freeAddr(t)
	live := reviewAConfig(t, dataDir, natsAddr, "", review6Provider)
	s := review7Start(t, live, true)
	// No occurred_at under watermark ordering: dead-lettered at once.
	if code := review6Post(t, s.base, `{"id":"e1","grant_id":"G-1"}`); code != 200 {
		t.Fatalf("post: %d", code)
	}
	reviewAWaitFor(t, "1 letters", 15*time.Second, "dlq", "list", "--config", live)

	r := review9Run(t, "", "dlq", "replay", "1", "1", "--dry-run", "--config", live)
	if strings.Contains(r.stdout, "not found") || strings.Count(r.stdout, "p:default:evt:e1") != 1 {
		t.Errorf("dlq replay 1 1 --dry-run: want letter 1 once, none not found:\n%s%s", r.stdout, r.stderr)
	}
	if r.code != 1 || !strings.Contains(r.stdout, "1 would be dead-lettered again") {
		t.Errorf("dry run of a letter that would fail again: exit %d, want 1 and the summary saying so:\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A letter not found is not one the re-feed would re-feed (audit 42:
	// the dry run's summary said "2 letters", the real run "re-fed 1").
	r = review9Run(t, "", "dlq", "replay", "1", "99", "--dry-run", "--config", live)
	if !strings.Contains(r.stdout, "dry run, nothing changed: 1 letters,") {
		t.Errorf("dlq replay 1 99 --dry-run (99 not found): want the summary to count the 1 letter it would re-feed:\n%s%s", r.stdout, r.stderr)
	}

	other := reviewAConfig(t, dataDir, natsAddr, "", `providers:
  q:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["`+review6Secret+`"] }
    event_id: ["json:/id"]
`)
	r = review9Run(t, "", "dlq", "replay", "1", "--config", other)
	if r.code != 1 || !strings.Contains(r.stdout, "provider p is not in this config: letter left in DLQ") {
		t.Errorf("dlq replay of a letter whose provider the config lacks: exit %d, want 1 and the letter left:\n%s%s", r.code, r.stdout, r.stderr)
	}
	l := review9Run(t, "", "dlq", "list", "--config", live)
	if !strings.Contains(l.stdout, "1 letters") || !strings.HasPrefix(strings.Split(l.stdout, "\n")[1], "1 ") {
		t.Errorf("after that, DLQ should hold letter 1 as it was:\n%s", l.stdout)
	}
}
