package jetstream

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
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
	cfg := js.OrderedConsumerConfig{DeliverPolicy: js.DeliverAllPolicy}
	if r.Filter != "" {
		cfg.FilterSubjects = []string{r.Filter}
	}
	switch {
	case r.FromSeq > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = js.DeliverByStartSequencePolicy, r.FromSeq
	case !r.Since.IsZero():
		cfg.DeliverPolicy, cfg.OptStartTime = js.DeliverByStartTimePolicy, &r.Since
	}
	cons, err := c.JS.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return classify("read "+stream, err)
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		return classify("read "+stream, err)
	}
	if ci.NumPending == 0 {
		return nil
	}
	total := ci.NumPending
	// One ordered consumer for the whole read, pulled as a stream of
	// messages: it re-creates its server-side consumer from the last
	// sequence it delivered when that one is lost (the stream's leader's
	// node died), where Fetch made a new consumer per batch and, when
	// re-creating it failed, retried for ever, ignoring ctx.
	it, err := cons.Messages(js.PullMaxMessages(256), js.PullExpiry(pullExpiry))
	if err != nil {
		return classify("read "+stream, err)
	}
	defer it.Stop()
	// Re-creating the lost consumer retries until the iterator stops, ctx
	// or not: stop it when ctx ends, or after readStall without a message
	// (the time fn takes not counted).
	defer context.AfterFunc(ctx, it.Stop)()
	var stalled atomic.Bool
	watchdog := time.AfterFunc(readStall, func() { stalled.Store(true); it.Stop() })
	defer watchdog.Stop()
	for {
		// Longer than two of the pull's heartbeats: a shorter wait made a
		// new heartbeat check each time, so a lost consumer was never
		// noticed (and the read stalled until readStall; CI).
		msg, err := it.Next(js.NextMaxWait(readPoll))
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case stalled.Load():
				return fmt.Errorf("read %s: no message for %s although some are pending: %w", stream, readStall, ErrUnavailable)
			case errors.Is(err, js.ErrMsgIteratorClosed):
				return classify("read "+stream, err)
			}
			// Nothing for readPoll: done if nothing is left to read (the
			// last ones were removed meanwhile), else wait on.
			ictx, icancel := context.WithTimeout(ctx, 2*time.Second)
			ci, ierr := cons.Info(ictx)
			icancel()
			if ierr == nil && ci.NumPending == 0 && ci.NumAckPending == 0 {
				return nil
			}
			continue
		}
		watchdog.Stop()
		meta, err := msg.Metadata()
		if err != nil {
			return err
		}
		seq := meta.Sequence.Stream
		if seq > last || (!r.Until.IsZero() && meta.Timestamp.After(r.Until)) {
			return nil
		}
		// Started by sequence, --since still selects: skip the older
		// ones, but not the end-of-range check below.
		if r.FromSeq == 0 || r.Since.IsZero() || !meta.Timestamp.Before(r.Since) {
			err = fn(StoredMsg{Seq: seq, Subject: msg.Subject(), Time: meta.Timestamp, Header: msg.Headers(), Body: msg.Data()}, total)
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
		watchdog.Reset(readStall)
	}
}

// readPoll is how long Read waits for a message before it looks whether
// any is left (over two of the pull's heartbeats, see Read); readStall
// how long it waits in all without one (a stream leader's election takes
// seconds) before it gives up.
const (
	readPoll  = 2*pullExpiry + time.Second
	readStall = 60 * time.Second
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
