package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// cliResult is one run of a hookgate CLI command.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runHG runs the built binary with args, bounded by a minute.
func runHG(t testing.TB, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), "HOOKGATE_CONFIG=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("hookgate %s: %v", strings.Join(args, " "), err)
	}
	return cliResult{stdout: out.String(), stderr: errb.String(), code: cmd.ProcessState.ExitCode()}
}

// statusJSON is the part of `hookgate status --json` the tests read.
type statusJSON struct {
	Via     string `json:"via"`
	Streams []struct {
		Name     string `json:"name"`
		Exists   bool   `json:"exists"`
		Messages uint64 `json:"messages"`
	} `json:"streams"`
	Consumers []struct {
		Stream        string `json:"stream"`
		Name          string `json:"name"`
		Exists        bool   `json:"exists"`
		NumPending    uint64 `json:"num_pending"`
		NumAckPending int    `json:"num_ack_pending"`
	} `json:"consumers"`
	Instances     []statusInstance `json:"instances"`
	InstancesNote string           `json:"instances_note"`
	DLQDepth      uint64           `json:"dlq_depth"`
	Watermarks    uint64           `json:"watermarks"`
	AppliedKeys   uint64           `json:"applied_keys"`
	Dedup         struct {
		StoreSize *uint64 `json:"store_size"`
		Window    int64   `json:"window_seconds"`
		KeyIndex  string  `json:"key_index"`
		Snapshot  *struct {
			Path  string `json:"path"`
			Bytes int64  `json:"bytes"`
		} `json:"key_index_snapshot"`
	} `json:"dedup"`
}

func (s statusJSON) messages(stream string) uint64 {
	for _, st := range s.Streams {
		if st.Name == stream {
			return st.Messages
		}
	}
	return 0
}

// applied reports whether hookgate-apply exists and has nothing in flight.
func (s statusJSON) applied() bool {
	for _, c := range s.Consumers {
		if c.Stream == "WEBHOOKS" && c.Name == "hookgate-apply" {
			return c.Exists && c.NumPending == 0 && c.NumAckPending == 0
		}
	}
	return false
}

// statusInstance is one serve in `hookgate status --json`.
type statusInstance struct {
	Instance string   `json:"instance"`
	Roles    []string `json:"roles"`
	Listen   []string `json:"listen"`
	Ready    bool     `json:"ready"`
	Problem  string   `json:"problem"`
	Applying bool     `json:"applying"`
	Paused   bool     `json:"paused"`
}

func statusOf(t testing.TB, cfgPath string) statusJSON {
	t.Helper()
	r := runHG(t, "status", "--json", "--config", cfgPath)
	if r.code != 0 {
		t.Fatalf("status --json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var s statusJSON
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("status --json is not JSON: %v\n%s", err, r.stdout)
	}
	return s
}

// traceJSON is the part of `hookgate trace KEY --json` the tests read.
type traceJSON struct {
	Found  bool `json:"found"`
	Stored []struct {
		Seq     uint64 `json:"seq"`
		Subject string `json:"subject"`
	} `json:"stored"`
	Audit []struct {
		Time     time.Time `json:"time"`
		Decision string    `json:"decision"`
		Actor    string    `json:"actor"`
		Status   int       `json:"status"`
		Seq      uint64    `json:"seq"`
	} `json:"audit"`
	Grants []struct {
		Seq     uint64 `json:"seq"`
		Subject string `json:"subject"`
	} `json:"grants"`
	DLQ     []json.RawMessage `json:"dlq"`
	Applied struct {
		In         string `json:"in"`
		Remembered bool   `json:"remembered"`
	} `json:"applied"`
	Scanned []struct {
		Stream string `json:"stream"`
		Filter string `json:"filter"`
	} `json:"scanned"`
}

// decisions lists the AUDIT decisions in the order they were made: the
// gateway's and the consumer's audit writers append independently, so the
// stream order may differ from it.
func (tr traceJSON) decisions() []string {
	audit := slices.Clone(tr.Audit)
	slices.SortStableFunc(audit, func(a, b struct {
		Time     time.Time `json:"time"`
		Decision string    `json:"decision"`
		Actor    string    `json:"actor"`
		Status   int       `json:"status"`
		Seq      uint64    `json:"seq"`
	}) int {
		return a.Time.Compare(b.Time)
	})
	var d []string
	for _, a := range audit {
		d = append(d, a.Decision)
	}
	return d
}

func TestStatusAndTrace(t *testing.T) {
	e := newEnv(t, "")
	hg := start(t, e.cfgPath)
	url := hg.baseURL + "/webhooks/grants"
	events := []struct{ id, body string }{
		{"msg_1", `{"grant_id":"G-42","type":"application.submitted","occurred_at":"2026-11-30T10:00:00Z"}`},
		{"msg_2", `{"grant_id":"G-42","type":"application.approved","occurred_at":"2026-11-30T11:00:00Z"}`},
		{"msg_3", `{"grant_id":"G-7","type":"application.submitted","occurred_at":"2026-11-30T10:00:00Z"}`},
	}
	for _, ev := range events {
		expect(t, post(t, url, signGrants(t, ev.id, []byte(ev.body)), []byte(ev.body)), 200, "status", "accepted")
	}
	first := []byte(events[0].body)
	expect(t, post(t, url, signGrants(t, "msg_1", first), first), 200, "status", "duplicate")

	var st statusJSON
	waitFor(t, "the consumer to apply the 3 events", time.Minute, func() bool {
		st = statusOf(t, e.cfgPath)
		return st.applied() && st.messages("GRANTS") == 3
	})
	if st.Via != "nats.embedded.listen" {
		t.Errorf("via = %q, want nats.embedded.listen", st.Via)
	}
	if n := st.messages("WEBHOOKS"); n != 3 {
		t.Errorf("WEBHOOKS messages = %d, want 3 (the duplicate stores nothing)", n)
	}
	// The grants provider orders by watermark and publishes per subject:
	// its GRANTS messages are its applied-key memory, APPLIED stays empty.
	if st.Watermarks != 2 || st.AppliedKeys != 0 || st.DLQDepth != 0 {
		t.Errorf("watermarks %d, applied keys %d, DLQ depth %d; want 2 (G-42, G-7), 0, 0", st.Watermarks, st.AppliedKeys, st.DLQDepth)
	}
	if st.Dedup.StoreSize == nil || *st.Dedup.StoreSize != 3 {
		t.Errorf("dedup store size = %v, want 3", st.Dedup.StoreSize)
	}
	// The embedded serve's gateway keeps the horizon's keys in its index,
	// saved in data_dir; JetStream's own window is dedup.window.
	if st.Dedup.KeyIndex != "kept" || st.Dedup.Window != 120 {
		t.Errorf("dedup key_index %q, window %d s; want kept, 120", st.Dedup.KeyIndex, st.Dedup.Window)
	}
	if sn := st.Dedup.Snapshot; sn == nil || filepath.Base(sn.Path) != "webhooks-keys.idx" || sn.Bytes == 0 {
		t.Errorf("dedup key_index_snapshot = %+v, want data_dir's webhooks-keys.idx", sn)
	}

	human := runHG(t, "status", "--config", e.cfgPath)
	if human.code != 0 {
		t.Fatalf("status: exit %d: %s", human.code, human.stderr)
	}
	for _, want := range []string{"WEBHOOKS", "GRANTS", "DLQ", "AUDIT", "WATERMARKS", "APPLIED", "WEBHOOKS/hookgate-apply", "dedup store size", "3 keys", "kept by the embedded gateway's key index", "key index snapshot"} {
		if !strings.Contains(human.stdout, want) {
			t.Errorf("status output lacks %q:\n%s", want, human.stdout)
		}
	}
	t.Logf("hookgate status:\n%s", human.stdout)

	// AUDIT is written in the background: wait for the consumer's record.
	const key = "grants:default:evt:msg_1"
	var tr traceJSON
	waitFor(t, "AUDIT to hold the duplicate and applied records of "+key, 30*time.Second, func() bool {
		r := runHG(t, "trace", key, "--json", "--config", e.cfgPath)
		if r.code != 0 {
			t.Fatalf("trace --json: exit %d: %s", r.code, r.stderr)
		}
		if err := json.Unmarshal([]byte(r.stdout), &tr); err != nil {
			t.Fatalf("trace --json is not JSON: %v\n%s", err, r.stdout)
		}
		return slices.Contains(tr.decisions(), "applied") && slices.Contains(tr.decisions(), "duplicate")
	})
	if !tr.Found || len(tr.Stored) != 1 || tr.Stored[0].Seq != 1 || tr.Stored[0].Subject != "webhooks.grants.default" {
		t.Errorf("stored = %+v; want WEBHOOKS seq 1 on webhooks.grants.default", tr.Stored)
	}
	// The duplicate may come before or after the consumer applied, and
	// so may the accepted record: the gateway stamps it once the store's
	// ack is back, and a consumer quicker than that goroutine applied
	// first (a CI run on a busy machine).
	if d := tr.decisions(); len(d) != 3 || !slices.Contains(d, "accepted") || !slices.Contains(d, "duplicate") || !slices.Contains(d, "applied") {
		t.Errorf("AUDIT decisions = %v; want accepted, duplicate and applied", d)
	}
	for _, a := range tr.Audit {
		if a.Seq != 1 {
			t.Errorf("AUDIT %s names WEBHOOKS seq %d, want 1", a.Decision, a.Seq)
		}
		if a.Decision == "accepted" && (a.Actor != "gateway" || a.Status != 200) {
			t.Errorf("accepted record = %+v", a)
		}
		if a.Decision == "applied" && a.Actor != "consumer" {
			t.Errorf("applied record = %+v", a)
		}
	}
	if len(tr.Grants) != 1 || tr.Grants[0].Subject != "grants.grants.G-42.application.submitted" {
		t.Errorf("grants = %+v; want one on grants.grants.G-42.application.submitted", tr.Grants)
	}
	if len(tr.DLQ) != 0 || !tr.Applied.Remembered || tr.Applied.In != "GRANTS" {
		t.Errorf("dlq %d letters, applied remembered %v in %q; want none, true, GRANTS", len(tr.DLQ), tr.Applied.Remembered, tr.Applied.In)
	}
	if len(tr.Scanned) != 4 || tr.Scanned[0].Filter != "webhooks.grants.default" || tr.Scanned[2].Filter != "grants.grants.>" {
		t.Errorf("scanned = %+v", tr.Scanned)
	}

	// KEY may also follow the flags.
	ht := runHG(t, "trace", "--config", e.cfgPath, key)
	if ht.code != 0 {
		t.Fatalf("trace: exit %d: %s", ht.code, ht.stderr)
	}
	for _, re := range []string{
		`(?m)^\S+\s+WEBHOOKS\s+1\s+stored\s+webhooks\.grants\.default`,
		`(?m)^\S+\s+AUDIT\s+\d+\s+accepted\s+gateway, HTTP 200, WEBHOOKS seq 1`,
		`(?m)^\S+\s+AUDIT\s+\d+\s+applied\s+consumer`,
		`(?m)^\S+\s+GRANTS\s+\d+\s+published\s+grants\.grants\.G-42\.application\.submitted; a replay reports it already-applied until `,
		`(?m)^scanned\s+WEBHOOKS webhooks\.grants\.default up to seq 3`,
	} {
		if !regexp.MustCompile(re).MatchString(ht.stdout) {
			t.Errorf("trace output does not match %s:\n%s", re, ht.stdout)
		}
	}
	// Oldest first: the timeline's times (its first column) never go
	// back.
	var last string
	for _, line := range strings.Split(ht.stdout, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || (f[1] != "WEBHOOKS" && f[1] != "AUDIT" && f[1] != "GRANTS") {
			continue
		}
		if f[0] < last {
			t.Errorf("trace is not oldest first (%s after %s):\n%s", f[0], last, ht.stdout)
		}
		last = f[0]
	}
	t.Logf("hookgate trace %s:\n%s", key, ht.stdout)

	unknown := runHG(t, "trace", "grants:default:evt:nope", "--config", e.cfgPath)
	if want := "hookgate: no event with key grants:default:evt:nope in WEBHOOKS, AUDIT, GRANTS or DLQ\n"; unknown.code != 1 || unknown.stderr != want || unknown.stdout != "" {
		t.Errorf("trace of an unknown key: exit %d, stdout %q, stderr %q; want 1 and %q", unknown.code, unknown.stdout, unknown.stderr, want)
	}
	if r := runHG(t, "trace", "not-a-key", "--config", e.cfgPath); r.code != 1 || !strings.Contains(r.stderr, "not a hookgate key") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("trace of a malformed key: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runHG(t, "trace", "--config", e.cfgPath); r.code != 2 {
		t.Errorf("trace without KEY: exit %d, stderr %q; want 2", r.code, r.stderr)
	}
	if r := runHG(t, "status", "--config", e.cfgPath, "extra"); r.code != 2 {
		t.Errorf("status with an extra argument: exit %d; want 2", r.code)
	}

	// A wrong token: one line naming the token, exit 1.
	cfg, err := os.ReadFile(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	wrong := filepath.Join(e.dir, "wrong-token.yaml")
	if err := os.WriteFile(wrong, bytes.Replace(cfg, []byte(`token: "`+natsToken+`"`), []byte(`token: "not-the-token"`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runHG(t, "status", "--config", wrong); r.code != 1 || !strings.Contains(r.stderr, "token") || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
		t.Errorf("status with a wrong token: exit %d, stdout %q, stderr %q; want exit 1 and one line naming the token", r.code, r.stdout, r.stderr)
	}

	// With hookgate stopped, the CLI opens data_dir itself.
	hg.stop(t)
	st = statusOf(t, e.cfgPath)
	if st.Via != "data_dir" || st.messages("WEBHOOKS") != 3 || st.messages("GRANTS") != 3 || st.Watermarks != 2 ||
		st.Dedup.StoreSize == nil || *st.Dedup.StoreSize != 3 || !st.applied() {
		t.Errorf("status with hookgate stopped = %+v; want via data_dir and the same numbers", st)
	}
	human = runHG(t, "status", "--config", e.cfgPath)
	if human.code != 0 || !strings.Contains(human.stdout, "read from data_dir") {
		t.Errorf("status with hookgate stopped: exit %d\n%s%s", human.code, human.stdout, human.stderr)
	}
	if r := runHG(t, "trace", key, "--config", e.cfgPath); r.code != 0 || !strings.Contains(r.stdout, "applied") {
		t.Errorf("trace with hookgate stopped: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// Without embedded.listen the CLI cannot reach a running hookgate; the
// data_dir lock stops it and names the process holding it.
func TestStatusLockedDataDirNamesHolder(t *testing.T) {
	e := newEnv(t, "")
	cfg, err := os.ReadFile(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	// Only nats.embedded.listen (four spaces in): the http.listen line
	// (":0") must stay, or hookgate binds the default 8080, which anything
	// else on the machine may hold.
	noListen := regexp.MustCompile(`(?m)^    listen: "127\.0\.0\.1:\d+"\n`).ReplaceAll(cfg, nil)
	if bytes.Equal(noListen, cfg) {
		t.Fatal("config has no embedded listen line to remove")
	}
	if err := os.WriteFile(e.cfgPath, noListen, 0o600); err != nil {
		t.Fatal(err)
	}
	hg := start(t, e.cfgPath)
	r := runHG(t, "status", "--config", e.cfgPath)
	pid := fmt.Sprint(hg.cmd.Process.Pid)
	if r.code != 1 || !strings.Contains(r.stderr, "held by process "+pid) || !strings.Contains(r.stderr, "nats.embedded.listen") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("status against a locked data_dir: exit %d, stderr %q; want exit 1 and one line naming process %s", r.code, r.stderr, pid)
	}
	// The refused CLI left the running hookgate alone.
	resp, err := client.Get(hg.baseURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/readyz after the refused CLI = %d", resp.StatusCode)
	}
}
