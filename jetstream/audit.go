package jetstream

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/hookgate/hookgate/event"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// AuditWriter appends decisions to AUDIT in the background, so an audit
// write never delays an answer. A failed write is retried for a while
// (a leader election) with the same Nats-Msg-Id; a record that still
// cannot be written, or finds the buffer full, is counted and logged.
//
// Record is safe for concurrent use; Run must be called once.
type AuditWriter struct {
	js      js.JetStream
	log     *slog.Logger
	ch      chan event.AuditRecord
	failed  atomic.Uint64
	onFail  func()
	timeout time.Duration
	// stopping shortens the retries while Run flushes at shutdown.
	stopping atomic.Bool
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
			w.stopping.Store(true)
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

// auditRetry bounds how long a batch is retried, longer than a stream
// leader election: records are only counted lost after it.
const auditRetry = 20 * time.Second

func (w *AuditWriter) write(batch []event.AuditRecord) {
	type pending struct {
		rec event.AuditRecord
		id  string
		b   []byte
	}
	todo := make([]pending, 0, len(batch))
	for _, r := range batch {
		b, err := json.Marshal(r)
		if err != nil {
			w.lost(r, err.Error())
			continue
		}
		// A retry after a lost ack must not append the record twice.
		todo = append(todo, pending{rec: r, id: nuid.Next(), b: b})
	}
	retry := auditRetry
	if w.stopping.Load() {
		retry = 2 * time.Second
	}
	deadline := time.Now().Add(retry)
	delay := 100 * time.Millisecond
	for {
		futures := make([]js.PubAckFuture, len(todo))
		var lastErr string
		for i, p := range todo {
			msg := &nats.Msg{Subject: p.rec.AuditSubject(), Data: p.b, Header: nats.Header{nats.MsgIdHdr: []string{p.id}}}
			f, err := w.js.PublishMsgAsync(msg)
			if err != nil {
				lastErr = err.Error()
				continue
			}
			futures[i] = f
		}
		var failed []pending
		timeout := time.NewTimer(w.timeout)
		for i, f := range futures {
			if f == nil {
				failed = append(failed, todo[i])
				continue
			}
			select {
			case <-f.Ok():
			case err := <-f.Err():
				lastErr = err.Error()
				failed = append(failed, todo[i])
			case <-timeout.C:
				lastErr = "no ack within " + w.timeout.String()
				failed = append(failed, todo[i:]...)
				timeout.Reset(0)
				goto done
			}
		}
	done:
		timeout.Stop()
		if len(failed) == 0 {
			return
		}
		if time.Now().Add(delay).After(deadline) {
			for _, p := range failed {
				w.lost(p.rec, lastErr)
			}
			return
		}
		time.Sleep(delay)
		delay = min(2*delay, time.Second)
		todo = failed
	}
}
