package jetstream

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

var _ consumer.GrantsIndex = (*Effects)(nil)

// maxGrantScan bounds one HasGrant: how many messages of the subject,
// stored since the event, it reads before giving up.
const maxGrantScan = 4096

// codeNoMessageFound is JetStream's "no message found" (JSNoMessageFoundErr).
const codeNoMessageFound = 10037

// HasGrant implements consumer.GrantsIndex: whether GRANTS holds a message
// on subject with Nats-Msg-Id key, stored at or after since. It walks the
// subject's messages from since, one STREAM.MSG.GET each (answered by the
// stream leader, so a message just published is seen; a direct get may be
// answered by a follower that is behind). Subjects rendered from a
// template with {subject} hold one subject's events of one type, so the
// walk is short; after maxGrantScan messages it answers false, which a
// watermark rule reads as stale for an event older than its mark. Errors
// are ErrUnavailable when the stream does not answer.
func (e *Effects) HasGrant(ctx context.Context, subject, key string, since time.Time) (bool, error) {
	req := msgGetRequest{NextFor: subject, Seq: 1}
	if !since.IsZero() {
		t := since.UTC()
		req.Seq, req.StartTime = 0, &t
	}
	for range maxGrantScan {
		seq, hdr, found, err := e.nextMsg(ctx, req)
		if err != nil {
			return false, classify(fmt.Sprintf("look up %s in %s", key, StreamGrants), err)
		}
		if !found {
			return false, nil
		}
		h, err := nats.DecodeHeadersMsg(hdr)
		if err == nil && h.Get(nats.MsgIdHdr) == key {
			return true, nil
		}
		req = msgGetRequest{NextFor: subject, Seq: seq + 1}
	}
	return false, nil
}

// msgGetRequest is JetStream's STREAM.MSG.GET request (the fields used).
type msgGetRequest struct {
	Seq       uint64     `json:"seq,omitempty"`
	LastFor   string     `json:"last_by_subj,omitempty"`
	NextFor   string     `json:"next_by_subj,omitempty"`
	StartTime *time.Time `json:"start_time,omitempty"`
}

// nextMsg returns the sequence and header block of the first message
// req selects in GRANTS; found is false when there is none.
func (e *Effects) nextMsg(ctx context.Context, req msgGetRequest) (seq uint64, hdr []byte, found bool, err error) {
	body, err := json.Marshal(req)
	if err != nil {
		return 0, nil, false, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, storeTimeout)
		defer cancel()
	}
	msg, err := e.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+StreamGrants, body)
	if err != nil {
		return 0, nil, false, err
	}
	var resp struct {
		Error   *js.APIError `json:"error,omitempty"`
		Message *struct {
			Seq    uint64 `json:"seq"`
			Header []byte `json:"hdrs"`
		} `json:"message,omitempty"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return 0, nil, false, fmt.Errorf("read %s answer: %w", StreamGrants, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == codeNoMessageFound:
		return 0, nil, false, nil
	case resp.Error != nil:
		return 0, nil, false, fmt.Errorf("nats: %w", resp.Error)
	case resp.Message == nil:
		return 0, nil, false, fmt.Errorf("read %s answer: no message and no error", StreamGrants)
	}
	return resp.Message.Seq, resp.Message.Header, true, nil
}
