package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// When the embedded server's file store cannot write (a full disk; here a
// file size limit on the process, which fails the write the same way,
// EFBIG instead of ENOSPC), nats-server keeps refusing writes until the
// store is opened again. hookgate must say so: /readyz 503 naming it,
// hookgate_store_write_failed 1, a log line saying what to do, and every
// webhook 503 with Retry-After, never 200. Before, /readyz stayed 200 and
// the log said only "nats: timeout" (review L). Once the limit is raised
// (room again), serve starts again in place by itself (it used to need a
// restart by hand): ready, taking webhooks, and every event answered 200
// is stored exactly once.
func TestStoreWriteErrorIsReportedAndNothingAcceptedIsLost(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "prlimit"} { // ulimit; lifting the limit
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found", tool)
		}
	}
	e := newEnv(t, "")
	// 1 MiB per file (the soft limit, so that prlimit may lift it):
	// WEBHOOKS's first block outgrows it after some
	// hundreds of 1 KB events.
	cmd := exec.Command("bash", "-c", `ulimit -S -f 1024 && exec "$0" serve --config "$1"`, binary, e.cfgPath)
	cmd.Env = os.Environ()
	hg, addr := spawnCmd(t, cmd)
	select {
	case hg.baseURL = <-addr:
	case <-hg.done:
		t.Fatalf("hookgate exited before listening:\n%s", hg.stderr)
	case <-time.After(60 * time.Second):
		t.Fatalf("hookgate not listening after 60s:\n%s", hg.stderr)
	}
	quick := &http.Client{Timeout: 20 * time.Second}
	pad := strings.Repeat("x", 1000)
	acked := map[string]bool{}
	refused := 0
	for i := 0; i < 5000 && refused < 3; i++ {
		body := []byte(fmt.Sprintf(`{"grant_id":"G-%d","type":"t","occurred_at":"2026-11-30T10:00:00Z","pad":%q}`, i, pad))
		code, key := postOnce(quick, hg.baseURL+"/webhooks/grants", signGrants(t, fmt.Sprint("full_", i), body), body)
		switch code {
		case http.StatusOK:
			if refused > 0 {
				t.Fatalf("event %d answered 200 after the store refused writes", i)
			}
			acked[key] = true
		case http.StatusServiceUnavailable:
			refused++
		default:
			t.Fatalf("event %d: %d", i, code)
		}
	}
	if refused == 0 || len(acked) == 0 {
		t.Fatalf("%d events answered 200, %d 503: the write limit was never reached", len(acked), refused)
	}
	resp, err := client.Get(hg.baseURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(resp)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "stopped writing") || !strings.Contains(body, "starts again by itself") {
		t.Fatalf("/readyz with a store that stopped writing: %d %s", resp.StatusCode, body)
	}
	resp, err = client.Get(hg.baseURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if m := readAll(resp); !strings.Contains(m, "\nhookgate_store_write_failed 1\n") {
		t.Fatalf("/metrics lacks hookgate_store_write_failed 1")
	}
	if logs := hg.stderr.String(); !strings.Contains(logs, "event store stopped writing") || !strings.Contains(logs, "Critical write error") {
		t.Fatalf("no log line names the write error:\n%s", tailString(logs, 3000))
	}
	// The streams read fine from outside; only serve knows its store
	// stopped writing, and `hookgate status` must show it.
	r := runHG(t, "status", "--config", e.cfgPath)
	if r.code != 0 || !regexp.MustCompile(`(?m)^\S+\s+gateway,consumer\s+no\s`).MatchString(r.stdout) ||
		!regexp.MustCompile(`(?m)^\S+ not ready: the event store stopped writing .*starts again by itself`).MatchString(r.stdout) {
		t.Fatalf("status with a store that stopped writing: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Still refusing while there is no room: the probe write fails too.
	still := []byte(`{"grant_id":"G-x","type":"t","occurred_at":"2026-11-30T10:00:00Z"}`)
	req, err := http.NewRequest(http.MethodPost, hg.baseURL+"/webhooks/grants", bytes.NewReader(still))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = signGrants(t, "full_still", still)
	req.Header.Set("Content-Type", "application/json")
	resp, err = quick.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The contract's 503 comes with Retry-After (review AG: never checked).
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a webhook while the store still cannot write: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	// Room again: lift the process's file size limit. serve starts again
	// in place (the same process) and says so.
	if out, err := exec.Command("prlimit", "--pid", fmt.Sprint(hg.cmd.Process.Pid), "--fsize=unlimited:").CombinedOutput(); err != nil {
		t.Fatalf("prlimit (util-linux) to lift the limit: %v %s", err, out)
	}
	select {
	case hg.baseURL = <-addr:
	case <-hg.done:
		t.Fatalf("hookgate exited instead of starting again:\n%s", tailString(hg.stderr.String(), 3000))
	case <-time.After(60 * time.Second):
		t.Fatalf("hookgate did not start again within 60s of the room:\n%s", tailString(hg.stderr.String(), 3000))
	}
	if logs := hg.stderr.String(); !strings.Contains(logs, "data_dir has room again") || !strings.Contains(logs, "hookgate stopped, to start again") {
		t.Fatalf("no log line says serve starts again:\n%s", tailString(logs, 3000))
	}
	waitFor(t, "/readyz 200 after starting again", 30*time.Second, func() bool { return readyz(hg.baseURL) == http.StatusOK })
	for i := range 20 {
		body := []byte(fmt.Sprintf(`{"grant_id":"G-after-%d","type":"t","occurred_at":"2026-11-30T10:00:00Z","pad":%q}`, i, pad))
		code, key := postOnce(quick, hg.baseURL+"/webhooks/grants", signGrants(t, fmt.Sprint("after_", i), body), body)
		if code != http.StatusOK {
			t.Fatalf("event %d after starting again: %d", i, code)
		}
		acked[key] = true
	}
	hg.stop(t)

	hg = start(t, e.cfgPath)
	waitFor(t, "/readyz 200 after a restart", 30*time.Second, func() bool { return readyz(hg.baseURL) == http.StatusOK })
	seen := map[string]int{}
	for _, k := range storedKeys(t, natsClient(t, e.natsURL, natsToken)) {
		seen[k]++
	}
	for k := range acked {
		if seen[k] != 1 {
			t.Errorf("%s answered 200, stored %d times", k, seen[k])
		}
	}
	t.Logf("%d events answered 200 (20 after serve started again in place), each stored once", len(acked))
}

func readAll(resp *http.Response) string {
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
