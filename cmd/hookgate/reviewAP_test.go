package main

// Review AP: serve's "data_dir holds no event store" warning.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReviewAPNoStoreWarningMissedAfterACLICommand: the warning exists
// for a config moved away from its relative data_dir (review AM). When
// that data_dir exists but is empty (a mount point, a directory an
// install script made), an operator command run first (a status, a
// monitoring `status --json`, a trace) opens it itself, as the CLI does
// when no serve answers: the embedded server creates data_dir/jetstream,
// the command answers from it (every stream "missing") and serve's first start then
// finds "a store" (jetstream.HasStore looks for the directory only),
// starts on an empty one and says nothing: the retry of an event applied
// before is accepted and applied again, the case the warning is for.
// Fixed: HasStore looks for the WEBHOOKS stream's directory.
func TestReviewAPNoStoreWarningMissedAfterACLICommand(t *testing.T) {
	const warning = "data_dir holds no event store"
	etc := t.TempDir()
	data := filepath.Join(etc, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(etc, "hookgate.yaml")
	reviewAHWrite(t, cfgPath, "http: { listen: \"127.0.0.1:0\" }\nnats: { embedded: { data_dir: ./data } }\n"+review6Provider)

	// It answers (every stream "missing"), and leaves data_dir/jetstream.
	_ = review9Run(t, "", "status", "--config", cfgPath)
	if _, err := os.Stat(filepath.Join(data, "jetstream")); err != nil {
		t.Fatalf("setup: status left no jetstream directory: %v", err)
	}
	s := review7Start(t, cfgPath, true)
	review7MustSend(t, s.base, "a", "accepted")
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	if log := s.stderr.String(); !strings.Contains(log, warning) {
		t.Errorf("serve's first start on an empty data_dir (only `hookgate status` had opened it) gave no %q warning:\n%s", warning, log)
	}
}
