package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Review BC (the operator's walk through backup and restore): tests that
// fail on the reviewed commit, one per defect.

// TestReviewBCInterruptWhileWaitingForThePause: Ctrl-C of a backup that
// is waiting for a serve's pause answer is ignored. pauseConsumers sends
// the pause with context.WithoutCancel(ctx), so the first SIGINT changes
// nothing: the backup sits out pauseAnswerWait (2 min 10 s by default,
// e.g. a serve whose events under way do not finish, or an older hookgate
// that never answers) before it notices, and an operator who presses
// Ctrl-C again kills it outright (the second signal's default action),
// leaving the serves that did pause paused for up to a minute.
// Expected: an interrupt ends the wait at once (the resume is still sent
// without the cancelled context), the backup exits 1 and leaves nothing.
func TestReviewBCInterruptWhileWaitingForThePause(t *testing.T) {
	// A serve with the consumer role that does not answer the pause.
	_, cfg, _ := serveBesideAnOldServe(t, 30*time.Second)

	out := filepath.Join(t.TempDir(), "backup")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	time.AfterFunc(3*time.Second, cancel) // the operator's Ctrl-C, while the pause is awaited
	var so, se strings.Builder
	start := time.Now()
	err := run(ctx, []string{"backup", "--config", cfg, "--out", out}, func(string) string { return "" }, nil, &so, &se)
	took := time.Since(start)
	code := exitCode(err, &se)
	if took > 10*time.Second {
		t.Errorf("backup interrupted 3 s in returned only after %s (pauseAnswerWait 30 s): Ctrl-C is ignored while the pause is awaited", took.Round(time.Second))
	}
	if code != 1 {
		t.Errorf("interrupted backup: exit %d, want 1\n%s%s", code, so.String(), se.String())
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the interrupted backup left %s (%v)", out, err)
	}
}

// TestReviewBCRestoreBesideTheRunningServe: the usual 3 a.m. restore is a
// copy of the live config with only nats.embedded.data_dir pointed at a
// new directory, run on the machine where the old serve still runs. The
// restore connects to whatever answers on nats.embedded.listen (the old
// serve), not to the new data_dir it just checked is empty, and the
// message blames the wrong thing:
//   - token from data_dir/nats.token: "nats at L refused the token: check
//     nats.embedded.token or NEW/nats.token" (a file that cannot exist
//     in a new data_dir);
//   - token in the config: "WEBHOOKS, ... already on the target (a running
//     serve, or a store in use): restore onto a new data_dir", which is
//     what the operator did.
//
// Expected: an embedded restore writes the new data_dir whatever answers
// on listen (nothing can run on a data_dir it just found empty), or it
// refuses naming nats.embedded.listen and the serve answering there.
func TestReviewBCRestoreBesideTheRunningServe(t *testing.T) {
	for _, tc := range []struct{ name, token string }{
		{"token from data_dir", ""},
		{"token in the config", "token: tok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listen := review9gFreeAddr(t)
			conf := func(dataDir string) string {
				path := filepath.Join(t.TempDir(), "hookgate.yaml")
				yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nnats: { embedded: { data_dir: %q, listen: %q, %s } }\n%s",
					dataDir, listen, tc.token, review6Provider)
				if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
					t.Fatal(err)
				}
				return path
			}
			live := conf(t.TempDir())
			review7Start(t, live, true)
			out := filepath.Join(t.TempDir(), "backup")
			if r := review9Run(t, "", "backup", "--config", live, "--out", out); r.code != 0 {
				t.Fatalf("backup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			fresh := filepath.Join(t.TempDir(), "restored")
			r := review9Run(t, "", "restore", "--config", conf(fresh), "--from", out)
			if r.code != 0 && !strings.Contains(r.stderr, "nats.embedded.listen") {
				t.Fatalf("restore onto the new data_dir %s beside the running serve: exit %d, and the message does not say that a serve answers on nats.embedded.listen %s:\n%s",
					fresh, r.code, listen, r.stderr)
			}
		})
	}
}

// TestReviewBCBackupIntoAnEmptyDirKeepsItsMode: the README says "DIR must
// be new or empty; it is made mode 0700 and the files 0600 (they hold
// every stored body...)". An existing empty DIR (mkdir'ed by the
// operator or a backup script, usually 0755) keeps its mode: the backup
// directory is listable by everyone. Expected: the backup sets DIR to
// 0700 as the README says (or the README says it does not).
func TestReviewBCBackupIntoAnEmptyDirKeepsItsMode(t *testing.T) {
	listen := review9gFreeAddr(t)
	cfg := backupConfig(t, t.TempDir(), listen)
	review7Start(t, cfg, true)
	out := filepath.Join(t.TempDir(), "backup")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(out, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	if r := review9Run(t, "", "backup", "--config", cfg, "--out", out); r.code != 0 {
		t.Fatalf("backup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("backup directory %s is mode %#o, the README says 0700", out, fi.Mode().Perm())
	}
}
