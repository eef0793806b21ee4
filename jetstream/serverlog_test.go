package jetstream

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The server's errors and warnings reach hookgate's log, a message at most
// once a minute; its critical write error marks the store as failed.
func TestServerLogPassesErrorsAndNoticesAWriteError(t *testing.T) {
	var b strings.Builder
	e := &Embedded{}
	l := &serverLog{log: slog.New(slog.NewTextHandler(&b, nil)), e: e, last: map[string]time.Time{}}
	l.Noticef("Starting nats-server")
	l.Warnf("Stream state outdated, %s", "will rebuild")
	l.Warnf("Stream state outdated, %s", "will rebuild")
	if err := e.WriteError(); err != nil {
		t.Fatalf("WriteError before any write error: %v", err)
	}
	l.Errorf("Critical write error: %v", "write /d/1.blk: no space left on device")
	if n := strings.Count(b.String(), "Stream state outdated"); n != 1 {
		t.Errorf("a repeated warning logged %d times, want once:\n%s", n, b.String())
	}
	if strings.Contains(b.String(), "Starting nats-server") {
		t.Errorf("a notice was logged:\n%s", b.String())
	}
	err := e.WriteError()
	if !errors.Is(err, ErrStoreWrite) || !strings.Contains(err.Error(), "no space left on device") || !strings.Contains(b.String(), "event store stopped writing") {
		t.Fatalf("after a critical write error: WriteError %v; log:\n%s", err, b.String())
	}
}
