package e2e

import (
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
// the log said only "nats: timeout" (review L). After a restart with room
// again, every event answered 200 is stored exactly once and hookgate is
// ready.
func TestStoreWriteErrorIsReportedAndNothingAcceptedIsLost(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash (for ulimit) not found")
	}
	e := newEnv(t, "")
	// 1 MiB per file: WEBHOOKS's first block outgrows it after some
	// hundreds of 1 KB events.
	cmd := exec.Command("bash", "-c", `ulimit -f 1024 && exec "$0" serve --config "$1"`, binary, e.cfgPath)
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
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "stopped writing") || !strings.Contains(body, "restart hookgate") {
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
		!regexp.MustCompile(`(?m)^\S+ not ready: the event store stopped writing .*restart hookgate`).MatchString(r.stdout) {
		t.Fatalf("status with a store that stopped writing: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	hg.stop(t)

	hg = start(t, e.cfgPath) // room again
	waitFor(t, "/readyz 200 after the restart", 30*time.Second, func() bool { return readyz(hg.baseURL) == http.StatusOK })
	seen := map[string]int{}
	for _, k := range storedKeys(t, natsClient(t, e.natsURL, natsToken)) {
		seen[k]++
	}
	for k := range acked {
		if seen[k] != 1 {
			t.Errorf("%s answered 200, stored %d times", k, seen[k])
		}
	}
	t.Logf("%d events answered 200 before the store stopped writing, each stored once", len(acked))
}

func readAll(resp *http.Response) string {
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
