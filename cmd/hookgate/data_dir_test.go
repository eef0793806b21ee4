package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestServeSaysWhenDataDirHoldsNoStore: a relative data_dir is read from
// the config file's directory, so a config file moved (or a data_dir
// edited wrong) starts serve on an empty store, where a retry of an event
// applied before is accepted again. serve says so at start, naming the
// directory, and says nothing of it when it starts again on its store
// (review AM: it logged nothing).
func TestServeSaysWhenDataDirHoldsNoStore(t *testing.T) {
	const warning = "data_dir holds no event store"
	oldEtc := t.TempDir()
	cfgPath := filepath.Join(oldEtc, "hookgate.yaml")
	cfg := "http: { listen: \"127.0.0.1:0\" }\nnats: { embedded: { data_dir: ./data } }\n" + review6Provider
	reviewAHWrite(t, cfgPath, cfg)

	run := func(path, want string) string {
		t.Helper()
		s := review7Start(t, path, true)
		review7MustSend(t, s.base, "a", want)
		if err := s.stop(t); err != nil {
			t.Fatal(err)
		}
		return s.stderr.String()
	}
	first := run(cfgPath, "accepted")
	if !strings.Contains(first, warning) || !strings.Contains(first, filepath.Join(oldEtc, "data")) {
		t.Errorf("first start on a new data_dir: want the %q warning naming it:\n%s", warning, first)
	}
	if again := run(cfgPath, "duplicate"); strings.Contains(again, warning) {
		t.Errorf("a start again on the same data_dir warned %q:\n%s", warning, again)
	}
	// The config file moves, unchanged: ./data is now elsewhere.
	newEtc := t.TempDir()
	moved := filepath.Join(newEtc, "hookgate.yaml")
	reviewAHWrite(t, moved, cfg)
	// The retry is new there: why the warning matters.
	if log := run(moved, "accepted"); !strings.Contains(log, warning) || !strings.Contains(log, filepath.Join(newEtc, "data")) {
		t.Errorf("a start after the config file moved (its ./data empty): want the %q warning naming %s:\n%s", warning, filepath.Join(newEtc, "data"), log)
	}
}
