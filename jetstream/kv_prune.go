package jetstream

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// MarkEntry is one WATERMARKS entry as ReadMarks finds it.
type MarkEntry struct {
	Key     string // the KV key: <provider>.<account>.<subject> in tokens
	Rev     uint64 // its revision (the bucket stream's sequence)
	Written time.Time
	Mark    consumer.Mark
	Deleted bool  // a delete or purge marker: the zero Mark
	Err     error // the entry could not be read as a Mark
}

// ReadMarks calls fn for every entry of the WATERMARKS bucket (only
// provider's when provider is not ""), in the order they were last
// written. Entries written while it reads are not visited.
func ReadMarks(ctx context.Context, c *Conn, provider string, fn func(MarkEntry) error) error {
	pre := kvSubjectPrefix(BucketMarks)
	r := Range{}
	if provider != "" {
		r.Filter = pre + provider + ".>"
	}
	return Read(ctx, c, "KV_"+BucketMarks, r, func(m StoredMsg, _ uint64) error {
		key := strings.TrimPrefix(m.Subject, pre)
		e := MarkEntry{Key: key, Rev: m.Seq, Written: m.Time}
		e.Mark, e.Deleted, e.Err = decodeMark(key, m.Header, m.Body)
		return fn(e)
	})
}

// PruneMark removes the WATERMARKS entry key if it is still at revision
// rev, leaving no marker: the subject is gone from the bucket (and from
// the server's subject index), as if it had never had a mark. It is the
// purge of key's messages before rev+1, so a write since (a lease, a
// commit: a newer revision) survives and pruned is false. Safe beside
// running consumers: their compare-and-set on the revision they cached
// fails, and they read the entry again (absent). A ctx that ends once
// the purge is sent does not cut it short: its answer is waited for.
func PruneMark(ctx context.Context, c *Conn, key string, rev uint64) (pruned bool, err error) {
	stream := "KV_" + BucketMarks
	req, err := json.Marshal(struct {
		Seq    uint64 `json:"seq"`
		Filter string `json:"filter"`
	}{rev + 1, kvSubjectPrefix(BucketMarks) + key})
	if err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	// Once sent, the purge is waited for whatever ctx does (storeTimeout
	// bounds it): an interrupt that cut the wait short left a mark purged
	// that its caller took for not pruned, neither counted nor audited
	// (review AW).
	resp, err := request(context.WithoutCancel(ctx), c.NC, &nats.Msg{Subject: "$JS.API.STREAM.PURGE." + stream, Data: req}, storeTimeout)
	if err != nil {
		return false, classify("prune watermark "+key, err)
	}
	var answer struct {
		Error   *js.APIError `json:"error"`
		Success bool         `json:"success"`
		Purged  uint64       `json:"purged"`
	}
	if err := json.Unmarshal(resp.Data, &answer); err != nil {
		return false, fmt.Errorf("prune watermark %s: unreadable answer: %w", key, err)
	}
	if answer.Error != nil {
		return false, fmt.Errorf("prune watermark %s: nats: %w", key, answer.Error)
	}
	if !answer.Success {
		return false, fmt.Errorf("prune watermark %s: the server did not confirm the purge", key)
	}
	return answer.Purged > 0, nil
}

// KeptLimits is how long the server keeps what a mark may still decide
// events against: WEBHOOKS' MaxAge (0: for good) and APPLIED's TTL, as
// serve provisioned them from its config (an operator command's config
// may be a copy edited for the next rollout). Exists is false for a
// stream or bucket not created yet.
type KeptLimits struct {
	WebhooksExists bool
	WebhooksMaxAge time.Duration
	AppliedTTL     time.Duration
	// MarksExist and DLQExists: the WATERMARKS bucket and the DLQ
	// stream (none before a serve with the consumer role ran).
	MarksExist, DLQExists bool
}

// ReadKeptLimits reads KeptLimits from the server.
func ReadKeptLimits(ctx context.Context, c *Conn) (KeptLimits, error) {
	ws, err := streamStatus(ctx, c, StreamWebhooks)
	if err != nil {
		return KeptLimits{}, err
	}
	applied, err := bucketStatus(ctx, c, BucketApplied)
	if err != nil {
		return KeptLimits{}, err
	}
	marks, err := bucketStatus(ctx, c, BucketMarks)
	if err != nil {
		return KeptLimits{}, err
	}
	dlq, err := streamStatus(ctx, c, StreamDLQ)
	if err != nil {
		return KeptLimits{}, err
	}
	return KeptLimits{WebhooksExists: ws.Exists, WebhooksMaxAge: ws.MaxAge, AppliedTTL: applied.TTL,
		MarksExist: marks.Exists, DLQExists: dlq.Exists}, nil
}
