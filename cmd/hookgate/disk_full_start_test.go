package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"syscall"
	"testing"
	"time"

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
		{fmt.Errorf("open: %w", &os.PathError{Op: "write", Path: "/d/x", Err: syscall.EDQUOT}), true},
		// Another write error (a failing disk) is no want of room.
		{fmt.Errorf("%w: %w", jetstream.ErrUnavailable, fmt.Errorf("%w (nats-server: write /d/1.blk: input/output error)", jetstream.ErrStoreWrite)), false},
		{errors.New("provision KV WATERMARKS: nats refused the credentials"), false},
		{fmt.Errorf("data_dir: %w", jetstream.ErrDataDirLocked), false},
	} {
		if got := diskFull(c.err); got != c.want {
			t.Errorf("diskFull(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	// With room, the wait is over at once.
	if !waitForRoom(t.Context(), t.TempDir(), time.Time{}, errors.New("no space left on device"), slog.New(slog.NewTextHandler(io.Discard, nil))) {
		t.Fatal("waitForRoom on a directory with room did not return true")
	}
}
