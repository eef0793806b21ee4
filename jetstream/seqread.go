package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// seqReader reads a stream's messages in stream order, for Read, the
// trace scan and the key index's read-back, with an unacknowledged consumer
// of its own (in memory, one replica: on the stream's leader). It pulls on
// its own inbox and tells a delivery from the pull's status messages by
// its `$JS.ACK` reply subject. nats.go takes any message with a `Status`
// header and an empty body for a status of the pull: a stored event whose
// request carried a `Status` header is one when read headers only (the
// key index read back none past it, so the gateway stayed 503 after a
// restart), and an empty one always. The consumer is re-created from the
// next sequence when it is lost (the leader's node died, it was deleted,
// it went inactive) or skips a delivery. Not safe for concurrent use.
type seqReader struct {
	c      *Conn
	stream string
	// base is the consumer's configuration but for where it starts.
	base js.ConsumerConfig
	// stall: one batch fails with ErrUnavailable after this long without
	// a message (so the caller's own time between batches never counts).
	stall time.Duration
	// maxBatch: the most a pull asks for; lowered to the server's limit
	// when it refuses a pull as larger ("Exceeded MaxRequestBatch of N":
	// max_request_batch on an external server).
	maxBatch int

	next      uint64 // the first stream sequence not read; 0: none read yet
	name      string // the current consumer; "": none
	pending   uint64 // its messages pending when it was created
	total     uint64 // the first consumer's pending: what the read expects
	opened    bool   // a consumer was created
	delivered uint64 // its last delivery read
	sub       *nats.Subscription
	msgs      chan *nats.Msg // sub's
	inbox     string
	pulls     int
}

// seqMaxBatch bounds the messages one pull asks for.
const seqMaxBatch = 4096

// newSeqReader starts nothing: the first batch creates the consumer, from
// base's deliver policy.
func newSeqReader(c *Conn, stream string, base js.ConsumerConfig, stall time.Duration) *seqReader {
	base.AckPolicy = js.AckNonePolicy
	base.MemoryStorage = true
	base.Replicas = 1
	return &seqReader{c: c, stream: stream, base: base, stall: stall, maxBatch: seqMaxBatch}
}

// seqMsg is one delivery with its metadata.
type seqMsg struct {
	*nats.Msg
	Meta *nats.MsgMetadata
}

// batch returns the next messages, up to n, in stream order. done is true
// when none is left (the consumer has nothing pending beyond what was
// read). It waits for the consumer's leader and re-creates the consumer as
// needed; it fails when ctx ends, the connection is closed, the stream is
// gone, or nothing came for stall.
func (r *seqReader) batch(ctx context.Context, n int) (msgs []seqMsg, done bool, err error) {
	start := time.Now()
	for {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		if time.Since(start) > r.stall {
			return nil, false, fmt.Errorf("read %s: no message for %s although some are pending: %w", r.stream, r.stall, ErrUnavailable)
		}
		if r.name == "" {
			if err := r.open(ctx); err != nil {
				if errors.Is(err, js.ErrStreamNotFound) || errors.Is(err, nats.ErrConnectionClosed) {
					return nil, false, classify("read "+r.stream, err)
				}
				pause(ctx, pullPause)
				continue
			}
			if r.pending == 0 {
				return nil, true, nil
			}
		}
		if st := r.c.NC.Status(); st != nats.CONNECTED {
			if st == nats.CLOSED {
				return nil, false, classify("read "+r.stream, nats.ErrConnectionClosed)
			}
			pause(ctx, pullPause)
			continue
		}
		msgs, lost := r.pull(ctx, n)
		if lost {
			r.drop() // the next batch starts a new one after the last read
		}
		if len(msgs) > 0 {
			return msgs, false, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		if lost {
			continue
		}
		// A pull that brought nothing: done if nothing is left (the last
		// ones were removed meanwhile); else wait for the consumer's
		// leader, or start a new consumer when this one is lost.
		ictx, cancel := context.WithTimeout(ctx, readInfoWait)
		ci, err := r.c.JS.Consumer(ictx, r.stream, r.name)
		cancel()
		switch {
		case err == nil && ci.CachedInfo().NumPending == 0 && ci.CachedInfo().Delivered.Consumer == r.delivered:
			return nil, true, nil
		case err == nil && ci.CachedInfo().Delivered.Consumer == r.delivered:
			awaitPullResponder(ctx, r.c.NC, pullSubject(r.stream, r.name), pullExpiry)
		case errors.Is(err, js.ErrStreamNotFound):
			return nil, false, classify("read "+r.stream, err)
		default:
			r.drop()
		}
	}
}

// open creates a consumer delivering from r.next (base's start before the
// first message) and waits for its leader to take pulls.
func (r *seqReader) open(ctx context.Context) error {
	if r.sub == nil {
		// A channel: nats.go's NextMsg turns a message with an empty body
		// and `Status: 503` into ErrNoResponders, stored ones too. It holds
		// two whole batches (one of an earlier pull that brought more
		// after its consumer's last pending one); were it ever full, the
		// delivery dropped is a gap, and the reader starts again after the
		// last one read.
		r.inbox = r.c.NC.NewRespInbox()
		r.msgs = make(chan *nats.Msg, 2*seqMaxBatch+64)
		sub, err := r.c.NC.ChanSubscribe(r.inbox+".*", r.msgs)
		if err != nil {
			return err
		}
		r.sub = sub
	}
	cfg := r.base
	// Named here, so that a creation whose answer is lost (ctx ended, a
	// timeout) can still be deleted (review S).
	cfg.Name = nuid.Next()
	if r.next > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq, cfg.OptStartTime = js.DeliverByStartSequencePolicy, r.next, nil
	}
	// The creation's answer is awaited even when ctx ends meanwhile (up to
	// its own bound), so that the consumer can be deleted: one abandoned
	// may still be created after the delete sent behind it.
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	cons, err := r.c.JS.CreateConsumer(octx, r.stream, cfg)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
			r.forget(cfg.Name)
		}
		return err
	}
	info := cons.CachedInfo()
	r.name, r.pending, r.delivered = info.Name, info.NumPending, 0
	if !r.opened {
		r.total, r.opened = info.NumPending, true
	}
	awaitPullResponder(ctx, r.c.NC, pullSubject(r.stream, r.name), pullExpiry)
	return nil
}

// pull asks the consumer for up to n messages and returns those that came
// in order before the pull ended (its expiry, a status, n messages, the
// consumer's last pending one, or a second past its expiry with nothing:
// a lost pull). lost: the consumer
// skipped a delivery, or a status said it is gone.
func (r *seqReader) pull(ctx context.Context, n int) (msgs []seqMsg, lost bool) {
	n = min(n, r.maxBatch)
	r.pulls++
	reply := r.inbox + "." + strconv.Itoa(r.pulls)
	req := fmt.Appendf(nil, `{"batch":%d,"expires":%d}`, n, pullExpiry.Nanoseconds())
	if err := r.c.NC.PublishRequest(pullSubject(r.stream, r.name), reply, req); err != nil {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, pullExpiry+time.Second)
	defer cancel()
	for len(msgs) < n {
		var m *nats.Msg
		select {
		case m = <-r.msgs:
		case <-ctx.Done():
			return msgs, false
		}
		if !isDelivery(m) {
			if m.Subject != reply {
				continue // an earlier pull's
			}
			switch m.Header.Get("Status") {
			case "100":
				continue // a heartbeat or flow control
			case "409":
				// "Consumer Deleted", "Leadership Change", or a limit.
				desc := m.Header.Get("Description")
				if limit, ok := batchLimit(desc); ok {
					r.maxBatch = limit
				}
				return msgs, strings.Contains(strings.ToLower(desc), "deleted")
			}
			return msgs, false // 404, 408: the pull ended; 503: no leader
		}
		meta, err := m.Metadata()
		if err != nil || meta.Consumer != r.name || meta.Sequence.Consumer <= r.delivered {
			continue // an earlier consumer's, or one already read
		}
		if meta.Sequence.Consumer != r.delivered+1 {
			return msgs, true // a delivery went missing
		}
		r.delivered, r.next = meta.Sequence.Consumer, meta.Sequence.Stream+1
		msgs = append(msgs, seqMsg{Msg: m, Meta: meta})
		if meta.NumPending == 0 {
			// Nothing more now: the pull would wait out its expiry. What
			// it brings later (messages stored meanwhile) comes in order
			// before the next pull's.
			return msgs, false
		}
	}
	return msgs, false
}

// isDelivery tells a stored message from a status of a pull: a stored
// message always has its acknowledgement subject, whatever its headers and
// body (nats.go takes one with a Status header and no body for a status).
func isDelivery(m *nats.Msg) bool { return strings.HasPrefix(m.Reply, "$JS.ACK.") }

// batchLimit reads the server's limit from its refusal of a pull asking
// for more ("Exceeded MaxRequestBatch of 100").
func batchLimit(desc string) (int, bool) {
	const prefix = "Exceeded MaxRequestBatch of "
	if !strings.HasPrefix(desc, prefix) {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(desc[len(prefix):]))
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}

// drop deletes the current consumer, briefly: one whose node is lost goes
// by its inactive threshold.
func (r *seqReader) drop() {
	if r.name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), readInfoWait)
	defer cancel()
	_ = r.c.JS.DeleteConsumer(ctx, r.stream, r.name)
	r.name = ""
}

// forget deletes a consumer whose creation's answer did not come in time:
// the server may still create it, even after a delete sent behind the
// creation (its API requests are not handled in order).
// It tries for about half a second; past that the consumer goes by its
// inactive threshold.
func (r *seqReader) forget(name string) {
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), readInfoWait)
		err := r.c.JS.DeleteConsumer(ctx, r.stream, name)
		cancel()
		if !errors.Is(err, js.ErrConsumerNotFound) {
			return
		}
		pause(context.Background(), 100*time.Millisecond)
	}
}

// close drops the consumer and the inbox.
func (r *seqReader) close() {
	r.drop()
	if r.sub != nil {
		_ = r.sub.Unsubscribe()
	}
}
