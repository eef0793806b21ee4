package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// statusInstances runs `status --json` and returns its instances and note.
func statusInstances(t *testing.T, cfgPath string) ([]instanceDoc, string) {
	t.Helper()
	r := review9Run(t, "", "status", "--json", "--config", cfgPath)
	if r.code != 0 {
		t.Fatalf("status --json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var d struct {
		Instances []instanceDoc `json:"instances"`
		Note      string        `json:"instances_note"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	if d.Instances == nil {
		t.Fatalf("status --json has no instances array:\n%s", r.stdout)
	}
	return d.Instances, d.Note
}

// `hookgate status` lists the running serve: its roles, that it is ready,
// that it applies events, where it listens; and says when none runs.
func TestStatusListsTheRunningServe(t *testing.T) {
	dataDir, natsListen := t.TempDir(), freeAddr(t)
	cfgPath := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nnats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n%s", dataDir, natsListen, review6Provider)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}

	insts, note := statusInstances(t, cfgPath)
	if len(insts) != 0 || !strings.Contains(note, "no serve runs") {
		t.Fatalf("before serve: instances %+v, note %q", insts, note)
	}

	s := review7Start(t, cfgPath, true)
	var d instanceDoc
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		insts, note = statusInstances(t, cfgPath)
		if len(insts) == 1 && insts[0].Applying && insts[0].Ready {
			d = insts[0]
			break
		}
		if time.Now().After(end) {
			t.Fatalf("status never listed the serve as ready and applying: %+v, note %q", insts, note)
		}
	}
	host, _ := os.Hostname()
	if want := fmt.Sprintf("%s/%d", host, os.Getpid()); d.Instance != want || !d.Ready || d.Problem != "" ||
		strings.Join(d.Roles, ",") != "gateway,consumer" || strings.Join(d.Listen, ",") != s.base ||
		d.Version == "" || d.Started.IsZero() || d.Started.After(time.Now()) {
		t.Fatalf("the serve's entry: %+v; want %s, ready, both roles, listening on %s", d, want, s.base)
	}

	r := review9Run(t, "", "status", "--config", cfgPath)
	line := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(d.Instance) + `\s+gateway,consumer\s+yes\s+yes\s+\S+\s+` + regexp.QuoteMeta(s.base) + `\s`)
	if r.code != 0 || !strings.Contains(r.stdout, "INSTANCE  ") || !line.MatchString(r.stdout) || strings.Contains(r.stdout, "not ready") {
		t.Fatalf("status: exit %d, no ready applying line for %s:\n%s%s", r.code, d.Instance, r.stdout, r.stderr)
	}
}

// A serve that is not ready says why in status, as its /readyz does:
// here its key index is still opening.
func TestStatusShowsWhyAServeIsNotReady(t *testing.T) {
	s, _, release := reviewMStuckKeyIndex(t)
	defer release()
	cfgPath := s.cfgPath
	var insts []instanceDoc
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var note string
		insts, note = statusInstances(t, cfgPath)
		if len(insts) == 1 && strings.Contains(insts[0].Problem, "key index") { // after its first check
			break
		}
		if time.Now().After(end) {
			t.Fatalf("status of a serve whose key index opens: %+v, note %q; want one, not ready, the key index named", insts, note)
		}
	}
	if insts[0].Ready || insts[0].Applying {
		t.Fatalf("a serve whose key index opens (gateway only): %+v, want not ready, not applying", insts[0])
	}
	r := review9Run(t, "", "status", "--config", cfgPath)
	if !regexp.MustCompile(`(?m)^\S+\s+gateway\s+no\s+no\s`).MatchString(r.stdout) ||
		!strings.Contains(r.stdout, insts[0].Instance+" not ready: "+insts[0].Problem) {
		t.Fatalf("status text lacks the not-ready line:\n%s", r.stdout)
	}
}
