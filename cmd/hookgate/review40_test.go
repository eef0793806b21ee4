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

// Review 40: a backup killed during its first stream leaves only that
// stream's <name>.snap.part (backupOne renames it to .snap when whole).
// backupDir looks for ".snap" names only, so --out into those leftovers
// still says "a backup never overwrites another", the message 3d42e49
// replaced for a killed backup.
func TestReview40BackupDirKilledDuringTheFirstStream(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, jetstream.BackupStreams[0]+".snap.part"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := backupDir(dir)
	if err == nil || !strings.Contains(err.Error(), "holds a backup that did not finish") {
		t.Errorf("backupDir of a backup killed during its first stream = %v; want it to say the backup did not finish", err)
	}
}
