package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
)

// letteredBefore is consumer.Options.Lettered for serve: the stored events
// the consumer's last reset delivers again (above its ack floor, up to its
// last delivery) that were dead-lettered before it (their letter in DLQ,
// or, removed from there by an operator, their dead-lettered record in
// AUDIT). The reset brings every event settled above the floor back;
// these must not run again.
type letteredBefore struct {
	mu     sync.Mutex
	events map[letteredEvent]string // -> why it is settled
}

// letteredEvent is a stored event: its sequence in WEBHOOKS and its key.
// The key too: a WEBHOOKS deleted and made again numbers its events from
// 1, and an old letter re-fed and dead-lettered again keeps its old
// sequence (review of stop 41: the new event at that sequence was taken
// for settled, and lost).
type letteredEvent struct {
	seq uint64
	key string
}

// of says why the stored event seq with key was dead-lettered before the
// reset, "" when it was not. Safe on a nil receiver (no reset).
func (l *letteredBefore) of(seq uint64, key string) string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.events[letteredEvent{seq, key}]
}

// load reads, after a reset that delivers the events from to through
// again, the letters and dead-lettered records written since from was
// stored, and keeps those of events in that range (one above it was never
// delivered to a consumer: its letter is a replay's, and the consumer
// still runs it). What it could not read is logged: those events' letters
// may then be written twice, as before.
func (l *letteredBefore) load(ctx context.Context, conn *jetstream.Conn, from, through uint64, logger *slog.Logger) {
	events := map[letteredEvent]string{}
	defer func() {
		l.mu.Lock()
		l.events = events
		l.mu.Unlock()
	}()
	first, err := jetstream.GetMsg(ctx, conn, jetstream.StreamWebhooks, from)
	if err == nil {
		err = jetstream.Read(ctx, conn, jetstream.StreamDLQ, jetstream.Range{Since: first.Time}, func(m jetstream.StoredMsg, _ uint64) error {
			if stored, err := strconv.ParseUint(m.Header.Get(event.HeaderStoredSeq), 10, 64); err == nil && stored >= from && stored <= through {
				events[letteredEvent{stored, m.Header.Get(event.HeaderKey)}] = fmt.Sprintf("dead-lettered before this start (letter %d in DLQ)", m.Seq)
			}
			return nil
		})
	}
	if err == nil {
		err = jetstream.Read(ctx, conn, jetstream.StreamAudit, jetstream.Range{Filter: "audit." + event.DecisionDeadLettered + ".>", Since: first.Time}, func(m jetstream.StoredMsg, _ uint64) error {
			records, _ := event.AuditRecords(m.Body) // the records before a damaged line
			for _, r := range records {
				if e := (letteredEvent{r.Seq, r.Key}); r.Decision == event.DecisionDeadLettered && r.Seq >= from && r.Seq <= through && events[e] == "" {
					events[e] = "dead-lettered before this start (its letter since removed from DLQ)"
				}
			}
			return nil
		})
	}
	if err != nil {
		logger.Warn("could not read which events were dead-lettered before the consumer's reset: one may be sent and dead-lettered again", slog.String("error", err.Error()))
	}
	if len(events) > 0 {
		logger.Info("events dead-lettered before this start are not run again", slog.Int("events", len(events)), slog.Uint64("seq", from))
	}
}
