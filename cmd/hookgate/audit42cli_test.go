package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"
)

// Audit 42 (CLI and config). When nothing answers on nats.embedded.listen,
// an operator command (status, replay, dlq, trace) opens data_dir itself.
// Its in-process server then binds nats.embedded.listen too, for the few
// milliseconds the command runs: a second command started meanwhile (a
// monitoring status, two operators) connects there instead of meeting the
// data_dir lock, reads through a server that goes away under it, and fails
// with "stream WEBHOOKS: jetstream unavailable: not connected to NATS
// (reconnecting)" instead of the contract's "the second one says which
// process holds it" (1 of 8 concurrent `status` runs on a stopped
// data_dir, by hand); a downstream service reconnecting to that address
// is served by, and dropped with, the command.
func TestAudit42CLIDataDirOpenedByACommandServesNoListen(t *testing.T) {
	dataDir := t.TempDir() + "/data"
	natsListen := freeAddr(t)
	cfgPath := review7Config(t, dataDir, natsListen, "", "")
	s := review7Start(t, cfgPath, true)
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}

	cfg, err := loadConfig(cfgPath, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// What `hookgate status` does with no serve running: nothing answers
	// on the listen address, so it opens data_dir itself.
	sys, err := openForCLI(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), readOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()

	conn, err := net.DialTimeout("tcp", natsListen, 2*time.Second)
	if err == nil {
		conn.Close()
		t.Errorf("while an operator command holds data_dir (no serve runs), nats.embedded.listen %s accepts connections: another command or a downstream service reaches the command's short-lived server instead of the data_dir lock's message, and loses it when the command ends", natsListen)
	}
}
