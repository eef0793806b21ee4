package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/testpki"
)

// TestExternalNATSWithMutualTLS runs serve against a nats-server with TLS
// from a private CA that verifies clients: with nats.tls's files serve
// stores and applies, and the CLI reaches the same server; without the
// client certificate serve stops at once with a line naming nats.tls
// (it used to wait for ever, taking the refusal for a server not
// answering yet).
func TestExternalNATSWithMutualTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pki := testpki.Write(t, dir, "")
	url := startTLSNode(t, pki)

	full := fmt.Sprintf("{ ca: %q, cert: %q, key: %q }", pki.CA, pki.ClientCert, pki.ClientKey)
	cfg := writeClusterConfig(t, clusterConfig{natsURL: url, replicas: 1, natsTLS: full})
	hg := startServe(t, "hg", cfg)
	l := newLoad(t, "tls", []string{hg.baseURL})
	ev := l.newEvent("G-1")
	l.deliver(0, ev, false)
	if len(l.acked) != 1 || l.problems != nil {
		t.Fatalf("webhook over a TLS store: acked %d, problems %v, gave up %v", len(l.acked), l.problems, l.gaveUp)
	}
	waitFor(t, "the event applied, read by `hookgate trace` over TLS", 30*time.Second, func() bool {
		out, errOut, code := cliRun(t, "trace", ev.key, "--config", cfg, "--json")
		if code != 0 {
			t.Logf("trace: exit %d: %s", code, errOut)
			return false
		}
		var doc struct {
			Audit []struct{ Decision string } `json:"audit"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("trace --json: %v\n%s", err, out)
		}
		for _, a := range doc.Audit {
			if a.Decision == "applied" {
				return true
			}
		}
		return false
	})

	// Without the client certificate: serve stops, saying why.
	caOnly := writeClusterConfig(t, clusterConfig{natsURL: url, replicas: 1, natsTLS: fmt.Sprintf("{ ca: %q }", pki.CA)})
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "serve", "--config", caOnly)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("serve without the client certificate still running after 45 s (waiting for a server that refuses it):\n%s", tailString(string(out), 5))
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("serve without the client certificate: %v; want exit 1\n%s", err, out)
	}
	// The cause reads "certificate required", or under TLS 1.3 (the server
	// refuses the certificate after the handshake) "connection closed by
	// remote after TLS handshake".
	if !strings.Contains(string(out), "tls with the nats server failed (see nats.tls: ca, cert, key)") {
		t.Fatalf("serve's output does not name nats.tls:\n%s", out)
	}
	t.Logf("serve without the client certificate:\n%s", tailString(string(out), 2))
}

// startTLSNode runs one nats-server with JetStream and TLS (pki's server
// certificate, clients verified against pki's CA) and returns its URL.
func startTLSNode(t testing.TB, pki testpki.Files) string {
	t.Helper()
	dir := t.TempDir()
	n := &natsNode{name: "tls", clientPort: nodePort(t), httpPort: nodePort(t)}
	n.conf, n.logPath = filepath.Join(dir, "tls.conf"), filepath.Join(dir, "tls.log")
	conf := fmt.Sprintf(`server_name: tls
listen: "127.0.0.1:%d"
http: "127.0.0.1:%d"
jetstream { store_dir: %q, max_file_store: 1GB }
tls {
  cert_file: %q
  key_file: %q
  ca_file: %q
  verify: true
  timeout: 2
}
`, n.clientPort, n.httpPort, filepath.Join(dir, "store"), pki.ServerCert, pki.ServerKey, pki.CA)
	if err := os.WriteFile(n.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &natsCluster{t: t, bin: natsServerBinary(t), nodes: []*natsNode{n}}
	c.spawn(n)
	t.Cleanup(func() {
		c.kill9(n)
		if t.Failed() {
			t.Logf("--- tail of the TLS node's log:\n%s", tailFile(n.logPath, 20))
		}
	})
	c.waitHealthy(30*time.Second, n)
	return fmt.Sprintf("tls://127.0.0.1:%d", n.clientPort)
}
