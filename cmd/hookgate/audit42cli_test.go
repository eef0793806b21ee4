package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/gateway"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/nats-io/nats-server/v2/server"
)

// Each test below was written, failing, against the code before its fix, and
// its comment tells the defect as the audit found it: all are fixed since
// (stop 42), and the tests hold the fixes.

// Audit 42 (CLI and config). When nothing answers on nats.embedded.listen,
// an operator command (status, replay, dlq, trace) opens data_dir itself.
// Its in-process server then binds nats.embedded.listen too, for the few
// milliseconds the command runs: a second command started meanwhile (a
// monitoring status, two operators) connects there instead of meeting the
// data_dir lock, reads through a server that goes away under it, and fails
// with "stream WEBHOOKS: jetstream unavailable: not connected to NATS
// (reconnecting)" instead of the contract's "the second one says which
// process holds it" (1 of 8 concurrent `status` runs on a stopped
// data_dir, by hand); a downstream service reconnecting to that address
// is served by, and dropped with, the command.
func TestAudit42CLIDataDirOpenedByACommandServesNoListen(t *testing.T) {
	dataDir := t.TempDir() + "/data"
	natsListen := freeAddr(t)
	cfgPath := review7Config(t, dataDir, natsListen, "", "")
	s := review7Start(t, cfgPath, true)
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}

	cfg, err := loadConfig(cfgPath, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// What `hookgate status` does with no serve running: nothing answers
	// on the listen address, so it opens data_dir itself.
	sys, err := openForCLI(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), readOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()

	conn, err := net.DialTimeout("tcp", natsListen, 2*time.Second)
	if err == nil {
		conn.Close()
		t.Errorf("while an operator command holds data_dir (no serve runs), nats.embedded.listen %s accepts connections: another command or a downstream service reaches the command's short-lived server instead of the data_dir lock's message, and loses it when the command ends", natsListen)
	}
}

// Audit 42: `status` lists a stream that refuses writes as a problem only
// from 90% of its max_bytes, and says "full now" only inside that. With
// events large beside max_bytes (by hand: 1 kB events and 8 kB, full at 85%; here 1.8 kB, full at about 80%; a
// 10 MB limit with 1 MB bodies alike) WEBHOOKS is full below 90%: every
// webhook is answered "503 event store full", /readyz stays 200 (as
// documented), and `status` reads "PROBLEMS none". streamFull (less
// room than two average messages) is what the answer hinges on, and it is
// never asked below 90%.
func TestAudit42CLIStatusSaysFullStreamBelowNinetyPercent(t *testing.T) {
	dataDir := t.TempDir() + "/data"
	natsListen := freeAddr(t)
	cfgPath := filepath.Join(t.TempDir(), "hookgate.yaml")
	reviewAHWrite(t, cfgPath, fmt.Sprintf("http: { listen: \"127.0.0.1:0\", max_body_bytes: 1000 }\n"+
		"retention: { webhooks: { max_bytes: 1800 } }\n"+
		"nats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n%s", dataDir, natsListen, review6Provider))
	s := review7Start(t, cfgPath, true)

	client := &http.Client{Timeout: 20 * time.Second}
	pad := strings.Repeat("a", 900)
	full := false
	for i := 0; i < 40 && !full; i++ {
		body := fmt.Sprintf(`{"id":"f%d","grant_id":"g-%d","at":"2026-12-01T10:00:00Z","pad":%q}`, i, i, pad)
		sch, err := gateway.NewScheme("hmac-sha256", gateway.SchemeOptions{Header: "X-Sig"})
		if err != nil {
			t.Fatal(err)
		}
		h, err := sch.Sign([]byte(body), config.Secret(review6Secret), "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, s.base+"/webhooks/p", strings.NewReader(body))
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == 503 && strings.Contains(string(b), "full"):
			full = true
		case resp.StatusCode != 200:
			t.Fatalf("event %d: %d %s", i, resp.StatusCode, b)
		}
	}
	if !full {
		t.Fatal("WEBHOOKS never answered 503 full")
	}

	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"status", "--config", cfgPath, "--json"}, func(string) string { return "" }, nil, &out, &errb); err != nil {
		t.Fatalf("status: %v %s", err, errb.String())
	}
	var st struct {
		Problems []string `json:"problems"`
		Streams  []struct {
			Name    string  `json:"name"`
			DiskUse float64 `json:"disk_use_percent"`
		} `json:"streams"`
	}
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Problems {
		if strings.Contains(p, "stream WEBHOOKS") {
			return
		}
	}
	use := -1.0
	for _, x := range st.Streams {
		if x.Name == "WEBHOOKS" {
			use = x.DiskUse
		}
	}
	t.Errorf("WEBHOOKS answers every webhook 503 \"event store full\" (disk use %.1f%% of max_bytes), and status's problems do not name the stream: %q", use, st.Problems)
}

// Audit 42: nats.replicas: 3 against a nats.url that is a single server
// (no cluster) passes config check (it cannot know), and serve then ends
// with "create stream WEBHOOKS: jetstream unavailable: nats: API error:
// code=500 err_code=10074 description=replicas > 1 not supported in
// non-clustered mode": it names neither the key to fix (nats.replicas) nor
// the cause in hookgate's terms, and calls a JetStream that answered
// "unavailable". Contract: exit 1 "with a one-line message naming what to
// fix"; the README's start-up refusals name their key (a busy port names
// http.listen).
func TestAudit42CLIServeReplicasOnASingleServerNamesTheKey(t *testing.T) {
	natsAddr := freeAddr(t)
	e, err := jetstream.StartEmbedded(jetstream.EmbeddedOptions{DataDir: t.TempDir(), Listen: natsAddr, Token: "tok", MaxPayload: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	cfgPath := filepath.Join(t.TempDir(), "hookgate.yaml")
	reviewAHWrite(t, cfgPath, fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nnats: { url: \"nats://tok@%s\", replicas: 3 }\n%s", natsAddr, review6Provider))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errb lockedBuf
	err = run(ctx, []string{"serve", "--config", cfgPath}, func(string) string { return "" }, nil, &out, &errb)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("serve with nats.replicas 3 on a single server: %v (want a refusal)\n%s", err, tail(errb.String(), 2000))
	}
	if !strings.Contains(err.Error(), "nats.replicas") {
		t.Errorf("serve's refusal does not name nats.replicas: %v", err)
	}
}

// Audit 42: serve pointed at a NATS server without JetStream waits 30 s
// with nothing in its log (no "trying again" line, /readyz "starting: the
// event store is being opened"), then ends with "look up stream WEBHOOKS:
// jetstream unavailable: nats: no responders available for request": the
// cause (JetStream is not enabled on the server at nats.url) is never
// said. The README lists "a server without JetStream" among what ends
// serve "with the reason"; nats.go itself calls this
// ErrJetStreamNotEnabled.
func TestAudit42CLIServeSaysJetStreamIsNotEnabled(t *testing.T) {
	s := reviewTServe(t, fmt.Sprintf("url: %q", review10aNoJetStream(t)))
	err := reviewTExpectEnds(t, s, 60*time.Second)
	msg := strings.ToLower(err.Error())
	if !strings.Contains(msg, "not enabled") && !strings.Contains(msg, "without jetstream") && !strings.Contains(msg, "enable jetstream") {
		t.Errorf("serve against a NATS server without JetStream ended with %q: it does not say JetStream is not enabled there", err)
	}
}

// Audit 42: `hookgate config check FILE --help` is a usage error (exit 2,
// "unexpected argument \"--help\" after the config file"), while every
// other command takes -h/--help after its positional argument
// (`hookgate trace KEY --help`, `hookgate dlq show 5 --help`: usage, exit
// 0) and the README says "-h or --help after any of them". Review 9 made
// flags after FILE an error so that "FILE --json" is not silently
// ignored; help is not such a flag.
func TestAudit42CLIConfigCheckFileThenHelp(t *testing.T) {
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"config", "check", "hookgate.yaml", "--help"}, func(string) string { return "" }, strings.NewReader(""), &out, &errb)
	var shown bytes.Buffer
	if code := exitCode(err, &shown); code != 0 || !strings.Contains(out.String(), "Usage:\n  hookgate config check FILE") {
		t.Errorf("config check FILE --help: exit %d, stdout %q, stderr %q; want the usage, exit 0 (as trace KEY --help)", code, out.String(), shown.String()+errb.String())
	}
}

// Audit 42: on an external NATS whose max_payload is 64 KiB or less, serve
// refuses with "nats max_payload is 65536 bytes; http.max_body_bytes 1000
// plus 65536 for headers needs 66536: raise max_payload on the NATS
// servers or lower http.max_body_bytes". Lowering max_body_bytes cannot
// help (even 1 byte needs 65537): the one fix is max_payload, and the
// operator who follows the advice lowers the limit, restarts, and is
// refused again.
func TestAudit42CLIServeMaxPayloadAdviceThatCannotWork(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true,
		JetStream: true, StoreDir: t.TempDir(), MaxPayload: 64 << 10, Authorization: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	url := strings.Replace(srv.ClientURL(), "nats://", "nats://tok@", 1)
	cfgPath := filepath.Join(t.TempDir(), "hookgate.yaml")
	reviewAHWrite(t, cfgPath, fmt.Sprintf("http: { listen: \"127.0.0.1:0\", max_body_bytes: 1000 }\nretention: { webhooks: { max_bytes: 1MB }, grants: { max_bytes: 1MB }, dlq: { max_bytes: 1MB } }\nnats: { url: %q }\n%s", url, review6Provider))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errb lockedBuf
	err = run(ctx, []string{"serve", "--config", cfgPath}, func(string) string { return "" }, nil, &out, &errb)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("serve on a 64 KiB max_payload: %v, want a refusal\n%s", err, tail(errb.String(), 2000))
	}
	if strings.Contains(err.Error(), "lower http.max_body_bytes") {
		t.Errorf("serve's refusal advises lowering http.max_body_bytes, which cannot satisfy it (64 KiB of header room alone fills max_payload): %v", err)
	}
}

// Audit 42: a CLI command that cannot read data_dir/nats.token (by hand:
// `hookgate status` run as an operator's own user against the systemd
// unit's /var/lib/hookgate/data, whose token file is 0600 for the
// service's user) goes on without a token and reports "nats at
// 127.0.0.1:23422 refused the token: check nats.embedded.token or
// /tmp/a3/data/nats.token": the file holds the right token, no token was
// sent, and the read error (permission denied) is dropped. Here, as root
// can read any file, the token file is made unreadable by putting a
// directory in its place once serve has read it.
func TestAudit42CLIUnreadableTokenFileIsNamedAsSuch(t *testing.T) {
	dataDir := t.TempDir() + "/data"
	natsListen := freeAddr(t)
	cfgPath := filepath.Join(t.TempDir(), "hookgate.yaml")
	reviewAHWrite(t, cfgPath, fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nroles: { consumer: false }\nnats: { embedded: { data_dir: %q, listen: %q } }\n%s", dataDir, natsListen, review6Provider))
	review7Start(t, cfgPath, true)

	tokenFile := filepath.Join(dataDir, jetstream.TokenFile)
	if err := os.Rename(tokenFile, tokenFile+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(tokenFile, 0o700); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"status", "--config", cfgPath}, func(string) string { return "" }, nil, &out, &errb)
	if err == nil {
		t.Fatalf("status without a readable token: no error\n%s", out.String())
	}
	if msg := err.Error(); strings.Contains(msg, "refused the token") && !strings.Contains(msg, "is a directory") && !strings.Contains(msg, "cannot read") && !strings.Contains(msg, "could not read") {
		t.Errorf("status could not read %s, sent no token, and says: %v", tokenFile, err)
	}
}

// Audit 42: `hookgate sign --timestamp -5` exits 1 with "hookgate:
// standard-webhooks sign: timestamp must be from 1970 on and at most 18
// digits of Unix seconds", naming neither the flag nor a usage error,
// while `--timestamp abc` (also a bad value of the same flag) is a usage
// error, exit 2: "sign: --timestamp \"abc\": want Unix seconds".
func TestAudit42CLISignNegativeTimestampIsAUsageError(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "hookgate.yaml")
	reviewAHWrite(t, cfgPath, "providers:\n  sw:\n    signature: { scheme: standard-webhooks, secrets: [\"whsec_aG9va2dhdGUtZGV2LWdyYW50c2dvdi1zZWNyZXQ=\"] }\n")
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"sign", "--config", cfgPath, "--provider", "sw", "--timestamp", "-5"}, func(string) string { return "" }, strings.NewReader(`{"id":"a"}`), &out, &errb)
	var shown bytes.Buffer
	code := exitCode(err, &shown)
	if code != 2 || !strings.Contains(shown.String()+errb.String(), "--timestamp") {
		t.Errorf("sign --timestamp -5: exit %d, %q; want exit 2 naming --timestamp, as for --timestamp abc", code, strings.TrimSpace(shown.String()+errb.String()))
	}
}
