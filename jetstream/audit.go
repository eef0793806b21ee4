package jetstream

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/hookgate/hookgate/event"
	js "github.com/nats-io/nats.go/jetstream"
)

// AuditWriter appends decisions to AUDIT in the background, so an audit
// write never delays an answer. A record that cannot be written (buffer
// full, publish failed) is counted and logged, never retried forever.
//
// Record is safe for concurrent use; Run must be called once.
type AuditWriter struct {
	js      js.JetStream
	log     *slog.Logger
	ch      chan event.AuditRecord
	failed  atomic.Uint64
	onFail  func()
	timeout time.Duration
}

// NewAuditWriter returns a writer with room for buffer pending records.
// onFail (may be nil) is called once per lost record, e.g. to count it.
func NewAuditWriter(c *Conn, logger *slog.Logger, buffer int, onFail func()) *AuditWriter {
	if buffer <= 0 {
		buffer = 4096
	}
	if onFail == nil {
		onFail = func() {}
	}
	return &AuditWriter{js: c.JS, log: logger, ch: make(chan event.AuditRecord, buffer), onFail: onFail, timeout: 5 * time.Second}
}

// Record queues r. It never blocks.
func (w *AuditWriter) Record(r event.AuditRecord) {
	select {
	case w.ch <- r:
	default:
		w.lost(r, "audit buffer full")
	}
}

// Failed is how many records were lost so far.
func (w *AuditWriter) Failed() uint64 { return w.failed.Load() }

func (w *AuditWriter) lost(r event.AuditRecord, why string) {
	w.failed.Add(1)
	w.onFail()
	w.log.Error("audit write failed", slog.String("decision", r.Decision), slog.String("provider", r.Provider),
		slog.String("key", r.Key), slog.String("error", why))
}

// Run writes queued records until ctx ends, then flushes what is queued
// (bounded by the per-write timeout) and returns nil.
func (w *AuditWriter) Run(ctx context.Context) error {
	for {
		select {
		case r := <-w.ch:
			w.write(context.Background(), r)
		case <-ctx.Done():
			for {
				select {
				case r := <-w.ch:
					w.write(context.Background(), r)
				default:
					return nil
				}
			}
		}
	}
}

func (w *AuditWriter) write(ctx context.Context, r event.AuditRecord) {
	b, err := json.Marshal(r)
	if err != nil {
		w.lost(r, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	if _, err := w.js.Publish(ctx, r.AuditSubject(), b); err != nil {
		w.lost(r, err.Error())
	}
}
