package main

// Review AO: what operators see (/metrics, /readyz, `hookgate status`),
// against a real serve (embedded NATS, loopback HTTP).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/gateway"
	"github.com/nats-io/nats-server/v2/server"
)

const (
	aoSecret        = "whsec-AO-provider-secret-0123456789"
	aoForwardSecret = "whsec_QU9mb3J3YXJkc2VjcmV0OTg3NjU0MzIxMA=="
	aoToken         = "AO-nats-token-s3cr3t"
)

// aoEnv is the environment serve and the CLI read in these tests.
func aoEnv(k string) string {
	switch k {
	case "AO_SECRET":
		return aoSecret
	case "AO_FWD_SECRET":
		return aoForwardSecret
	case "AO_TOKEN":
		return aoToken
	}
	return ""
}

// aoConfig writes a config for an embedded serve with both roles, the
// provider p (hmac-sha256, X-Sig, secret from the environment), forwarding
// to fwd with a secret, debug logs, the embedded server on natsListen with
// a token from the environment.
func aoConfig(t *testing.T, dataDir, natsListen, fwd, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	logLine := "log: { level: debug }\n"
	if strings.Contains(extra, "log:") {
		logLine = ""
	}
	consumerLine := "consumer: { max_deliver: 2, backoff: [100ms] }\n"
	if strings.Contains(extra, "consumer:") {
		consumerLine = ""
	}
	httpLine := "http: { listen: \"127.0.0.1:0\" }\n"
	if strings.Contains(extra, "http:") {
		httpLine = ""
	}
	yaml := fmt.Sprintf(`%s%snats: { embedded: { data_dir: %q, listen: %q, token: "${AO_TOKEN}" } }
%s%sproviders:
  p:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["${AO_SECRET}"] }
    event_id: ["json:/id"]
    subject: "json:/grant_id"
    occurred_at: "json:/at"
    type: "json:/type"
    effects:
      forward: { url: %q, timeout: 2s, secret: "${AO_FWD_SECRET}" }
`, httpLine, logLine, dataDir, natsListen, consumerLine, extra, fwd)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// aoStart runs serve with aoEnv and waits for its listening line.
func aoStart(t *testing.T, cfgPath string) *review7Serve {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &review7Serve{cfgPath: cfgPath, stdout: &lockedBuf{}, stderr: &lockedBuf{}, cancel: cancel, done: make(chan error, 1)}
	go func() {
		s.done <- run(ctx, []string{"serve", "--config", cfgPath}, aoEnv, nil, s.stdout, s.stderr)
	}()
	t.Cleanup(func() { s.stop(t) })
	re := regexp.MustCompile(`listening on (http://[0-9.:]+)`)
	for end := time.Now().Add(25 * time.Second); ; {
		if m := re.FindStringSubmatch(s.stdout.String()); m != nil {
			s.base = m[1]
			return s
		}
		select {
		case err := <-s.done:
			s.done <- err
			t.Fatalf("serve exited before listening: %v\n%s", err, tail(s.stderr.String(), 2000))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(end) {
			t.Fatalf("serve not listening in 25 s\n%s", tail(s.stderr.String(), 2000))
		}
	}
}

// aoPost posts body to /webhooks/p signed with secret and returns the status.
func aoPost(t *testing.T, base, secret, body string) int {
	t.Helper()
	sch, err := gateway.NewScheme("hmac-sha256", gateway.SchemeOptions{Header: "X-Sig"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := sch.Sign([]byte(body), config.Secret(secret), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/p", strings.NewReader(body))
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func aoEvent(id, grant string, hour int) string {
	return fmt.Sprintf(`{"id":%q,"grant_id":%q,"type":"award.made","at":"2026-12-01T%02d:00:00Z"}`, id, grant, hour)
}

// aoWaitMetrics polls /metrics until cond holds (20 s) and returns the body.
func aoWaitMetrics(t *testing.T, base, what string, cond func(string) bool) string {
	t.Helper()
	var body string
	for end := time.Now().Add(20 * time.Second); ; {
		_, body = reviewMGet(base, "/metrics")
		if cond(body) {
			return body
		}
		if time.Now().After(end) {
			t.Fatalf("/metrics: %s not seen in 20 s:\n%s", what, grepLines(body, "hookgate_"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// aoSeries returns the sample lines (name{labels} value) of /metrics.
func aoSeries(body string) []string {
	var out []string
	for line := range strings.Lines(body) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	return out
}

// aoReceiver is a forward target answering 200 (or code while failing is set).
func aoReceiver(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var failing atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c := failing.Load(); c != 0 {
			w.WriteHeader(int(c))
			return
		}
		w.WriteHeader(200)
	}))
	t.Cleanup(srv.Close)
	return srv, &failing
}

// TestReviewAOUnauthenticatedInputAddsNoSeries: thousands of requests with
// distinct unknown providers, paths, methods, accounts and bad signatures
// add no series to /metrics (unbounded labels from outside would be a
// memory DoS and break Prometheus).
func TestReviewAOUnauthenticatedInputAddsNoSeries(t *testing.T) {
	fwd, _ := aoReceiver(t)
	s := aoStart(t, aoConfig(t, t.TempDir(), "", fwd.URL, ""))
	// One of each answer first, so the series they create exist.
	if c := aoPost(t, s.base, aoSecret, aoEvent("e1", "G-1", 10)); c != 200 {
		t.Fatalf("first event: %d", c)
	}
	aoPost(t, s.base, "wrong", aoEvent("e2", "G-1", 11))
	body := aoWaitMetrics(t, s.base, "applied", func(b string) bool {
		return strings.Contains(b, `hookgate_consumer_events_total{decision="applied",provider="p"} 1`)
	})
	before := len(aoSeries(body))
	c := &http.Client{Timeout: 10 * time.Second}
	do := func(method, path, body string, hdr map[string]string) {
		req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for i := range 500 {
		do("POST", fmt.Sprintf("/webhooks/bogus-%d", i), "{}", nil)
		do("POST", fmt.Sprintf("/webhooks/p/x%d", i), "{}", nil)
		do("POST", fmt.Sprintf("/other/%d", i), "{}", nil)
		do(fmt.Sprintf("M%d", i), "/webhooks/p", "{}", nil)
		do("POST", "/webhooks/p", aoEvent(fmt.Sprintf("x%d", i), fmt.Sprintf("G-%d", i), 10),
			map[string]string{"X-Sig": fmt.Sprintf("sha256=%064x", i), "Content-Type": fmt.Sprintf("application/x-%d", i)})
	}
	_, after := reviewMGet(s.base, "/metrics")
	n := len(aoSeries(after))
	if n > before+5 {
		// Show the new series' names.
		old := map[string]bool{}
		for _, l := range aoSeries(body) {
			old[strings.SplitN(l, " ", 2)[0]] = true
		}
		var added []string
		for _, l := range aoSeries(after) {
			if k := strings.SplitN(l, " ", 2)[0]; !old[k] {
				added = append(added, k)
			}
		}
		if len(added) > 20 {
			added = added[:20]
		}
		t.Fatalf("2500 unauthenticated requests added %d series to /metrics (%d -> %d), e.g.:\n%s", n-before, before, n, strings.Join(added, "\n"))
	}
}

// readmeMetricTable returns the series names (with their {labels}) in the
// README's metrics table, and every hookgate_ name the README uses.
func readmeMetrics(t *testing.T) (table map[string][]string, all []string) {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	table = map[string][]string{}
	inTable := false
	re := regexp.MustCompile("`(hookgate_[a-z_]+)(\\{([a-z_,]*)\\})?`")
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "| series | what |") {
			inTable = true
			continue
		}
		if inTable && !strings.HasPrefix(line, "|") {
			inTable = false
		}
		if !inTable {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 2 {
			continue
		}
		for _, m := range re.FindAllStringSubmatch(cells[1], -1) {
			var labels []string
			if m[3] != "" {
				labels = strings.Split(m[3], ",")
			}
			table[m[1]] = labels
		}
	}
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`hookgate_[a-z_]+`).FindAllString(string(b), -1) {
		if !seen[m] {
			seen[m] = true
			all = append(all, m)
		}
	}
	sort.Strings(all)
	return table, all
}

// metricFamilies parses /metrics: name -> type, and name -> label names
// seen on its samples.
func metricFamilies(body string) (types map[string]string, labels map[string]map[string]bool, help map[string]string) {
	types, labels, help = map[string]string{}, map[string]map[string]bool{}, map[string]string{}
	lre := regexp.MustCompile(`([a-zA-Z_]+)="`)
	for line := range strings.Lines(body) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Fields(line)
			types[f[2]] = f[3]
		case strings.HasPrefix(line, "# HELP "):
			f := strings.SplitN(line, " ", 4)
			if len(f) == 4 {
				help[f[2]] = f[3]
			}
		case line == "" || strings.HasPrefix(line, "#"):
		default:
			name := line
			if i := strings.IndexAny(line, "{ "); i >= 0 {
				name = line[:i]
			}
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if base := strings.TrimSuffix(name, suf); base != name && types[base] == "histogram" {
					name = base
				}
			}
			if labels[name] == nil {
				labels[name] = map[string]bool{}
			}
			if i := strings.Index(line, "{"); i >= 0 {
				for _, m := range lre.FindAllStringSubmatch(line[i:strings.LastIndex(line, "}")], -1) {
					if m[1] != "le" {
						labels[name][m[1]] = true
					}
				}
			}
		}
	}
	return types, labels, help
}

// TestReviewAOReadmeMetricsExist: every series of the README's metrics
// table is in /metrics of a running serve (both roles, a provider that
// forwards, one event applied), with the labels the README gives; counters
// end in _total, histograms' names in a unit.
func TestReviewAOReadmeMetricsExist(t *testing.T) {
	fwd, _ := aoReceiver(t)
	s := aoStart(t, aoConfig(t, t.TempDir(), "", fwd.URL, ""))
	if c := aoPost(t, s.base, aoSecret, aoEvent("e1", "G-1", 10)); c != 200 {
		t.Fatalf("first event: %d", c)
	}
	body := aoWaitMetrics(t, s.base, "applied", func(b string) bool {
		return strings.Contains(b, `hookgate_consumer_events_total{decision="applied",provider="p"} 1`) &&
			strings.Contains(b, "hookgate_forward_seconds_count")
	})
	types, labels, _ := metricFamilies(body)
	table, all := readmeMetrics(t)
	if len(table) < 15 {
		t.Fatalf("README metrics table parsed to %d names: %v", len(table), table)
	}
	for name, want := range table {
		got, ok := labels[name]
		if !ok {
			t.Errorf("README's metrics table names %s; /metrics has no such series", name)
			continue
		}
		for _, l := range want {
			if !got[l] {
				t.Errorf("README: %s{%s}; /metrics has labels %v", name, strings.Join(want, ","), keys(got))
			}
		}
	}
	// Names the README uses in prose (alerts, runbook) that are series.
	notSeries := map[string]bool{"hookgate_applied_kept_from": true, "hookgate_key_index": true, "hookgate_key_recipe_": true, "hookgate_created": true, "hookgate_restore_unfinished": true} // stream, bucket and consumer metadata
	for _, name := range all {
		if notSeries[name] {
			continue
		}
		if _, ok := types[name]; !ok {
			t.Errorf("README mentions %s; /metrics has no such family", name)
		}
	}
	for name, typ := range types {
		if !strings.HasPrefix(name, "hookgate_") {
			continue
		}
		if typ == "counter" != strings.HasSuffix(name, "_total") {
			t.Errorf("%s is a %s: counters, and only counters, end in _total", name, typ)
		}
		if typ == "histogram" && !strings.HasSuffix(name, "_seconds") && !strings.HasSuffix(name, "_bytes") {
			t.Errorf("histogram %s has no unit", name)
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// aoRun runs a CLI command with aoEnv; it returns the exit code and the
// combined output.
func aoRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(t.Context(), args, aoEnv, strings.NewReader(""), &out, &errb)
	return exitCode(err, &errb), out.String(), errb.String()
}

// TestReviewAOSecretsNeverShown: the provider's secret, the forward
// secret and the NATS token appear in no output: serve's debug log,
// /metrics, /readyz, status (text and JSON), dlq list/show, trace.
func TestReviewAOSecretsNeverShown(t *testing.T) {
	fwd, failing := aoReceiver(t)
	failing.Store(400) // dead-lettered at once
	addr := freeAddr(t)
	cfg := aoConfig(t, t.TempDir(), addr, fwd.URL, "")
	s := aoStart(t, cfg)
	if c := aoPost(t, s.base, aoSecret, aoEvent("e1", "G-1", 10)); c != 200 {
		t.Fatalf("event: %d", c)
	}
	aoPost(t, s.base, "wrong", aoEvent("e2", "G-1", 11))
	aoWaitMetrics(t, s.base, "dead letter", func(b string) bool {
		return strings.Contains(b, `hookgate_stream_messages{stream="DLQ"} 1`)
	})
	outputs := map[string]string{}
	_, outputs["/metrics"] = reviewMGet(s.base, "/metrics")
	_, outputs["/readyz"] = reviewMGet(s.base, "/readyz")
	for _, args := range [][]string{
		{"status", "--config", cfg}, {"status", "--json", "--config", cfg},
		{"dlq", "list", "--config", cfg}, {"dlq", "show", "1", "--config", cfg},
		{"trace", "p:default:evt:e1", "--config", cfg}, {"trace", "--json", "p:default:evt:e1", "--config", cfg},
		{"config", "check", cfg},
	} {
		code, out, errb := aoRun(t, args...)
		outputs[strings.Join(args[:2], " ")] = fmt.Sprintf("exit %d\n%s%s", code, out, errb)
	}
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	outputs["serve stdout+stderr"] = s.stdout.String() + s.stderr.String()
	if !strings.Contains(outputs["dlq list"], "p:default:evt:e1") {
		t.Fatalf("setup: dlq list lacks the letter:\n%s", outputs["dlq list"])
	}
	secrets := map[string]string{"provider secret": aoSecret, "forward secret": aoForwardSecret, "nats token": aoToken,
		"forward secret body": strings.TrimPrefix(aoForwardSecret, "whsec_")}
	for where, out := range outputs {
		for what, sec := range secrets {
			if i := strings.Index(out, sec); i >= 0 {
				t.Errorf("%s shows the %s: ...%s...", where, what, out[max(i-200, 0):min(i+len(sec)+50, len(out))])
			}
		}
	}
}

// TestReviewAOStatusJSONWhenNATSUnreachable: README ("At a glance"):
// when status cannot read the streams it exits 1 and `--json` still
// prints a document of time, via, instances, instances_note and error
// (review V: "before, --json printed nothing on stdout, so monitoring
// learned neither..."). When NATS itself does not answer (nats.url down,
// credentials refused, an embedded data_dir held by a serve without
// nats.embedded.listen) the connection fails first and --json prints
// nothing on stdout: the monitoring script that parses it gets "".
func TestReviewAOStatusJSONWhenNATSUnreachable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := `nats: { url: "nats://127.0.0.1:1" }
providers:
  p:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["x"] }
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	fwd, _ := aoReceiver(t)
	embedded := aoConfig(t, t.TempDir(), "", fwd.URL, "") // no nats.embedded.listen: the default
	aoStart(t, embedded)
	for _, tc := range []struct{ name, cfg string }{{"nats.url down", path}, {"embedded serve without listen", embedded}} {
		t.Run(tc.name, func(t *testing.T) { aoStatusJSONDoc(t, tc.cfg) })
	}
}

func aoStatusJSONDoc(t *testing.T, path string) {
	code, out, errb := aoRun(t, "status", "--json", "--config", path)
	if code != 1 {
		t.Errorf("status --json: exit %d, want 1", code)
	}
	var doc struct {
		Time  *time.Time `json:"time"`
		Via   string     `json:"via"`
		Error string     `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Error == "" || doc.Time == nil {
		t.Fatalf("status --json, NATS not reached: stdout %q is no JSON document with time and error (%v); stderr: %s", out, err, strings.TrimSpace(errb))
	}
}

// TestReviewAOReadyzSaysWhyWhenNATSIsGone: with nats.url's server gone,
// /readyz (and status's "not ready" line, and the "webhook not stored" and
// lock log lines) give nats.go's "outbound buffer limit exceeded" as the
// reason: with ReconnectBufSize(-1) that is what every request returns
// while disconnected, but to an operator it reads as a buffer overflow,
// not "not connected to NATS".
func TestReviewAOReadyzSaysWhyWhenNATSIsGone(t *testing.T) {
	srv := reviewTNATS(t, &server.Options{JetStream: true, StoreDir: t.TempDir()})
	fwd, _ := aoReceiver(t)
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf(`http: { listen: "127.0.0.1:0" }
nats: { url: %q }
providers:
  p:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["${AO_SECRET}"] }
    event_id: ["json:/id"]
    subject: "json:/grant_id"
    occurred_at: "json:/at"
    effects:
      forward: { url: %q, timeout: 2s }
`, srv.ClientURL(), fwd.URL)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	s := aoStart(t, path)
	if code, body := reviewMGet(s.base, "/readyz"); code != 200 {
		t.Fatalf("setup: /readyz %d %s", code, body)
	}
	srv.Shutdown()
	var body string
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var code int
		code, body = reviewMGet(s.base, "/readyz")
		if code == 503 && !strings.Contains(body, "deadline exceeded") {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("/readyz not 503 with a reason 20 s after NATS went away: %d %s", code, body)
		}
	}
	if strings.Contains(body, "outbound buffer") || !strings.Contains(strings.ToLower(body), "connect") {
		t.Errorf("NATS gone: /readyz says %s; want it to say NATS is not connected (reconnecting)", strings.TrimSpace(body))
	}
	code := aoPost(t, s.base, aoSecret, aoEvent("e1", "G-1", 10))
	for end := time.Now().Add(5 * time.Second); !strings.Contains(s.stderr.String(), "webhook not stored") && time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
	}
	t.Logf("webhook answered %d; log: %s", code, grepLines(s.stderr.String(), "webhook not stored"))
}

// TestReviewAONATSDisconnectIsLogged: a gateway-only serve on nats.url
// whose NATS server goes away logs nothing at all while no webhook comes
// (at night): no "disconnected" warn, no "reconnected" info. /metrics
// shows hookgate_nats_connected 0, /readyz 503, but the log, which the
// README says "carries what needs a person", is silent for as long as
// the outage lasts.
func TestReviewAONATSDisconnectIsLogged(t *testing.T) {
	srv := reviewTNATS(t, &server.Options{JetStream: true, StoreDir: t.TempDir()})
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf(`http: { listen: "127.0.0.1:0" }
roles: { consumer: false }
nats: { url: %q }
providers:
  p:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["${AO_SECRET}"] }
    event_id: ["json:/id"]
`, srv.ClientURL())
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	s := aoStart(t, path)
	before := len(s.stderr.String())
	srv.Shutdown()
	aoWaitMetrics(t, s.base, "connected 0", func(b string) bool {
		return strings.Contains(b, `hookgate_nats_connected{connection="hookgate-serve"} 0`)
	})
	// The README's own threshold for "needs a person" on the consumer
	// side is 10 s of failing pulls; give the gateway's connection as long.
	for end := time.Now().Add(12 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		log := s.stderr.String()[before:]
		if strings.Contains(log, `"level":"WARN"`) || strings.Contains(log, `"level":"ERROR"`) {
			return
		}
	}
	t.Errorf("NATS gone for 12 s: serve logged no warn or error line (only /metrics' hookgate_nats_connected 0 and /readyz tell); log since:\n%s", s.stderr.String()[before:])
}
