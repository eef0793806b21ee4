package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookgate/hookgate/jetstream"
)

// Review 40: a restore under way holds data_dir's lock and has its
// restore-unfinished mark there. A second restore aimed at the same
// data_dir (run again from another terminal, a retrying script) is told
// the first "did not finish (stopped part way): empty it, then run restore
// again" - advice that, followed, deletes the store from under the running
// restore. newDataDir looks at the mark before the lock; the process that
// holds it should be named first (as StartEmbedded does: lock, then mark).
func TestReview40RestoreOntoARestoreUnderWayNamesItsProcess(t *testing.T) {
	dir := t.TempDir()
	lock, err := jetstream.LockDataDir(dir) // the first restore's embedded server
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Close() })
	if err := os.WriteFile(filepath.Join(dir, jetstream.RestoreMarkFile), []byte("hookgate restore began\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = newDataDir(dir)
	if err == nil {
		t.Fatal("newDataDir accepted a data_dir a restore is running in")
	}
	if strings.Contains(err.Error(), "empty it") || !strings.Contains(err.Error(), "in use by process") {
		t.Errorf("second restore onto a data_dir a running restore holds: %v\nwant the process that holds it named, not advice to empty it", err)
	}
}
