package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// roomToWrite writes its probe and leaves nothing behind; a data_dir it
// cannot write in is named in the reason.
func TestRoomToWrite(t *testing.T) {
	dir := t.TempDir()
	if err := roomToWrite(dir); err != nil {
		t.Fatalf("an empty temp dir: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the probe left %v behind", left)
	}
	missing := filepath.Join(dir, "gone")
	if err := roomToWrite(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("a missing dir: %v, want an error naming it", err)
	}
	if os.Geteuid() != 0 { // root writes anywhere
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		if err := roomToWrite(ro); err == nil || !strings.Contains(err.Error(), "probe file in "+ro) {
			t.Fatalf("a read-only dir: %v, want the probe's failure", err)
		}
	}
}
