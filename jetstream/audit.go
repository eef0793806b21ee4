package jetstream

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookgate/hookgate/consumer"
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
	// stopBy (Unix ns; 0 until the stop) is when the flush at shutdown
	// gives up on what is left.
	stopBy atomic.Int64
	// stopped: Run has returned or is flushing its last records; a record
	// made now is counted lost, not left in the queue.
	stopped atomic.Bool
	// queueing is read-held by Record from its look at stopped until its
	// record is queued; the stop takes it to set stopped, so no record is
	// queued after the flush's last look (one could be, neither written
	// nor counted; review 9).
	queueing sync.RWMutex
	// lines bounds the "audit write failed" lines: a store that stopped
	// writing loses every record, and each was an error line (44 in a
	// millisecond in a cluster audit, stop 39). Every loss is counted in
	// onFail's metric still.
	lines *consumer.LineLimit
}

// auditLostLinesPerSecond is how many "audit write failed" lines a
// second are written; the next one says how many it stands for.
const auditLostLinesPerSecond = 5

// NewAuditWriter returns a writer with room for buffer pending records.
// onFail (may be nil) is called once per lost record, e.g. to count it.
func NewAuditWriter(c *Conn, logger *slog.Logger, buffer int, onFail func()) *AuditWriter {
	return newAuditWriter(c.NC, logger, buffer, onFail, 5*time.Second, 4000)
}

// newAuditWriter: timeout bounds the wait for an ack; maxPending is
// nats.go's bound on unanswered async publishes.
func newAuditWriter(nc *nats.Conn, logger *slog.Logger, buffer int, onFail func(), timeout time.Duration, maxPending int) *AuditWriter {
	if buffer <= 0 {
		buffer = 4096
	}
	if onFail == nil {
		onFail = func() {}
	}
	// Its own JetStream handle, whose async publishes time out: a publish
	// nobody answers (a request lost in a leader change, an R3 leader
	// without quorum) otherwise stays pending in nats.go until a
	// reconnect, and once maxPending of them pile up every later audit
	// write stalls and fails, though AUDIT is healthy again.
	jsc, err := js.New(nc, js.WithPublishAsyncTimeout(timeout), js.WithPublishAsyncMaxPending(maxPending))
	if err != nil {
		panic(err) // only for invalid options, which these are not
	}
	return &AuditWriter{js: jsc, log: logger, ch: make(chan event.AuditRecord, buffer), onFail: onFail, timeout: timeout,
		lines: consumer.NewLineLimit(auditLostLinesPerSecond)}
}

// auditStopFlush bounds the flush at shutdown, all batches together: with
// AUDIT unavailable, a few seconds of trying is all a stop can spare
// before the process manager's kill.
const auditStopFlush = 5 * time.Second

// Record queues r. It never blocks.
func (w *AuditWriter) Record(r event.AuditRecord) {
	w.queueing.RLock()
	defer w.queueing.RUnlock()
	if w.stopped.Load() {
		w.lost(r, "audit writer stopped")
		return
	}
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
	line := func(suppressed int) {
		w.log.Error("audit write failed", slog.String("decision", r.Decision), slog.String("provider", r.Provider),
			slog.String("key", r.Key), slog.String("error", why), slog.Int("suppressed", suppressed))
	}
	// A burst's tail is told at the end of its second (audit 42: the
	// lines stood for half the records lost).
	if ok, held := w.lines.AllowOrLater("", time.Now(), line); ok {
		line(held)
	}
}

// Run writes queued records until ctx ends, then flushes what is queued
// and returns nil. Records are collected for up to auditLinger after the
// first one (or until 256 are queued), packed into one message per subject
// (see pack) and published asynchronously with one wait for the acks, so
// auditing costs the gateway a fraction of a synchronous publish per
// request.
func (w *AuditWriter) Run(ctx context.Context) error {
	batch := make([]event.AuditRecord, 0, 256)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for {
		select {
		case r := <-w.ch:
			batch = w.takeQueued(append(batch[:0], r))
			linger.Reset(auditLinger)
		fill:
			for len(batch) < cap(batch) {
				select {
				case r := <-w.ch:
					batch = w.takeQueued(append(batch, r))
				case <-linger.C:
					break fill
				case <-ctx.Done():
					w.stop() // short retries from here on
					break fill
				}
			}
			linger.Stop()
			w.write(ctx, batch)
		case <-ctx.Done():
			w.stop()
			w.queueing.Lock()
			w.stopped.Store(true)
			w.queueing.Unlock()
			for {
				if batch = w.takeQueued(batch[:0]); len(batch) == 0 {
					w.lines.Flush() // the held-back lost lines' tail
					return nil
				}
				if time.Now().UnixNano() >= w.stopBy.Load() {
					w.lostAtStop(batch)
					continue
				}
				w.write(ctx, batch)
			}
		}
	}
}

func (w *AuditWriter) stop() {
	w.stopBy.CompareAndSwap(0, time.Now().Add(auditStopFlush).UnixNano())
}

// lostAtStop counts records the stop's flush had no time left for, with
// one log line per batch instead of one per record.
func (w *AuditWriter) lostAtStop(batch []event.AuditRecord) {
	for range batch {
		w.failed.Add(1)
		w.onFail()
	}
	w.log.Error("audit records lost at shutdown", slog.Int("records", len(batch)),
		slog.String("error", "AUDIT did not take them within "+auditStopFlush.String()))
}

// takeQueued appends what is queued now to batch, up to its capacity,
// without waiting. Queued records go in before a stop or the linger is
// looked at: a select over several ready cases picks one at random, so a
// writer already stopping would otherwise split a burst.
func (w *AuditWriter) takeQueued(batch []event.AuditRecord) []event.AuditRecord {
	for len(batch) < cap(batch) {
		select {
		case r := <-w.ch:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// auditLinger is how long the writer waits for more records after the
// first of a batch. Under load each wait packs dozens of records into one
// stored message instead of a handful (9815 AUDIT messages for 67331
// requests without it); at a trickle it delays a record by this much, and
// never an answer.
const auditLinger = 5 * time.Millisecond

// auditRetry bounds how long a batch is retried, longer than a stream
// leader election: records are only counted lost after it.
const auditRetry = 20 * time.Second

// maxAuditMessage bounds the body of one packed AUDIT message, far below
// the smallest MaxMsgSize AUDIT is given.
const maxAuditMessage = 32 << 10

// auditMsg is one AUDIT message: records sharing a subject, one JSON line
// each, appended under one Nats-Msg-Id.
type auditMsg struct {
	subject string
	recs    []event.AuditRecord
	body    []byte
	id      string
}

// pack groups a batch into messages per subject, in the order subjects first
// appear and records arrived. Packing is what makes auditing cheap under
// load: one stored message per subject and burst instead of one per request
// (measured in the README's "Performance").
func (w *AuditWriter) pack(batch []event.AuditRecord) []*auditMsg {
	type group struct{ decision, provider string }
	var msgs []*auditMsg
	open := map[group]*auditMsg{}
	var line []byte
	for _, r := range batch {
		var err error
		if line, err = r.AppendJSON(line[:0]); err != nil {
			w.lost(r, asNotConnected(err).Error())
			continue
		}
		g := group{r.Decision, r.Provider}
		m := open[g]
		if m == nil || len(m.body)+len(line)+1 > maxAuditMessage {
			// A retry after a lost ack must not append the records twice.
			m = &auditMsg{subject: r.AuditSubject(), id: nuid.Next(), body: make([]byte, 0, 4<<10)}
			open[g] = m
			msgs = append(msgs, m)
		}
		m.recs = append(m.recs, r)
		m.body = append(append(m.body, line...), '\n')
	}
	return msgs
}

func (w *AuditWriter) write(ctx context.Context, batch []event.AuditRecord) {
	todo := w.pack(batch)
	deadline := time.Now().Add(auditRetry)
	delay := 100 * time.Millisecond
	var noStreamSince time.Time // every failure since: nothing takes audit.*
	for len(todo) > 0 {
		if ctx.Err() != nil {
			w.stop() // also when the stop came while a batch was taken
		}
		if by := w.stopBy.Load(); by != 0 {
			// A stop cuts a write under way short too.
			deadline = time.Unix(0, min(deadline.UnixNano(), by))
		}
		futures := make([]js.PubAckFuture, len(todo))
		var lastErr string
		noStream := true // every failure of this attempt: no stream answered
		for i, m := range todo {
			msg := &nats.Msg{Subject: m.subject, Data: m.body, Header: nats.Header{nats.MsgIdHdr: []string{m.id}}}
			f, err := w.js.PublishMsgAsync(msg)
			if err != nil {
				lastErr = asNotConnected(err).Error()
				noStream = noStream && noStreamThere(err)
				continue
			}
			futures[i] = f
		}
		var failed []*auditMsg
		timeout := time.NewTimer(max(min(w.timeout, time.Until(deadline)), time.Millisecond))
		for i, f := range futures {
			if f == nil {
				failed = append(failed, todo[i])
				continue
			}
			select {
			case <-f.Ok():
			case err := <-f.Err():
				lastErr = asNotConnected(err).Error()
				noStream = noStream && noStreamThere(err)
				failed = append(failed, todo[i])
			case <-timeout.C:
				lastErr = "no ack within " + w.timeout.String()
				noStream = false
				failed = append(failed, todo[i:]...)
				timeout.Reset(0)
				goto done
			}
		}
	done:
		timeout.Stop()
		switch {
		case len(failed) == 0 || !noStream:
			noStreamSince = time.Time{}
		case noStreamSince.IsZero():
			noStreamSince = time.Now()
		case time.Since(noStreamSince) >= auditNoStreamFor:
			// No stream takes audit.* (AUDIT deleted, or not made yet):
			// an election answers late, not "no responders". Counted and
			// told now, not after auditRetry with every record behind
			// this batch waiting its turn (audit 42: the metric read 0
			// for 15 s with AUDIT gone).
			deadline = time.Now()
			lastErr = "no stream takes " + todo[0].subject + " (is AUDIT missing?): " + lastErr
		}
		if len(failed) > 0 && time.Now().Add(delay).After(deadline) {
			for _, m := range failed {
				for _, r := range m.recs {
					w.lost(r, lastErr)
				}
			}
			return
		}
		if len(failed) > 0 {
			time.Sleep(max(min(delay, time.Until(deadline)), 0))
			delay = min(2*delay, time.Second)
		}
		todo = failed
	}
}

// auditNoStreamFor is how long a batch is retried while every publish is
// answered "no responders" before its records are counted lost.
const auditNoStreamFor = 2 * time.Second

// noStreamThere reports whether err says no stream took the subject.
func noStreamThere(err error) bool {
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, js.ErrNoStreamResponse)
}
