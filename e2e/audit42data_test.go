package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Each test below was written, failing, against the code before its fix, and
// its comment tells the defect as the audit found it: all are fixed since
// (stop 42), and the tests hold the fixes.

// TestAudit42DataStoreDirNotADirectoryRefusedWithoutReason: data_dir's
// store directory (data_dir/jetstream) is a file (a restore or a copy gone
// wrong, an operator's mistake). The embedded server says at once why it
// cannot start ("storage directory is not a directory"), but serve first
// warns that data_dir holds no event store and it starts "a new, empty
// one", waits 30 s, and then exits with "embedded nats-server did not
// become ready within 30s": a refusal whose one line names neither the
// path nor what to fix (the contract: exit 1 with a one-line message
// naming what to fix). `hookgate status` says the same, after 30 s too.
func TestAudit42DataStoreDirNotADirectoryRefusedWithoutReason(t *testing.T) {
	cfg, dir := writeConfig(t, `http: { listen: "127.0.0.1:0" }
nats: { embedded: { data_dir: %q } }
providers:
  grants:
    signature: { scheme: standard-webhooks, secrets: ["`+grantsSecret+`"] }
`)
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "jetstream"), []byte("not a store\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	started := time.Now()
	out, err := exec.CommandContext(ctx, binary, "serve", "--config", cfg).CombinedOutput()
	took := time.Since(started)
	ee, ok := err.(*exec.ExitError)
	last := strings.TrimSpace(string(out))
	if i := strings.LastIndex(last, "\n"); i >= 0 {
		last = last[i+1:]
	}
	if !ok || ee.ExitCode() != 1 || took > 10*time.Second || !strings.Contains(last, "jetstream") {
		t.Fatalf("serve on a data_dir whose jetstream is a file: %v after %s, last line %q; want exit 1 within seconds naming %s/jetstream and why",
			err, took.Round(time.Second), last, data)
	}
}

// audit42DataBackupOfTwo serves an embedded store, posts two events of
// subject G1 (the first older), waits until both are applied, stops it and
// backs it up; it returns the backup's directory and the first event's id
// and body.
func audit42DataBackupOfTwo(t *testing.T) (bk, id string, body []byte) {
	t.Helper()
	port := freePort(t)
	cfg, dir := writeConfig(t, `http: { listen: "127.0.0.1:0" }
nats: { embedded: { data_dir: %q, listen: "127.0.0.1:`+fmt.Sprint(port)+`", token: tok } }
providers:
  grants:
    signature: { scheme: standard-webhooks, secrets: ["`+grantsSecret+`"] }
    subject: "json:/grant_id"
    occurred_at: "json:/occurred_at"
`)
	hg := start(t, cfg)
	first := []byte(`{"grant_id":"G1","occurred_at":"2026-01-01T00:00:01Z"}`)
	second := []byte(`{"grant_id":"G1","occurred_at":"2026-01-01T00:00:02Z"}`)
	for i, b := range [][]byte{first, second} {
		if r := post(t, hg.baseURL+"/webhooks/grants", signGrants(t, fmt.Sprintf("two-%d", i), b), b); r.status != 200 {
			t.Fatalf("post: %d %s", r.status, r.body)
		}
	}
	j := natsClient(t, fmt.Sprintf("nats://127.0.0.1:%d", port), "tok")
	waitFor(t, "both applied", 30*time.Second, func() bool {
		s, err := j.Stream(context.Background(), "GRANTS")
		if err != nil {
			return false
		}
		info, err := s.Info(context.Background())
		return err == nil && info.State.Msgs == 2
	})
	hg.stop(t)
	bk = filepath.Join(dir, "bk")
	if out, errOut, code := cli(t, "backup", "--config", cfg, "--out", bk); code != 0 {
		t.Fatalf("backup: exit %d\n%s%s", code, out, errOut)
	}
	return bk, "two-0", first
}

// TestAudit42DataRestoreOntoNATSURLPromisesAKeyIndex: `hookgate restore`
// onto a NATS server given by nats.url ends with "the key index is read
// back from WEBHOOKS before serve takes webhooks"; but with nats.url there
// is no key index (README: "no key index keeps a cluster's keys"), and what
// the operator needs to hear there is the README's caveat instead: until
// the NATS server restarts, a repeat of a backed-up event is stored again
// (answered accepted, not duplicate).
func TestAudit42DataRestoreOntoNATSURLPromisesAKeyIndex(t *testing.T) {
	bk, _, _ := audit42DataBackupOfTwo(t)
	url := startNATSServer(t)
	cfg, _ := writeConfig(t, `http: { listen: "127.0.0.1:0" }
nats: { url: "`+url+`" }
providers:
  grants:
    signature: { scheme: standard-webhooks, secrets: ["`+grantsSecret+`"] }
# %q
`)
	out, errOut, code := cli(t, "restore", "--config", cfg, "--from", bk)
	if code != 0 {
		t.Fatalf("restore onto %s: exit %d\n%s%s", url, code, out, errOut)
	}
	if strings.Contains(out, "key index") {
		t.Fatalf("restore onto a NATS server (nats.url, where no key index runs) says:\n%s", grepString(out, "key index"))
	}
}

// TestAudit42DataUnusableLockFileSaysWhatToFix: when data_dir's lock file
// cannot be opened (here a directory in its place; for a serve running as
// another user than the data_dir's owner, "permission denied") serve
// refuses with "open lock P: open P: is a directory": the path twice, no
// key named and nothing said of what to do (the contract: a one-line
// message naming what to fix).
func TestAudit42DataUnusableLockFileSaysWhatToFix(t *testing.T) {
	cfg, dir := writeConfig(t, `http: { listen: "127.0.0.1:0" }
nats: { embedded: { data_dir: %q } }
providers:
  grants:
    signature: { scheme: standard-webhooks, secrets: ["`+grantsSecret+`"] }
`)
	lock := filepath.Join(dir, "data", "hookgate.lock")
	if err := os.MkdirAll(lock, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, binary, "serve", "--config", cfg).CombinedOutput()
	last := strings.TrimSpace(string(out))
	if i := strings.LastIndex(last, "\n"); i >= 0 {
		last = last[i+1:]
	}
	if strings.Count(last, lock) > 1 || !strings.Contains(last, "nats.embedded.data_dir") {
		t.Fatalf("serve with %s unusable says %q; want one mention of the path, naming nats.embedded.data_dir and what to fix", lock, last)
	}
}

// TestAudit42DataStatusOnANewDataDirBlocksTheRestore: an operator makes a
// new, empty data_dir for a restore and first runs `hookgate status` on
// it (to check the config reaches it; "a data_dir that does not exist is an
// error ... nothing is created"). status, a read-only command, leaves an
// empty store there (data_dir/jetstream, hookgate.lock), and `hookgate
// restore` then refuses the data_dir as "not empty" although it holds no
// stream and no event: the operator is told to find another directory for
// a mistake they did not make. Want: status leaves an empty data_dir as
// it found it, or restore takes a data_dir that holds no store.
func TestAudit42DataStatusOnANewDataDirBlocksTheRestore(t *testing.T) {
	cfg, dir := writeConfig(t, `http: { listen: "127.0.0.1:0" }
nats: { embedded: { data_dir: %q } }
providers:
  grants:
    signature: { scheme: standard-webhooks, secrets: ["`+grantsSecret+`"] }
`)
	hg := start(t, cfg)
	body := []byte(`{"grant_id":"G1"}`)
	if r := post(t, hg.baseURL+"/webhooks/grants", signGrants(t, "st-1", body), body); r.status != 200 {
		t.Fatalf("post: %d %s", r.status, r.body)
	}
	hg.stop(t)
	bk := filepath.Join(dir, "bk")
	if out, errOut, code := cli(t, "backup", "--config", cfg, "--out", bk); code != 0 {
		t.Fatalf("backup: exit %d\n%s%s", code, out, errOut)
	}

	cfg2, dir2 := writeConfig(t, `http: { listen: "127.0.0.1:0" }
nats: { embedded: { data_dir: %q } }
providers:
  grants:
    signature: { scheme: standard-webhooks, secrets: ["`+grantsSecret+`"] }
`)
	data2 := filepath.Join(dir2, "data")
	if err := os.Mkdir(data2, 0o700); err != nil {
		t.Fatal(err)
	}
	stOut, stErr, code := cli(t, "status", "--config", cfg2)
	entries, _ := os.ReadDir(data2)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if out, errOut, code2 := cli(t, "restore", "--config", cfg2, "--from", bk); code2 != 0 {
		t.Fatalf("restore onto a new data_dir that only `hookgate status` looked at (status exit %d, left %v in it): exit %d, want 0\n%s%s\nstatus said:\n%s%s",
			code, names, code2, out, errOut, stOut, stErr)
	}
	// The restored store serves: the backed-up event is a duplicate.
	hg2 := start(t, cfg2)
	if r := post(t, hg2.baseURL+"/webhooks/grants", signGrants(t, "st-1", body), body); r.status != 200 || !strings.Contains(string(r.body), `"duplicate"`) {
		t.Fatalf("after the restore, the backed-up event sent again: %d %s, want 200 duplicate", r.status, r.body)
	}
}
