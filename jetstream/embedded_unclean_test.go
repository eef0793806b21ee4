package jetstream

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// After an unclean stop the file store rebuilds each stream written since
// its state was saved, and nats-server warns twice per stream ("Recovering
// stream state from index errored: prior state file"). hookgate says it
// once, in words an operator can act on, and once more when it is done.
// The unclean stop is a copy of a running server's data_dir: what a
// kill -9 leaves behind.
func TestUncleanStopIsSaidOnce(t *testing.T) {
	dir := t.TempDir()
	start := func(t *testing.T, dir string, log *slog.Logger) (*Embedded, js.JetStream) {
		t.Helper()
		e, err := StartEmbedded(EmbeddedOptions{DataDir: dir, Token: "tok", MaxPayload: 1 << 20, Log: log})
		if err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect("", nats.InProcessServer(e.Server()), nats.Token(e.Token()))
		if err != nil {
			e.Shutdown()
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		j, err := js.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return e, j
	}
	publish := func(t *testing.T, j js.JetStream, n int) {
		t.Helper()
		for i := range n {
			if _, err := j.Publish(t.Context(), "unclean.x", []byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
		}
	}

	e, j := start(t, dir, nil)
	if _, err := j.CreateStream(t.Context(), js.StreamConfig{Name: "UNCLEAN", Subjects: []string{"unclean.>"}, Storage: js.FileStorage}); err != nil {
		t.Fatal(err)
	}
	publish(t, j, 10)
	e.Shutdown() // saves the stream's state

	var clean syncLog
	e, j = start(t, dir, slog.New(slog.NewTextHandler(&clean, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if strings.Contains(clean.String(), "stopped cleanly") || strings.Contains(clean.String(), "rebuilt") {
		t.Fatalf("a clean restart said the store was rebuilt:\n%s", clean.String())
	}
	publish(t, j, 5) // past the saved state
	crashed := filepath.Join(t.TempDir(), "data")
	copyTree(t, dir, crashed)
	e.Shutdown()

	var got syncLog
	e, j = start(t, crashed, slog.New(slog.NewTextHandler(&got, nil)))
	defer e.Shutdown()
	log := got.String()
	if n := strings.Count(log, "level=WARN"); n != 1 || !strings.Contains(log, "event store was not stopped cleanly") {
		t.Fatalf("after an unclean stop, want one warning saying so, got %d:\n%s", n, log)
	}
	if !strings.Contains(log, "level=INFO msg=\"event store state rebuilt after the unclean stop\" streams=UNCLEAN") {
		t.Fatalf("no line saying which streams were rebuilt:\n%s", log)
	}
	if strings.Contains(log, "prior state file") {
		t.Fatalf("nats-server's own rebuild lines passed through at info or above:\n%s", log)
	}
	s, err := j.Stream(t.Context(), "UNCLEAN")
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n != 15 {
		t.Fatalf("the rebuilt stream holds %d messages, want 15", n)
	}
}
