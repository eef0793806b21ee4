package jetstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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
// on subject with Nats-Msg-Id key, stored at or after since (walkGrants).
// Subjects rendered from a template with {subject} hold one subject's
// events of one type, so the walk is short; after maxGrantScan messages it
// answers false, which a watermark rule reads as stale for an event older
// than its mark.
func (e *Effects) HasGrant(ctx context.Context, subject, key string, since time.Time) (bool, error) {
	found := false
	err := e.walkGrants(ctx, subject, 1, since, maxGrantScan, func(m consumer.GrantMsg) bool {
		found = m.Key == key
		return !found
	})
	return found, err
}

// walkGrants calls fn for subject's messages in GRANTS, in order, from
// sequence from (or, with since set, from the first stored at or after
// since), until fn returns false, none is left, or limit were read (0: no
// limit). One STREAM.MSG.GET each, answered by the stream leader, so a
// message just published is seen (a direct get may be answered by a
// follower that is behind). Errors are ErrUnavailable when the stream
// does not answer.
func (e *Effects) walkGrants(ctx context.Context, subject string, from uint64, since time.Time, limit int, fn func(consumer.GrantMsg) bool) error {
	req := msgGetRequest{NextFor: subject, Seq: from}
	if !since.IsZero() {
		t := since.UTC()
		req.Seq, req.StartTime = 0, &t
	}
	for n := 0; limit == 0 || n < limit; n++ {
		seq, hdr, found, err := e.nextMsg(ctx, req)
		if err != nil {
			return classify("read "+subject+" in "+StreamGrants, err)
		}
		if !found {
			return nil
		}
		h, err := nats.DecodeHeadersMsg(hdr)
		if err != nil {
			h = nats.Header{}
		}
		if !fn(consumer.GrantMsg{Seq: seq, Key: h.Get(nats.MsgIdHdr), Header: http.Header(h)}) {
			return nil
		}
		req = msgGetRequest{NextFor: subject, Seq: seq + 1}
	}
	return nil
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
