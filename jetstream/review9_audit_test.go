package jetstream

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hookgate/hookgate/event"
)

// Records made while the writer stops must each be written or counted
// lost. Record checks `stopped` and then enqueues; Run sets `stopped`,
// drains and returns. A Record that read stopped=false before the Store
// and enqueues after the last drain leaves its record in the channel:
// neither in AUDIT nor in Failed (nor logged).
func TestReview9RecordRacingStopIsNeitherWrittenNorCounted(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	defer e.Shutdown()
	defer c.Close()
	for round := range 40 {
		w := NewAuditWriter(c, slog.New(slog.DiscardHandler), 64, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = w.Run(ctx); close(done) }()
		var quit atomic.Bool
		var wg sync.WaitGroup
		var made atomic.Int64
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; !quit.Load(); i++ {
					w.Record(auditRec("p", g*1_000_000+i))
					made.Add(1)
				}
			}()
		}
		cancel()
		<-done
		quit.Store(true)
		wg.Wait()
		if n := len(w.ch); n > 0 {
			t.Fatalf("round %d: %d records left in the queue after Run returned (made %d, counted lost %d): never written, never counted",
				round, n, made.Load(), w.Failed())
		}
	}
}

// Passes: packing splits at maxAuditMessage, keeps each subject's order, loses nothing.
func TestReview9PackSplitsAtLimitKeepingOrder(t *testing.T) {
	w := &AuditWriter{log: slog.New(slog.DiscardHandler), onFail: func() {}}
	var batch []event.AuditRecord
	for i := range 200 {
		r := auditRec("p", i)
		r.Reason = strings.Repeat("r", 1000)
		batch = append(batch, r)
		batch = append(batch, auditRec("q", i))
	}
	msgs := w.pack(batch)
	seen := map[string]int{}
	var keys []string
	for _, m := range msgs {
		if len(m.body) > maxAuditMessage {
			t.Fatalf("message of %d bytes", len(m.body))
		}
		recs, err := event.AuditRecords(m.body)
		if err != nil || len(recs) != len(m.recs) {
			t.Fatalf("decode: %d vs %d, %v", len(recs), len(m.recs), err)
		}
		for _, r := range recs {
			if r.AuditSubject() != m.subject {
				t.Fatal("wrong subject")
			}
			seen[r.Key]++
			if r.Provider == "p" {
				keys = append(keys, r.Key)
			}
		}
	}
	if len(seen) != 400 {
		t.Fatalf("%d distinct", len(seen))
	}
	for i, k := range keys {
		if k != auditRec("p", i).Key {
			t.Fatalf("order broken at %d", i)
		}
	}
}
