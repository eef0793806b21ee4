package jetstream

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/hookgate/hookgate/event"
)

// Lost AUDIT records are each counted, and logged at most a few lines a
// second, the next line saying how many it stands for: a store that
// stopped writing loses every record, and each was an error line.
func TestLostAuditRecordsAreLoggedBounded(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	defer func() { c.Close(); e.Shutdown() }()
	var logged syncLog
	lost := 0
	w := NewAuditWriter(c, slog.New(slog.NewJSONHandler(&logged, nil)), 1, func() { lost++ })
	// Run never reads the queue: the first record waits in it, the
	// others find it full.
	for i := range 200 {
		w.Record(event.AuditRecord{Decision: event.DecisionAccepted, Provider: "p", Key: "k" + string(rune('a'+i%26))})
	}
	if lost != 199 || w.Failed() != 199 {
		t.Fatalf("lost %d (Failed %d), want 199 counted", lost, w.Failed())
	}
	// Two seconds at most, each with its lines and one telling its
	// held-back tail at its end (LineLimit.AllowOrLater).
	if n := strings.Count(logged.String(), `"msg":"audit write failed"`); n < 1 || n > 2*(auditLostLinesPerSecond+1) {
		t.Fatalf("%d \"audit write failed\" lines for 199 lost records, want 1 to %d:\n%s", n, 2*(auditLostLinesPerSecond+1), logged.String())
	}
}
