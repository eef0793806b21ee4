package jetstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// StoredMsg is one message read back from a stream.
type StoredMsg struct {
	Seq     uint64
	Subject string
	Time    time.Time // when the stream stored it
	Header  nats.Header
	Body    []byte
}

// Range selects messages of a stream. Zero fields select everything.
type Range struct {
	Filter  string    // subject filter, e.g. webhooks.grants.>
	FromSeq uint64    // first sequence
	ToSeq   uint64    // last sequence, inclusive
	Since   time.Time // stored at or after
	Until   time.Time // stored at or before
}

// ErrStop, returned by a Read callback, ends the read without error.
var ErrStop = errors.New("stop reading")

// Read calls fn for each message of stream in r, oldest first, up to the
// stream's last message at the time of the call (messages stored while
// reading are not included, so a replay cannot chase its own tail). total
// is the number of messages the read expects to visit (at most), for a
// progress display.
//
// It reads with an ephemeral consumer of its own (unacknowledged, in
// memory, one replica: on the stream's leader), one batch at a time, and
// re-creates it from the next sequence when it is lost (the leader's node
// died, it was deleted) or a delivery is missing. A read that gets no
// message for readStall, fn's time not counted, fails with ErrUnavailable.
// (nats.go's ordered consumer, used before, sometimes never pulled again
// after re-creating its consumer on a new stream leader: a CI run's
// replay stopped at seq 256 of 3000 and gave up after readStall.)
func Read(ctx context.Context, c *Conn, stream string, r Range, fn func(m StoredMsg, total uint64) error) error {
	s, err := c.JS.Stream(ctx, stream)
	if err != nil {
		return classify("stream "+stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return classify("stream "+stream, err)
	}
	last := info.State.LastSeq
	if r.ToSeq > 0 && r.ToSeq < last {
		last = r.ToSeq
	}
	if info.State.Msgs == 0 || last < r.FromSeq {
		return nil
	}
	rd := &reader{c: c, stream: stream, r: r}
	cons, err := rd.open(ctx)
	if err != nil {
		return classify("read "+stream, err)
	}
	defer func() { rd.drop(cons) }()
	total := cons.CachedInfo().NumPending
	if total == 0 {
		return nil
	}
	progress := time.Now()
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Since(progress) > readStall {
			return fmt.Errorf("read %s: no message for %s although some are pending: %w", stream, readStall, ErrUnavailable)
		}
		if cons == nil {
			if cons, err = rd.open(ctx); err != nil {
				if errors.Is(err, js.ErrStreamNotFound) {
					return classify("read "+stream, err)
				}
				pause(ctx, pullPause)
				continue
			}
		}
		if st := c.JS.Conn().Status(); st != nats.CONNECTED {
			if st == nats.CLOSED {
				return classify("read "+stream, nats.ErrConnectionClosed)
			}
			// Fetch leaves its inbox subscribed when the pull's publish
			// fails (see Source.pull).
			pause(ctx, pullPause)
			continue
		}
		b, err := cons.Fetch(readBatch, js.FetchMaxWait(pullExpiry))
		got, gap := 0, false
		if err == nil {
			for msg := range b.Messages() {
				// The batch is on the client already: a cancelled read
				// must not go through the rest of it (review R).
				if ctx.Err() != nil {
					return ctx.Err()
				}
				meta, merr := msg.Metadata()
				if merr != nil {
					return merr
				}
				if meta.Sequence.Consumer != rd.delivered+1 {
					// A delivery went missing: start again after the last
					// one read.
					gap = true
					break
				}
				got++
				rd.delivered, rd.next = meta.Sequence.Consumer, meta.Sequence.Stream+1
				seq := meta.Sequence.Stream
				if seq > last || (!r.Until.IsZero() && meta.Timestamp.After(r.Until)) {
					return nil
				}
				// Started by sequence, --since still selects: skip the
				// older ones, but not the end-of-range check below.
				if r.FromSeq == 0 || r.Since.IsZero() || !meta.Timestamp.Before(r.Since) {
					err := fn(StoredMsg{Seq: seq, Subject: msg.Subject(), Time: meta.Timestamp, Header: msg.Headers(), Body: msg.Data()}, total)
					if errors.Is(err, ErrStop) {
						return nil
					}
					if err != nil {
						return err
					}
				}
				if meta.NumPending == 0 || seq == last {
					return nil
				}
				progress = time.Now()
			}
			err = b.Error()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if gap {
			rd.drop(cons)
			cons = nil
			continue
		}
		if got > 0 && err == nil {
			continue
		}
		// A pull that brought nothing, or failed: done if nothing is left
		// (the last ones were removed meanwhile); else wait for the
		// consumer's leader, or start a new consumer when this one is lost
		// or skipped a delivery.
		ictx, icancel := context.WithTimeout(ctx, readInfoWait)
		ci, ierr := cons.Info(ictx)
		icancel()
		switch {
		case ierr == nil && ci.NumPending == 0 && ci.Delivered.Consumer == rd.delivered:
			return nil
		case ierr == nil && ci.Delivered.Consumer == rd.delivered:
			awaitPullResponder(ctx, c.JS.Conn(), pullSubject(stream, ci.Name), pullExpiry)
		default:
			rd.drop(cons)
			cons = nil
		}
	}
}

// reader holds where Read is, to re-create its consumer from there.
type reader struct {
	c         *Conn
	stream    string
	r         Range
	delivered uint64 // the current consumer's last delivery read
	next      uint64 // the stream sequence to read next; 0: none read yet
}

// open creates a consumer delivering from rd.next (the range's start
// before the first message) and waits for its leader to take pulls.
func (rd *reader) open(ctx context.Context) (js.Consumer, error) {
	cfg := js.ConsumerConfig{
		Description:       "hookgate: read",
		AckPolicy:         js.AckNonePolicy,
		DeliverPolicy:     js.DeliverAllPolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: readInactive,
	}
	if rd.r.Filter != "" {
		cfg.FilterSubjects = []string{rd.r.Filter}
	}
	switch {
	case rd.next > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = js.DeliverByStartSequencePolicy, rd.next
	case rd.r.FromSeq > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = js.DeliverByStartSequencePolicy, rd.r.FromSeq
	case !rd.r.Since.IsZero():
		cfg.DeliverPolicy, cfg.OptStartTime = js.DeliverByStartTimePolicy, &rd.r.Since
	}
	cons, err := rd.c.JS.CreateConsumer(ctx, rd.stream, cfg)
	if err != nil {
		return nil, err
	}
	rd.delivered = 0
	awaitPullResponder(ctx, rd.c.JS.Conn(), pullSubject(rd.stream, cons.CachedInfo().Name), pullExpiry)
	return cons, nil
}

// drop deletes a consumer Read no longer uses, briefly: one whose node is
// lost goes by its inactive threshold.
func (rd *reader) drop(cons js.Consumer) {
	if cons == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), readInfoWait)
	defer cancel()
	_ = rd.c.JS.DeleteConsumer(ctx, rd.stream, cons.CachedInfo().Name)
}

// readBatch is how many messages one of Read's pulls asks for; readPoll
// bounds its questions to a consumer that brought nothing; readInactive
// is how long the server keeps a reader's consumer nobody pulls from;
// readStall how long Read waits in all without a message (a stream
// leader's election takes seconds) before it gives up.
const (
	readBatch    = 256
	readInfoWait = 2 * time.Second
	readInactive = time.Minute
	readStall    = 60 * time.Second
)

// GetMsg returns one message of a stream by sequence; js.ErrMsgNotFound
// (wrapped) when there is none.
func GetMsg(ctx context.Context, c *Conn, stream string, seq uint64) (StoredMsg, error) {
	s, err := c.JS.Stream(ctx, stream)
	if err != nil {
		return StoredMsg{}, classify("stream "+stream, err)
	}
	m, err := s.GetMsg(ctx, seq)
	if errors.Is(err, js.ErrMsgNotFound) {
		return StoredMsg{}, fmt.Errorf("%s has no message %d: %w", stream, seq, ErrNotFound)
	}
	if err != nil {
		return StoredMsg{}, classify("get "+stream, err)
	}
	return StoredMsg{Seq: m.Sequence, Subject: m.Subject, Time: m.Time, Header: m.Header, Body: m.Data}, nil
}

// DeleteMsg removes one message (DLQ letters after a re-feed).
func DeleteMsg(ctx context.Context, c *Conn, stream string, seq uint64) error {
	s, err := c.JS.Stream(ctx, stream)
	if err != nil {
		return classify("stream "+stream, err)
	}
	if err := s.DeleteMsg(ctx, seq); err != nil {
		return classify(fmt.Sprintf("delete %s %d", stream, seq), err)
	}
	return nil
}

// ErrNotFound: no such message.
var ErrNotFound = errors.New("not found")
