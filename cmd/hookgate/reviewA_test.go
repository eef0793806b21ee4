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
// provider renamed for the next rollout), `hookgate replay` dead-letters
// every stored event of that provider, already-applied ones included,
// and exits 0: DLQ (the operator's alert) fills with letters for events
// that were applied, and AUDIT records them as dead-lettered. `replay
// --provider P` with the same config refuses P as "not in the config"
// (exit 1); without the filter the same mistake writes letters.
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
	l := review9Run(t, "", "dlq", "list", "--config", live)
	if !strings.Contains(l.stdout, "0 letters") {
		t.Errorf("after that replay DLQ holds letters for an event that was applied:\n%s", l.stdout)
	}
}
