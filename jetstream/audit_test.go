package jetstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hookgate/hookgate/event"
)

func TestAuditWriterAppendsEveryRecord(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	defer e.Shutdown()
	defer c.Close()
	w := NewAuditWriter(c, slog.New(slog.NewTextHandler(io.Discard, nil)), 2048, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	const n = 1000
	for i := range n {
		w.Record(event.AuditRecord{Time: time.Now().UTC(), Decision: event.DecisionAccepted, Provider: "p", Key: fmt.Sprintf("p:a:evt:%d", i), Seq: uint64(i + 1), Actor: event.ActorGateway})
	}
	// Stopping flushes what is queued.
	cancel()
	<-done
	if f := w.Failed(); f != 0 {
		t.Fatalf("%d records lost", f)
	}
	s, err := c.JS.Stream(t.Context(), StreamAudit)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != n {
		t.Fatalf("AUDIT holds %d records, want %d", info.State.Msgs, n)
	}
	m, err := s.GetMsg(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	var r event.AuditRecord
	if err := json.Unmarshal(m.Data, &r); err != nil || r.Key != "p:a:evt:0" || m.Subject != "audit.accepted.p" {
		t.Fatalf("first record %s on %s: %+v %v", m.Data, m.Subject, r, err)
	}
	// AUDIT is append-only.
	if err := s.DeleteMsg(t.Context(), 1); err == nil {
		t.Fatal("deleting an AUDIT record succeeded")
	}
}

func TestAuditWriterNeverBlocks(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	defer e.Shutdown()
	defer c.Close()
	var lost int
	w := NewAuditWriter(c, slog.New(slog.NewTextHandler(io.Discard, nil)), 4, func() { lost++ })
	// Run is not started: the buffer fills and further records are
	// counted as lost instead of blocking the caller.
	for range 10 {
		w.Record(event.AuditRecord{Decision: event.DecisionAccepted, Provider: "p"})
	}
	if lost != 6 || w.Failed() != 6 {
		t.Fatalf("lost = %d (Failed %d), want 6", lost, w.Failed())
	}
}
