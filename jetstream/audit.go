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
// and returns nil. Records are published asynchronously in batches of up
// to 256 with one wait for their acks, so auditing costs the gateway a
// fraction of a synchronous publish per request.
func (w *AuditWriter) Run(ctx context.Context) error {
	batch := make([]event.AuditRecord, 0, 256)
	for {
		select {
		case r := <-w.ch:
			batch = append(batch[:0], r)
		drain:
			for len(batch) < cap(batch) {
				select {
				case r := <-w.ch:
					batch = append(batch, r)
				default:
					break drain
				}
			}
			w.write(batch)
		case <-ctx.Done():
			for {
				batch = batch[:0]
			rest:
				for len(batch) < cap(batch) {
					select {
					case r := <-w.ch:
						batch = append(batch, r)
					default:
						break rest
					}
				}
				if len(batch) == 0 {
					return nil
				}
				w.write(batch)
			}
		}
	}
}

func (w *AuditWriter) write(batch []event.AuditRecord) {
	futures := make([]js.PubAckFuture, len(batch))
	for i, r := range batch {
		b, err := json.Marshal(r)
		if err == nil {
			futures[i], err = w.js.PublishAsync(r.AuditSubject(), b)
		}
		if err != nil {
			w.lost(r, err.Error())
		}
	}
	timeout := time.NewTimer(w.timeout)
	defer timeout.Stop()
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
		case err := <-f.Err():
			w.lost(batch[i], err.Error())
		case <-timeout.C:
			for _, r := range batch[i:] {
				w.lost(r, "no ack within "+w.timeout.String())
			}
			return
		}
	}
}
