package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// audit42DataBlockingReceiver is a forward receiver that holds every
// request until the test ends (a slow receiver: the serve's pause for a
// backup waits for it), counting the requests it got.
func audit42DataBlockingReceiver(t *testing.T) (url string, got *atomic.Int64) {
	t.Helper()
	got = &atomic.Int64{}
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv.URL, got
}

// TestAudit42DataBackupWhoseServeDiesWaitsMinutes: the serve (and with it
// the embedded NATS server the backup reads through) is killed while the
// backup waits for its pause (an event under way to a slow receiver). The
// backup has lost its NATS server: it can do nothing more and should fail
// at once, saying the connection was lost. Instead it waits silently for
// the full pause-answer wait (2m10s), then blames the serve ("no answer (a
// hookgate from before backup, one too busy to answer, or NATS permissions
// ...)"), which sends the operator looking for the wrong cause.
func TestAudit42DataBackupWhoseServeDiesWaitsMinutes(t *testing.T) {
	recv, got := audit42DataBlockingReceiver(t)
	port := freePort(t)
	cfg, dir := writeConfig(t, `http: { listen: "127.0.0.1:0" }
nats: { embedded: { data_dir: %q, listen: "127.0.0.1:`+fmt.Sprint(port)+`", token: tok } }
providers:
  grants:
    signature: { scheme: standard-webhooks, secrets: ["`+grantsSecret+`"] }
    ordering: none
    effects:
      forward: { url: "`+recv+`", timeout: 5m }
`)
	hg := start(t, cfg)
	body := []byte(`{"grant_id":"G1"}`)
	if r := post(t, hg.baseURL+"/webhooks/grants", signGrants(t, "bk-die-1", body), body); r.status != 200 {
		t.Fatalf("post: %d %s", r.status, r.body)
	}
	waitFor(t, "the forward under way", 30*time.Second, func() bool { return got.Load() > 0 })

	// Watch for the backup's pause request, so the kill lands while the
	// backup waits for the serve's answer.
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", port), nats.Token("tok"))
	if err != nil {
		t.Fatal(err)
	}
	asked, err := nc.SubscribeSync("hookgate.consumer.pause")
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out := filepath.Join(dir, "bk")
	cmd := exec.CommandContext(ctx, binary, "backup", "--config", cfg, "--out", out)
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	if _, err := asked.NextMsg(30 * time.Second); err != nil {
		t.Fatalf("no pause request from the backup within 30 s: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	nc.Close()
	hg.kill()
	killed := time.Now()

	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("backup still running %s after the serve it was pausing, and the embedded NATS server it read through, were killed (no output so far: %q); want it to fail at once saying the connection to NATS was lost",
			time.Since(killed).Round(time.Second), stdout.String()+stderr.String())
	}
	msg := stderr.String()
	if cmd.ProcessState.ExitCode() != 1 || strings.Contains(msg, "a hookgate from before backup") || !strings.Contains(strings.ToLower(msg), "nats") {
		t.Fatalf("backup after its NATS server went away: exit %d, want 1 saying NATS was lost, not blaming the serve:\n%s", cmd.ProcessState.ExitCode(), msg)
	}
}

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
			code, names, code2, out, errOut, firstLines(stOut, 3), stErr)
	}
}

// firstLines is s's first n lines.
func firstLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "")
}

// TestAudit42DataLockFileRemovedLetsASecondServeIn: the data_dir lock
// ("a lock keeps two processes off one data_dir") is a lock on the file
// data_dir/hookgate.lock. Once that file is removed while serve runs (an
// operator clearing what looks like a stale lock file, a cleanup job), a
// second serve on the same data_dir creates a new file, locks it and
// starts: two embedded servers on one store, each with its own key index.
// The same event posted to each is accepted by both and applied twice.
// Want: the second serve refuses (the lock held on something a removal
// does not undo, such as data_dir itself, or the first serve noticing its
// lock file is gone).
func TestAudit42DataLockFileRemovedLetsASecondServeIn(t *testing.T) {
	tmpl := `http: { listen: "127.0.0.1:0" }
nats: { embedded: { data_dir: %q } }
providers:
  grants:
    signature: { scheme: standard-webhooks, secrets: ["` + grantsSecret + `"] }
    ordering: none
`
	cfg, dir := writeConfig(t, tmpl)
	data := filepath.Join(dir, "data")
	first := start(t, cfg)
	if err := os.Remove(filepath.Join(data, "hookgate.lock")); err != nil {
		t.Fatal(err)
	}
	cfg2 := filepath.Join(dir, "hookgate-copy.yaml")
	if err := os.WriteFile(cfg2, []byte(fmt.Sprintf(tmpl, data)), 0o600); err != nil {
		t.Fatal(err)
	}
	second, addr := spawnServe(t, cfg2)
	select {
	case <-second.done:
		if code := second.cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(second.stderr.String(), "in use") {
			t.Fatalf("second serve: exit %d, want 1 saying data_dir is in use:\n%s", code, second.stderr)
		}
		return // refused: the lock held
	case a := <-addr:
		second.baseURL = a
	case <-time.After(60 * time.Second):
		t.Fatalf("second serve neither refused nor listened within 60 s:\n%s", second.stderr)
	}
	body := []byte(`{"grant_id":"G1"}`)
	r1 := post(t, first.baseURL+"/webhooks/grants", signGrants(t, "twin-1", body), body)
	r2 := post(t, second.baseURL+"/webhooks/grants", signGrants(t, "twin-1", body), body)
	t.Fatalf("a second serve started on data_dir %s (its lock file removed while the first ran), and one event sent to each was answered %d %s and %d %s; want the second refused, data_dir in use",
		data, r1.status, strings.TrimSpace(r1.body), r2.status, strings.TrimSpace(r2.body))
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

// TestAudit42DataStopWhileTheEmbeddedStoreCannotStart: a SIGTERM while
// serve waits for an embedded server that cannot start (its store
// directory a file) is not acted on: serve goes on waiting out its 30 s
// and then exits 1 with "serve failed" at ERROR, where a stop while serve
// waits for NATS is a clean one (TestStopWhileStartingIsClean: exit 0, an
// info line, no ERROR line) and an operator's stop should take effect at
// once.
func TestAudit42DataStopWhileTheEmbeddedStoreCannotStart(t *testing.T) {
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
	in, _ := spawnServe(t, cfg)
	waitFor(t, "the embedded server's refusal in serve's log", 20*time.Second, func() bool { return strings.Contains(in.stderr.String(), "Can't start JetStream") })
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	sent := time.Now()
	select {
	case <-in.done:
	case <-time.After(45 * time.Second):
		t.Fatalf("serve still running 45 s after SIGTERM:\n%s", in.stderr)
	}
	took := time.Since(sent)
	if code := in.cmd.ProcessState.ExitCode(); code != 0 || took > 5*time.Second || strings.Contains(in.stderr.String(), `"level":"ERROR","msg":"serve failed"`) {
		t.Fatalf("SIGTERM while the embedded server could not start: exit %d %s after the signal, want exit 0 at once with no ERROR line:\n%s",
			code, took.Round(time.Second), grepString(in.stderr.String(), "ERROR"))
	}
}

// TestAudit42DataRestoredKeyWithANewerTimeAppliesTwiceOnNATSURL: after a
// restore onto a NATS server given by nats.url (before that server
// restarts, README: a repeat of a backed-up event "is stored again, and
// the consumer decides it already-applied"), an event of the backup sent
// again with its key (webhook-id) but a newer occurred_at is applied a
// second time: a second GRANTS message with the same key. The live
// consumer asks its applied-key memory only for events at or before the
// subject's mark; the contract: "Under every ordering the consumer
// remembers applied keys for dedup.horizon", "never applies an event twice".
func TestAudit42DataRestoredKeyWithANewerTimeAppliesTwiceOnNATSURL(t *testing.T) {
	bk, _, _ := audit42DataBackupOfTwo(t)
	url := startNATSServer(t)
	cfg, _ := writeConfig(t, `http: { listen: "127.0.0.1:0" }
nats: { url: "`+url+`" }
providers:
  grants:
    signature: { scheme: standard-webhooks, secrets: ["`+grantsSecret+`"] }
    subject: "json:/grant_id"
    occurred_at: "json:/occurred_at"
# %q
`)
	if out, errOut, code := cli(t, "restore", "--config", cfg, "--from", bk); code != 0 {
		t.Fatalf("restore: exit %d\n%s%s", code, out, errOut)
	}
	hg := start(t, cfg)
	j := natsClient(t, url, "")
	// two-1 was applied before the backup; its sender sends it again.
	again := []byte(`{"grant_id":"G1","occurred_at":"2026-01-01T00:00:03Z"}`)
	r := post(t, hg.baseURL+"/webhooks/grants", signGrants(t, "two-1", again), again)
	if r.status != 200 {
		t.Fatalf("repeat: %d %s", r.status, r.body)
	}
	// A marker event of another subject, applied after the repeat was
	// decided (ordering within a stream: the consumer reaches it later).
	marker := []byte(`{"grant_id":"G2","occurred_at":"2026-01-01T00:00:04Z"}`)
	if r := post(t, hg.baseURL+"/webhooks/grants", signGrants(t, "marker", marker), marker); r.status != 200 {
		t.Fatalf("marker: %d %s", r.status, r.body)
	}
	var keys []string
	waitFor(t, "the marker in GRANTS", 30*time.Second, func() bool {
		keys = audit42DataGrantKeys(t, j)
		return slices.Contains(keys, "grants:default:evt:marker")
	})
	n := 0
	for _, k := range keys {
		if k == "grants:default:evt:two-1" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("key grants:default:evt:two-1 (applied before the backup, sent again after a restore onto nats.url, answered %s) is in GRANTS %d times, want once; GRANTS: %v",
			strings.TrimSpace(r.body), n, keys)
	}
}

// audit42DataGrantKeys is the Nats-Msg-Id of every GRANTS message.
func audit42DataGrantKeys(t *testing.T, j js.JetStream) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := j.Stream(ctx, "GRANTS")
	if err != nil {
		return nil
	}
	info, err := s.Info(ctx)
	if err != nil || info.State.Msgs == 0 {
		return nil
	}
	var keys []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		if m, err := s.GetMsg(ctx, seq); err == nil {
			keys = append(keys, m.Header.Get("Nats-Msg-Id"))
		}
	}
	return keys
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
