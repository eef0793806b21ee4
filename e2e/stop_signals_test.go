package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A stop while serve waits for NATS (nats.url not answering yet) is a
// clean one whether it comes as SIGTERM or SIGHUP: exit 0, an info line
// saying so and no ERROR line (it logged "serve failed" at error, which an
// alert on errors fired on at an ordinary deploy), and SIGHUP no longer
// ends the process at once (its default action: no log line at all, and
// the store's recovery after an unclean stop). A docs audit, stop 38.
func TestStopWhileStartingIsClean(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			nowhere := ln.Addr().String()
			ln.Close()
			cfg := filepath.Join(t.TempDir(), "hookgate.yaml")
			yaml := `http: { listen: "127.0.0.1:0" }
nats: { url: "nats://` + nowhere + `" }
providers:
  grants:
    signature: { scheme: standard-webhooks, secrets: ["whsec_aG9va2dhdGUtZGV2LWdyYW50c2dvdi1zZWNyZXQ="] }
`
			if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			in, _ := spawnServe(t, cfg)
			for end := time.Now().Add(30 * time.Second); !strings.Contains(in.stderr.String(), "event store not answering; trying again"); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(end) {
					t.Fatalf("serve never said it waits for NATS:\n%s", in.stderr)
				}
			}
			_ = in.cmd.Process.Signal(sig)
			select {
			case <-in.done:
			case <-time.After(20 * time.Second):
				t.Fatalf("serve did not stop within 20 s of %s:\n%s", sig, in.stderr)
			}
			logs := in.stderr.String()
			if code := in.cmd.ProcessState.ExitCode(); code != 0 {
				t.Fatalf("exit %d after %s, want 0:\n%s", code, sig, logs)
			}
			if strings.Contains(logs, `"level":"ERROR"`) || !strings.Contains(logs, "hookgate stopped while starting") {
				t.Fatalf("after %s: want the info line of a stop while starting and no ERROR line:\n%s", sig, logs)
			}
		})
	}
}

// A serve started with SIGHUP ignored (nohup) keeps ignoring it: asking
// for SIGHUP undoes the ignore, and such a serve stopped when its login
// session ended (a review, stop 38).
func TestNohupServeIgnoresSIGHUP(t *testing.T) {
	nohup, err := exec.LookPath("nohup")
	if err != nil {
		t.Skip("no nohup here")
	}
	e := newEnv(t, "")
	in, addr := spawnCmd(t, exec.Command(nohup, binary, "serve", "--config", e.cfgPath))
	in.awaitListening(t, addr)
	// The kernel's word that the running serve ignores SIGHUP (so the
	// signal below cannot stop it, however late it would act on it): bit
	// 0 of SigIgn in /proc/PID/status.
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", in.cmd.Process.Pid))
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	var ign uint64
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			ign, _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	if ign&1 == 0 {
		t.Fatalf("serve under nohup does not ignore SIGHUP (SigIgn %016x): a hangup would stop it", ign)
	}
	_ = in.cmd.Process.Signal(syscall.SIGHUP)
	for range 3 {
		resp, err := client.Get(in.baseURL + "/healthz")
		if err != nil {
			t.Fatalf("after SIGHUP under nohup: %v\n%s", err, in.stderr)
		}
		resp.Body.Close()
	}
	select {
	case <-in.done:
		t.Fatalf("serve under nohup stopped on SIGHUP:\n%s", in.stderr)
	default:
	}
	in.stop(t) // SIGTERM still stops it cleanly
}
