package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"syscall"
	"testing"

	"github.com/hookgate/hookgate/jetstream"
)

// A store that could not start for want of room is told apart from other
// failures: serve waits for room and starts again instead of exiting.
func TestDiskFullAtStart(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{errors.New("provision KV WATERMARKS: jetstream unavailable: nats: API error: code=500 err_code=10069 description=write /d/meta.inf.tmp: no space left on device"), true},
		{fmt.Errorf("open: %w", &os.PathError{Op: "write", Path: "/d/x", Err: syscall.ENOSPC}), true},
		{fmt.Errorf("%w: %w", jetstream.ErrUnavailable, jetstream.ErrStoreWrite), true},
		{errors.New("provision KV WATERMARKS: nats refused the credentials"), false},
		{fmt.Errorf("data_dir: %w", jetstream.ErrDataDirLocked), false},
	} {
		if got := diskFull(c.err); got != c.want {
			t.Errorf("diskFull(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	// With room, the wait is over at once.
	if !waitForRoom(t.Context(), t.TempDir(), errors.New("no space left on device"), slog.New(slog.NewTextHandler(io.Discard, nil))) {
		t.Fatal("waitForRoom on a directory with room did not return true")
	}
}
