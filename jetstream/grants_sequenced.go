package jetstream

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hookgate/hookgate/consumer"
	js "github.com/nats-io/nats.go/jetstream"
)

var _ consumer.SequencedGrants = (*Effects)(nil)

// PublishGrantAfter implements consumer.SequencedGrants: PublishGrant with
// Nats-Expected-Last-Subject-Sequence = last. The server checks it before
// storing (the stream leader, on a cluster), so two holders of one subject
// cannot both append after the same message. A refusal wraps
// consumer.ErrGrantMoved; a retry after a lost answer whose first attempt
// was stored is refused the same way (or answered duplicate, with the
// first one's sequence), and the caller finds its message by reading.
func (e *Effects) PublishGrantAfter(ctx context.Context, subject, key string, last uint64, header http.Header, body []byte) (uint64, error) {
	h := grantHeader(header)
	h.Set(js.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
	seq, err := e.publishGrant(ctx, subject, key, h, body)
	if apiCode(err) == codeWrongLastSequence {
		return 0, fmt.Errorf("publish %s after %d: %w: %w", subject, last, consumer.ErrGrantMoved, err)
	}
	return seq, storeTrouble(err)
}

// LastGrant implements consumer.SequencedGrants, reading from the stream
// leader (a message just published is seen).
func (e *Effects) LastGrant(ctx context.Context, subject string) (uint64, error) {
	seq, _, found, err := e.nextMsg(ctx, msgGetRequest{LastFor: subject})
	if err != nil {
		return 0, storeTrouble(classify("read last of "+subject+" in "+StreamGrants, err))
	}
	if !found {
		return 0, nil
	}
	return seq, nil
}

// ScanGrants implements consumer.SequencedGrants (walkGrants). It is
// called when a publish was refused, so it reads only what holders
// published and did not commit (or, for a subject the mark has no
// sequence for, a horizon's worth).
func (e *Effects) ScanGrants(ctx context.Context, subject string, after uint64, since time.Time, upTo uint64, fn func(consumer.GrantMsg)) error {
	if after != 0 {
		since = time.Time{} // the sequence decides
	}
	if since.IsZero() && after >= upTo {
		return nil
	}
	return storeTrouble(e.walkGrants(ctx, subject, after+1, since, 0, func(m consumer.GrantMsg) bool {
		if m.Seq > upTo {
			return false
		}
		fn(m)
		return true
	}))
}
