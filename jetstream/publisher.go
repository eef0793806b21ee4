package jetstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hookgate/hookgate/event"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// Message is one event to store: subject, body and headers. The publisher
// adds the Nats-* headers it needs.
type Message struct {
	Subject string
	Key     string              // idempotency key: Nats-Msg-Id and the claim
	Header  map[string][]string // a nats.Header or http.Header will do
	Body    []byte
	// Deadline, when set, bounds Publish with its retries like a ctx
	// deadline would, without a timer of its own (the gateway sets it per
	// request; each attempt already has one).
	Deadline time.Time
	// TellOwnWrite: when an attempt's answer was lost and a retry is
	// answered duplicate, read the stored message to tell this call's own
	// write (then the result is new) from an earlier one, by the
	// Hookgate-Received-At header. The gateway sets it: the sender's answer
	// and the audit record say which it was.
	TellOwnWrite bool
	// RideOutReconnect: a publish refused while the connection reconnects
	// (it buffers nothing, see Connect) is tried again until the deadline,
	// as after a leader change. The consumer's effects set it (a refusal
	// was a counted attempt; review K); the gateway does not: a sender
	// gets its 503 at once instead of waiting out an outage.
	RideOutReconnect bool
}

// PublishResult says what JetStream did with a Message.
type PublishResult struct {
	// Duplicate: the key was stored before, within the horizon; nothing new
	// was stored.
	Duplicate bool
	// Seq is the stream sequence of the stored event (for a duplicate: of
	// the original).
	Seq uint64
}

// Publisher stores events exactly once per key over the dedup horizon.
//
// One message, one key: the event is published with Nats-Msg-Id = key to
// WEBHOOKS. Storing the event and claiming its key are then the same
// write, so no crash or failed publish can separate them. On a cluster
// WEBHOOKS's duplicate window is the whole dedup horizon: it survives
// restarts (the server rebuilds it from the messages still in the stream,
// and WEBHOOKS keeps them at least a horizon long and refuses deletes) and
// leader changes (every replica keeps it). On the embedded server the
// window is dedup.window and a KeyIndex in front holds the horizon. Measured alternative: an atomic batch
// of a TTL'd claim marker plus the event cost ~3 ms per event on an R1
// file store (the server stages each batch in its own fsynced store),
// 160x a plain publish; see the README's "How dedup works".
//
// Safe for concurrent use.
type Publisher struct {
	nc      *nats.Conn
	c       *Conn
	timeout time.Duration
}

// NewPublisher returns a publisher; timeout bounds each attempt's wait for
// an ack.
func NewPublisher(c *Conn, timeout time.Duration) *Publisher {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &Publisher{nc: c.NC, c: c, timeout: timeout}
}

// Publish stores m unless its key was stored within the horizon. It
// retries transient answers (leader change, "in process", too many open
// batches) until ctx ends. It returns ErrUnavailable, ErrStreamFull or
// ErrTooLarge (wrapped) when nothing was stored.
func (p *Publisher) Publish(ctx context.Context, m Message) (PublishResult, error) {
	if err := p.c.StoreFailure(); err != nil {
		// The store answers nothing any more (each publish would wait out
		// its deadline): the sender gets its 503 at once.
		return PublishResult{}, fmt.Errorf("publish %s: %w: %w", m.Subject, ErrUnavailable, err)
	}
	backoff := 20 * time.Millisecond
	ambiguous := false // an attempt failed in a way that may have stored m
	for {
		res, stream, err := p.publishOnce(ctx, m)
		if err == nil && res.Duplicate && ambiguous && m.TellOwnWrite {
			// The duplicate may be this call's own earlier attempt, whose
			// answer came too late: then m is new.
			res.Duplicate = !p.storedByThisCall(ctx, m, stream, res.Seq)
		}
		if err == nil || !(retryable(err) || m.RideOutReconnect && errors.Is(err, nats.ErrReconnectBufExceeded)) {
			return res, err
		}
		ambiguous = true
		if !m.Deadline.IsZero() && time.Now().Add(backoff).After(m.Deadline) {
			return PublishResult{}, classify("publish "+m.Subject, fmt.Errorf("%w (last error: %w)", context.DeadlineExceeded, err))
		}
		select {
		case <-ctx.Done():
			return PublishResult{}, classify("publish "+m.Subject, fmt.Errorf("%w (last error: %w)", ctx.Err(), err))
		case <-time.After(backoff):
		}
		if backoff < 500*time.Millisecond {
			backoff *= 2
		}
	}
}

func retryable(err error) bool {
	switch apiCode(err) {
	case codeDuplicateInProcess, codeWrongLastSeqConstant:
		// A clustered stream answers 10164 to a publish with an expected
		// last subject sequence while another write of that subject is in
		// flight (nats-server's checkMsgHeadersPreClusteredProposal): try
		// again once it landed; a real mismatch is 10071.
		return true
	case 0:
	default:
		return false
	}
	// A timeout may mean the write landed: retrying is safe because the
	// same Nats-Msg-Id makes the second attempt a duplicate, never a copy.
	return errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, js.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrConnectionReconnecting)
}

// storedByThisCall reports whether the message at seq is m as this call
// sent it: the same Hookgate-Received-At, which the gateway sets per
// request to the nanosecond. Without one, or when the message cannot be
// read within the call's time, it says no: the answer stays "duplicate".
func (p *Publisher) storedByThisCall(ctx context.Context, m Message, stream string, seq uint64) bool {
	at := nats.Header(m.Header).Get(event.HeaderReceivedAt)
	if at == "" || stream == "" {
		return false
	}
	limit := p.timeout
	if !m.Deadline.IsZero() {
		limit = min(limit, time.Until(m.Deadline))
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
	defer cancel()
	stored, err := GetMsg(ctx, p.c, stream, seq)
	return err == nil && stored.Header.Get(event.HeaderReceivedAt) == at
}

func (p *Publisher) publishOnce(ctx context.Context, m Message) (PublishResult, string, error) {
	timeout := p.timeout
	if !m.Deadline.IsZero() {
		timeout = min(timeout, time.Until(m.Deadline))
	}
	h := m.Header
	if h == nil {
		h = nats.Header{}
	}
	h[js.MsgIDHeader] = []string{m.Key}
	ack, err := storeMsg(ctx, p.nc, &nats.Msg{Subject: m.Subject, Header: h, Data: m.Body}, timeout)
	if err != nil {
		return PublishResult{}, "", fullHint(m.Subject, classify("publish "+m.Subject, err))
	}
	return PublishResult{Duplicate: ack.Duplicate, Seq: ack.Seq}, ack.Stream, nil
}
