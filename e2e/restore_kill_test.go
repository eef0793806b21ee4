package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// A `hookgate restore` killed (kill -9) while it restores WEBHOOKS leaves
// data_dir marked unfinished: serve and the operator commands refuse it,
// saying what to do, where before serve ran on the partial streams with
// PROBLEMS none and the backup's events missing (an operator tools audit,
// stop 40). Emptied, the data_dir takes the restore again.
func TestRestoreKilledDuringWebhooksIsRefused(t *testing.T) {
	port := freePort(t)
	cfg, _ := writeConfig(t, `http: { listen: "127.0.0.1:0" }
nats: { embedded: { data_dir: %q, listen: "127.0.0.1:`+fmt.Sprint(port)+`", token: tok } }
roles: { consumer: false }
providers:
  grants:
    signature: { scheme: standard-webhooks, secrets: ["`+grantsSecret+`"] }
`)
	hg := start(t, cfg)
	// WEBHOOKS large enough that its restore takes a while (30 MB), so the
	// kill lands inside it; written straight to the stream.
	j := natsClient(t, fmt.Sprintf("nats://127.0.0.1:%d", port), "tok")
	body := []byte(`{"pad":"` + strings.Repeat("x", 1000) + `"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 30000
	publishAll(t, j, n, 2*time.Minute, func(i int) (string, []byte, string) {
		return "webhooks.grants.default", body, fmt.Sprintf("grants:default:evt:r%d", i)
	})
	hg.stop(t)
	bk := filepath.Join(t.TempDir(), "bk")
	if out, errOut, code := cli(t, "backup", "--config", cfg, "--out", bk); code != 0 {
		t.Fatalf("backup: exit %d\n%s%s", code, out, errOut)
	}

	cfg2, dir2 := writeConfig(t, `http: { listen: "127.0.0.1:0" }
nats: { embedded: { data_dir: %q } }
providers:
  grants:
    signature: { scheme: standard-webhooks, secrets: ["`+grantsSecret+`"] }
`)
	// Ctrl-C during WEBHOOKS' restore: said at once (a second Ctrl-C
	// during the seconds of cleaning up left the partial store before),
	// and data_dir is emptied.
	all, errOut, code := restoreUntilGrants(t, ctx, cfg2, bk, syscall.SIGINT)
	if code != 1 || !strings.Contains(errOut, "hookgate: restore: interrupted: removing what was restored, so it can run again") || !strings.Contains(errOut, "is empty again, so restore can run again") {
		t.Errorf("restore interrupted during WEBHOOKS: exit %d, want 1, the cleanup said at once and done\n%s%s", code, all, errOut)
	}
	if entries, err := os.ReadDir(filepath.Join(dir2, "data")); err != nil || len(entries) != 0 {
		t.Fatalf("data_dir after the interrupted restore: %v %v, want it empty", entries, err)
	}
	// kill -9 during WEBHOOKS' restore: nothing cleans up.
	restoreUntilGrants(t, ctx, cfg2, bk, syscall.SIGKILL)

	// serve refuses the data_dir, saying what happened and what to do.
	sctx, scancel := context.WithTimeout(context.Background(), time.Minute)
	defer scancel()
	serve := exec.CommandContext(sctx, binary, "serve", "--config", cfg2)
	out, err := serve.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "holds a restore that did not finish") || !strings.Contains(string(out), "empty it and run hookgate restore again") {
		t.Fatalf("serve on a data_dir whose restore was killed: %v, want exit 1 saying the restore did not finish\n%s", err, out)
	}
	if _, errOut, code := cli(t, "status", "--config", cfg2); code != 1 || !strings.Contains(errOut, "holds a restore that did not finish") {
		t.Errorf("status on it: exit %d, want 1 saying so\n%s", code, errOut)
	}
	// Emptied, it takes the restore again, whole.
	data2 := filepath.Join(dir2, "data")
	entries, err := os.ReadDir(data2)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(data2, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	// (cfg2 sets no token: the restore says data_dir has a new one.)
	if out, errOut, code := cli(t, "restore", "--config", cfg2, "--from", bk); code != 0 || !strings.Contains(out, fmt.Sprintf("restored WEBHOOKS\t%d messages", n)) ||
		!strings.Contains(out, "data_dir has a new nats.token (the backup holds no token)") {
		t.Fatalf("restore after emptying: exit %d\n%s%s", code, out, errOut)
	}

	// The same kill onto a NATS server of its own (nats.url): no data_dir
	// to mark, so the restored streams carry the mark, and serve and
	// status refuse them where before serve made the missing WEBHOOKS
	// and AUDIT empty and ran (found at stop 40, built at stop 41).
	url := startNATSServer(t)
	cfg3, _ := writeConfig(t, `http: { listen: "127.0.0.1:0" }
nats: { url: "`+url+`" }
providers:
  grants:
    signature: { scheme: standard-webhooks, secrets: ["`+grantsSecret+`"] }
# %q
`)
	restoreUntilGrants(t, ctx, cfg3, bk, syscall.SIGKILL)
	serve = exec.CommandContext(sctx, binary, "serve", "--config", cfg3)
	out, err = serve.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "the NATS server holds a restore that did not finish") ||
		!strings.Contains(string(out), "streams with its mark: ") || !strings.Contains(string(out), "delete hookgate's streams there (whichever of DLQ, KV_WATERMARKS, KV_APPLIED, GRANTS, WEBHOOKS, AUDIT exist) and run hookgate restore again") {
		t.Fatalf("serve on a NATS server whose restore was killed: %v, want exit 1 saying the restore did not finish\n%s", err, out)
	}
	if _, errOut, code := cli(t, "status", "--config", cfg3); code != 1 || !strings.Contains(errOut, "holds a restore that did not finish") {
		t.Errorf("status on it: exit %d, want 1 saying so\n%s", code, errOut)
	}
	if _, errOut, code := cli(t, "restore", "--config", cfg3, "--from", bk); code != 1 || !strings.Contains(errOut, "delete hookgate's streams there (whichever of") {
		t.Errorf("restore onto it again: exit %d, want 1 saying to delete the streams first\n%s", code, errOut)
	}
	jx := natsClient(t, url, "")
	for _, name := range []string{"DLQ", "KV_WATERMARKS", "KV_APPLIED", "GRANTS", "WEBHOOKS", "AUDIT"} {
		if err := jx.DeleteStream(ctx, name); err != nil && !errors.Is(err, js.ErrStreamNotFound) {
			t.Fatalf("delete %s: %v", name, err)
		}
	}
	if out, errOut, code := cli(t, "restore", "--config", cfg3, "--from", bk); code != 0 || !strings.Contains(out, fmt.Sprintf("restored WEBHOOKS\t%d messages", n)) {
		t.Fatalf("restore onto the NATS server after deleting the streams: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := cli(t, "status", "--config", cfg3); code != 0 {
		t.Errorf("status after the restore that finished: exit %d\n%s%s", code, out, errOut)
	}
}

// startNATSServer runs a nats-server process with JetStream on a loopback
// port of its own, its store in a temporary directory (room reserved for
// hookgate's default retention), killed at cleanup; it returns its URL.
func startNATSServer(t *testing.T) string {
	t.Helper()
	port := nodePort(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "nats.conf")
	text := fmt.Sprintf("listen: \"127.0.0.1:%d\"\nmax_payload: 8MB\njetstream { store_dir: %q, max_file_store: 1TB }\n", port, filepath.Join(dir, "store"))
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(natsServerBinary(t), "-c", conf)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		nc, err := nats.Connect(url)
		if err == nil {
			nc.Close()
			return url
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server on %s did not answer within 30 s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// restoreUntilGrants runs restore of bk with cfg and sends it sig once it
// says GRANTS is restored (WEBHOOKS' restore under way), checking that
// it had not restored WEBHOOKS yet; it returns the stdout, stderr and
// exit code.
func restoreUntilGrants(t *testing.T, ctx context.Context, cfg, bk string, sig syscall.Signal) (string, string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, binary, "restore", "--config", cfg, "--from", bk)
	var errb syncBuffer
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.HasPrefix(sc.Text(), "restored GRANTS") {
			_ = cmd.Process.Signal(sig)
			break
		}
	}
	rest, _ := io.ReadAll(stdout)
	_ = cmd.Wait()
	all := strings.Join(lines, "\n") + "\n" + string(rest)
	if !strings.Contains(all, "restored GRANTS") || strings.Contains(all, "restored WEBHOOKS") {
		t.Fatalf("the %v did not land during WEBHOOKS' restore (the test proves nothing); restore printed:\n%s%s", sig, all, errb.String())
	}
	return all, errb.String(), cmd.ProcessState.ExitCode()
}
