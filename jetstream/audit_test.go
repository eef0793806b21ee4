package jetstream

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/event"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

func TestAuditWriterAppendsEveryRecord(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	defer e.Shutdown()
	defer c.Close()
	w := NewAuditWriter(c, slog.New(slog.NewTextHandler(io.Discard, nil)), 2048, nil)
	// Queued before Run starts, as in a burst: the writer packs them.
	const n = 1000
	want := map[string][]string{}
	for i := range n {
		r := event.AuditRecord{Time: time.Now().UTC(), Decision: event.DecisionAccepted, Provider: "p", Key: fmt.Sprintf("p:a:evt:%d", i), Seq: uint64(i + 1), Actor: event.ActorGateway}
		switch i % 10 {
		case 3:
			r.Decision = event.DecisionDuplicate
		case 7:
			r.Provider = "q"
		}
		w.Record(r)
		want[r.AuditSubject()] = append(want[r.AuditSubject()], r.Key)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
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
	got := map[string][]string{}
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := event.AuditRecords(m.Data)
		if err != nil || len(recs) == 0 {
			t.Fatalf("AUDIT seq %d: %d records, %v", seq, len(recs), err)
		}
		for _, r := range recs {
			if r.AuditSubject() != m.Subject {
				t.Fatalf("record %s (%s) stored on %s", r.Key, r.AuditSubject(), m.Subject)
			}
			got[m.Subject] = append(got[m.Subject], r.Key)
		}
	}
	// Every record once, each subject's in the order recorded.
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("AUDIT records by subject:\n got %v\nwant %v", got, want)
	}
	// Packed: a burst is a few messages per subject, not one per record.
	if info.State.Msgs > n/10 {
		t.Fatalf("AUDIT holds %d messages for %d records; the burst was not packed", info.State.Msgs, n)
	}
	// AUDIT is append-only.
	if err := s.DeleteMsg(t.Context(), 1); err == nil {
		t.Fatal("deleting an AUDIT record succeeded")
	}
}

// What is queued when the writer looks goes into one batch, even when it
// is stopping already: 100 records of one subject are one message. (A
// select that let the stop win over queued records split them at random;
// ten rounds make passing by luck a one-in-a-thousand event.)
func TestAuditWriterPacksWhatIsQueued(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	defer e.Shutdown()
	defer c.Close()
	s, err := c.JS.Stream(t.Context(), StreamAudit)
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	for round := uint64(1); round <= 10; round++ {
		w := NewAuditWriter(c, slog.New(slog.NewTextHandler(io.Discard, nil)), 256, nil)
		for i := range n {
			w.Record(event.AuditRecord{Time: time.Now().UTC(), Decision: event.DecisionAccepted, Provider: "p",
				Key: fmt.Sprintf("p:a:evt:%d-%d", round, i), Seq: uint64(i + 1), Actor: event.ActorGateway})
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := w.Run(ctx); err != nil || w.Failed() != 0 {
			t.Fatalf("round %d: Run: %v, %d lost", round, err, w.Failed())
		}
		info, err := s.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs != round {
			t.Fatalf("round %d: AUDIT holds %d messages; %d queued records of one subject were not one message", round, info.State.Msgs, n)
		}
		m, err := s.GetMsg(t.Context(), round)
		if err != nil {
			t.Fatal(err)
		}
		if recs, err := event.AuditRecords(m.Data); err != nil || len(recs) != n {
			t.Fatalf("round %d: the message holds %d records (%v), want %d", round, len(recs), err, n)
		}
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

func auditRec(provider string, i int) event.AuditRecord {
	return event.AuditRecord{Time: time.Now().UTC(), Decision: event.DecisionAccepted, Provider: provider,
		Key: fmt.Sprintf("%s:a:evt:%d", provider, i), Actor: event.ActorGateway}
}

// Writes AUDIT does not answer (a request lost in a leader change, an R3
// leader without quorum) must not stay pending in nats.go: once its bound
// on unanswered async publishes (4000; 16 here) was reached, every later
// audit write failed while the process ran, though AUDIT was back.
func TestAuditWriterRecoversAfterUnansweredWrites(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	defer e.Shutdown()
	defer c.Close()
	// AUDIT stops answering: its subjects have interest, nobody replies.
	if err := c.JS.DeleteStream(t.Context(), StreamAudit); err != nil {
		t.Fatal(err)
	}
	var swallowed atomic.Int64
	hole, err := c.NC.Subscribe("audit.>", func(*nats.Msg) { swallowed.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	if err := c.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	w := newAuditWriter(c.NC, slog.New(slog.DiscardHandler), 1024, nil, 100*time.Millisecond, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for i := range 16 { // 16 providers: 16 messages a batch, the async bound
		w.Record(auditRec(fmt.Sprintf("p%d", i), 1))
	}
	waitUntil(t, "a round of audit writes swallowed unanswered", func() bool { return swallowed.Load() >= 16 })
	// AUDIT is back.
	if err := hole.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := Provision(t.Context(), c.JS, testStreams()); err != nil {
		t.Fatal(err)
	}
	w.Record(auditRec("probe", 1))
	waitUntil(t, "the record made after AUDIT came back in AUDIT", func() bool {
		s, err := c.JS.Stream(t.Context(), StreamAudit)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(t.Context(), js.WithSubjectFilter("audit.accepted.probe"))
		if err != nil {
			t.Fatal(err)
		}
		return len(info.State.Subjects) > 0
	})
}

// With AUDIT gone, the flush at a stop gives up on everything left after
// auditStopFlush, all batches together (it gave each batch of 256 its own
// 2 s: with serve's 8192 queued, a minute or more, past any process
// manager's patience), and counts what it lost.
func TestAuditWriterStopIsBoundedWhenAuditIsDown(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	defer e.Shutdown()
	defer c.Close()
	if err := c.JS.DeleteStream(t.Context(), StreamAudit); err != nil {
		t.Fatal(err)
	}
	var lost atomic.Int64
	w := NewAuditWriter(c, slog.New(slog.DiscardHandler), 8192, func() { lost.Add(1) })
	for i := range 8192 {
		w.Record(auditRec("p", i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the stop, with everything still queued
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case <-done:
	case <-time.After(4 * auditStopFlush): // a liveness bound, not a timing goal
		t.Fatalf("Run still flushing %s after the stop (limit %s); %d lost so far", 4*auditStopFlush, auditStopFlush, lost.Load())
	}
	if lost.Load() != 8192 || w.Failed() != 8192 {
		t.Fatalf("lost %d (Failed %d), want all 8192 counted", lost.Load(), w.Failed())
	}
	// After the stop a record is counted lost, not left in the queue.
	w.Record(auditRec("late", 1))
	if w.Failed() != 8193 {
		t.Fatalf("a record after the stop: Failed %d, want 8193", w.Failed())
	}
}

// waitUntil polls cond for up to 30 s (the internal tests' waitFor).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
