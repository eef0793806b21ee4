package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// "hookgate stopped" is the last line of a stop: what the deferred stops
// say (here the key index failing to save its snapshot) comes before it,
// not after (a resource audit, stop 39: on a full disk the snapshot's and
// the AUDIT flush's failures were logged after "hookgate stopped").
func TestHookgateStoppedIsTheLastLine(t *testing.T) {
	dataDir := t.TempDir()
	s := review7Start(t, review7Config(t, dataDir, freeAddr(t), "", ""), true)
	// The snapshot cannot be written at the stop: a directory with a file
	// in it where it goes.
	snap := filepath.Join(dataDir, keyIndexFile)
	if err := os.RemoveAll(snap); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(snap, "blocked"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.stop(t); err != nil {
		t.Fatalf("serve stopped with %v\n%s", err, tail(s.stderr.String(), 1500))
	}
	logs := strings.TrimSpace(s.stderr.String())
	if !strings.Contains(logs, `"msg":"key index snapshot"`) {
		t.Fatalf("setup: the snapshot's failure was not logged\n%s", tail(logs, 1500))
	}
	lines := strings.Split(logs, "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, `"msg":"hookgate stopped"`) {
		t.Fatalf("the last line is not \"hookgate stopped\": %s\n%s", last, tail(logs, 1500))
	}
}
