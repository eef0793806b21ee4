package jetstream

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
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
	// Last is, for a message Read visits, the last sequence that read
	// may reach (the stream's last at its start, or Range.ToSeq): with a
	// subject filter the sequences it visits are sparse, so the first
	// one plus the count does not say how wide the last one is.
	Last uint64
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
// It reads with a seqReader (a consumer of its own, re-created where it
// stopped when lost: a stream leader's failover), up to readBatch messages
// at a time, and fails with ErrUnavailable after readStall without a
// message, fn's time not counted. (nats.go's ordered consumer, used
// before, sometimes never pulled again after re-creating its consumer on a
// new stream leader: a CI run's replay stopped at seq 256 of 3000 and gave
// up after readStall.)
func Read(ctx context.Context, c *Conn, stream string, r Range, fn func(m StoredMsg, total uint64) error) error {
	var info *js.StreamInfo
	err := rideOutLeader(ctx, "stream "+stream, readStall, func(ctx context.Context) error {
		s, err := c.JS.Stream(ctx, stream)
		if errors.Is(err, js.ErrStreamNotFound) {
			// Not an outage (it read "jetstream unavailable: stream not
			// found": audit 42, dlq list on a store no serve had set up).
			return fmt.Errorf("stream %s does not exist (serve creates it at its first start): %w", stream, err)
		}
		if err != nil {
			return classify("stream "+stream, err)
		}
		info = s.CachedInfo()
		return nil
	})
	if err != nil {
		return err
	}
	last := info.State.LastSeq
	if r.ToSeq > 0 && r.ToSeq < last {
		last = r.ToSeq
	}
	if info.State.Msgs == 0 || last < r.FromSeq {
		return nil
	}
	cfg := js.ConsumerConfig{Description: "hookgate: read", DeliverPolicy: js.DeliverAllPolicy, InactiveThreshold: readInactive}
	if r.Filter != "" {
		cfg.FilterSubjects = []string{r.Filter}
	}
	switch {
	case r.FromSeq > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = js.DeliverByStartSequencePolicy, r.FromSeq
	case !r.Since.IsZero():
		cfg.DeliverPolicy, cfg.OptStartTime = js.DeliverByStartTimePolicy, &r.Since
	}
	rd := newSeqReader(c, stream, cfg, readStall)
	defer rd.close()
	for {
		msgs, done, err := rd.batch(ctx, readBatch)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		total := rd.total
		for _, msg := range msgs {
			// The batch is on the client already: a cancelled read must
			// not go through the rest of it (review R).
			if ctx.Err() != nil {
				return ctx.Err()
			}
			meta := msg.Meta
			seq := meta.Sequence.Stream
			if seq > last || (!r.Until.IsZero() && meta.Timestamp.After(r.Until)) {
				return nil
			}
			// Started by sequence, --since still selects: skip the older
			// ones, but not the end-of-range check below.
			if r.FromSeq == 0 || r.Since.IsZero() || !meta.Timestamp.Before(r.Since) {
				err := fn(StoredMsg{Seq: seq, Subject: msg.Subject, Time: meta.Timestamp, Header: msg.Header, Body: msg.Data, Last: last}, total)
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
		}
	}
}

// rideOutLeader runs op, a first request of an operator's read (a stream's
// or bucket's info: what, e.g. "stream DLQ"), with retryTransient for up
// to budget: a request that reached a stream leader just killed is never
// answered, and one sent during the election is answered "not available"
// or not at all, so a single one waited for the caller's whole deadline
// (`dlq list`: 10 minutes, though a new leader was elected 4-5 s after the
// kill) or failed after nats.go's 5 s (replay), while the reads after it
// ride out the election (seqReader). Given up, the error says the leader
// was missing, not only that the last attempt timed out.
func rideOutLeader(ctx context.Context, what string, budget time.Duration, op func(context.Context) error) error {
	start := time.Now()
	// No responders is no election: no server takes the JetStream API
	// there (JetStream off, a wrong account or domain). Said at once, not
	// after a minute as "no leader" (found by review).
	var noJetStream error
	err := retryTransient(ctx, budget, func(ctx context.Context) error {
		err := op(ctx)
		if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, js.ErrNoStreamResponse) || errors.Is(err, js.ErrJetStreamNotEnabled) {
			noJetStream = err
			return nil
		}
		return err
	})
	if noJetStream != nil {
		return noJetStream
	}
	if err != nil && transient(err) && ctx.Err() == nil && time.Since(start) >= budget {
		return fmt.Errorf("%s had no leader for %.0f s (last attempt: %w)", what, budget.Seconds(), err)
	}
	return err
}

// readBatch is how many messages one of Read's pulls asks for;
// readInfoWait bounds a reader's questions to a consumer that brought
// nothing; readInactive is how long the server keeps a reader's consumer
// nobody pulls from; readStall how long Read waits in all without a
// message (a stream leader's election takes seconds) before it gives up.
const (
	readBatch    = 256
	readInfoWait = 2 * time.Second
	readInactive = time.Minute
	readStall    = 60 * time.Second
)

// LastSeq returns a stream's last sequence (0 when it holds none, or does
// not exist).
func LastSeq(ctx context.Context, c *Conn, stream string) (uint64, error) {
	s, err := c.JS.Stream(ctx, stream)
	if errors.Is(err, js.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, classify("stream "+stream, err)
	}
	return s.CachedInfo().State.LastSeq, nil
}

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
		if deleteFoundNothing(err) {
			return fmt.Errorf("delete %s %d: %w (%w)", stream, seq, ErrNotFound, err)
		}
		if ae := deleteAPIError(err); ae != nil {
			// nats.go keeps only the server's text: the code read back,
			// so that an election's "no leader" (10008) is told apart
			// from a refusal (found by review).
			err = withAPIError{err, ae}
		}
		return classify(fmt.Sprintf("delete %s %d", stream, seq), err)
	}
	return nil
}

// deleteAPIErrorText is how nats.go writes the server's answer to a
// refused delete into ErrMsgDeleteUnsuccessful's text.
var deleteAPIErrorText = regexp.MustCompile(`code=(\d+) err_code=(\d+) description=(.*)`)

// deleteAPIError reads the server's APIError back from a refused
// delete's error (nil when there is none to read).
func deleteAPIError(err error) *js.APIError {
	if !errors.Is(err, js.ErrMsgDeleteUnsuccessful) {
		return nil
	}
	m := deleteAPIErrorText.FindStringSubmatch(err.Error())
	if m == nil {
		return nil
	}
	code, err1 := strconv.Atoi(m[1])
	errCode, err2 := strconv.Atoi(m[2])
	if err1 != nil || err2 != nil {
		return nil
	}
	return &js.APIError{Code: code, ErrorCode: js.ErrorCode(errCode), Description: m[3]}
}

// withAPIError is err with the server's APIError read back from its
// text: errors.As finds it; the text stays err's (errors.Join would add
// a line).
type withAPIError struct {
	err error
	api *js.APIError
}

func (e withAPIError) Error() string   { return e.err.Error() }
func (e withAPIError) Unwrap() []error { return []error{e.err, e.api} }

// ReadMsg is GetMsg for an operator command: it rides out a stream
// leader's election (rideOutLeader, up to readStall) as Read does, where
// a single request sent to a leader just killed went unanswered for the
// CLI's whole 10 minutes ('dlq show SEQ'). Not for serve's request paths,
// which have deadlines of their own.
func ReadMsg(ctx context.Context, c *Conn, stream string, seq uint64) (StoredMsg, error) {
	var m StoredMsg
	err := rideOutLeader(ctx, "stream "+stream, readStall, func(ctx context.Context) (err error) {
		m, err = GetMsg(ctx, c, stream, seq)
		return err
	})
	return m, err
}

// RemoveMsg is DeleteMsg for an operator command, riding out a leader's
// election as ReadMsg does. It reads the message first: one not there is
// ErrNotFound at once. A delete tried again after one that may have acted
// (sent, and left unanswered) may find the message gone by that first
// one: not found then counts as removed (gone either way; the first
// attempt, or another command meanwhile, removed it). After attempts that
// cannot have acted (no server took them up, or the answer was the
// election's "no leader"), not found is not found.
//
// A refusal the server gave (a stream that denies deletes) is not tried
// again: a leader answered it.
func RemoveMsg(ctx context.Context, c *Conn, stream string, seq uint64) error {
	if _, err := ReadMsg(ctx, c, stream, seq); err != nil {
		return err
	}
	mayHaveActed := false
	var refused error
	err := rideOutLeader(ctx, "stream "+stream, readStall, func(ctx context.Context) error {
		err := DeleteMsg(ctx, c, stream, seq)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrNotFound):
			if mayHaveActed {
				return nil
			}
			return err
		case errors.Is(err, js.ErrMsgDeleteUnsuccessful) && !transient(err):
			refused = err
			return nil
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
			mayHaveActed = true
		}
		return err
	})
	if refused != nil {
		return refused
	}
	return err
}

// codeMsgDeleteFailed is nats-server's JSStreamMsgDeleteFailedF: a delete
// refused, for a message that is not there too.
const codeMsgDeleteFailed js.ErrorCode = 10057

// deleteFoundNothing reports whether a delete failed because the message
// is not there: deleted already ("no message found"; another operator
// command removed a letter meanwhile) or past the stream's last sequence
// ("stream store EOF"). Taken for an outage before (review BH: `dlq
// replay` said "jetstream unavailable" for a letter a replay had removed).
// nats.go keeps only the server's error text (ErrMsgDeleteUnsuccessful
// with it, not the APIError), so its code and description are read there.
//
// A message deleted already between others (not the stream's first or
// last) is another code, 10043 ("sequence N not found"): that too said
// "jetstream unavailable" (two dlq replays at once, an operator tools
// audit, stop 40).
func deleteFoundNothing(err error) bool {
	ae := deleteAPIError(err)
	if ae == nil {
		return false
	}
	d := strings.ToLower(ae.Description)
	switch ae.ErrorCode {
	case codeSequenceNotFound:
		return strings.Contains(d, "not found")
	case codeMsgDeleteFailed:
		return strings.Contains(d, "no message found") || strings.Contains(d, "not found") || strings.Contains(d, "store eof")
	}
	return false
}

// codeSequenceNotFound is nats-server's JSSequenceNotFoundErrF.
const codeSequenceNotFound js.ErrorCode = 10043

// ErrNotFound: no such message.
var ErrNotFound = errors.New("not found")
