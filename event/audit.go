package event

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Decisions recorded in AUDIT.
const (
	DecisionAccepted     = "accepted"
	DecisionDuplicate    = "duplicate"
	DecisionRejected     = "rejected"
	DecisionApplied      = "applied"
	DecisionStale        = "stale"
	DecisionDeadLettered = "dead-lettered"
	DecisionReplayed     = "replayed"
	DecisionRedelivered  = "redelivered"
	DecisionDlqRefed     = "dlq-refed"
	DecisionDlqRemoved   = "dlq-removed"
	// DecisionWatermarkPruned: an operator's `watermarks prune` removed
	// a subject's mark (hookgate's addition to the contract's list).
	DecisionWatermarkPruned = "watermark-pruned"
	// DecisionExpiredUnapplied: stored events that left WEBHOOKS at its
	// max_age before the consumer delivered them (an addition too).
	DecisionExpiredUnapplied = "expired-unapplied"
	// DecisionRestored: an operator's `restore` recreated the streams
	// from a backup (an addition too); its reason names the backup.
	DecisionRestored = "restored"
)

// Actors that make decisions.
const (
	ActorGateway  = "gateway"
	ActorConsumer = "consumer"
	ActorOperator = "operator"
)

// AuditRecord is one decision, stored as one line of JSON on
// audit.<decision>.<provider>. It never holds a body or a secret.
type AuditRecord struct {
	Time       time.Time `json:"time"`
	Decision   string    `json:"decision"`
	Provider   string    `json:"provider"`
	Account    string    `json:"account"`
	Key        string    `json:"key"`
	Seq        uint64    `json:"seq"`
	Status     int       `json:"status"`
	Reason     string    `json:"reason"`
	Actor      string    `json:"actor"`
	Suppressed int       `json:"suppressed"`
}

// AuditSubject is where r is appended.
func (r AuditRecord) AuditSubject() string {
	return "audit." + Token(r.Decision) + "." + Token(r.Provider)
}

// AuditRecords decodes the body of one AUDIT message: one or more records,
// one JSON object per line (the writer packs the records of a burst that
// share a subject into one message). Blank lines are skipped.
func AuditRecords(body []byte) ([]AuditRecord, error) {
	var out []AuditRecord
	for len(body) > 0 {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r AuditRecord
		if err := json.Unmarshal(line, &r); err != nil {
			return out, fmt.Errorf("audit record %d: %w", len(out)+1, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// ExpiredReason is the reason of an expired-unapplied record: the
// WEBHOOKS sequences first to last. ExpiredRange reads it back.
func ExpiredReason(first, last uint64) string {
	if first == last {
		return fmt.Sprintf("WEBHOOKS seq %d (1 event) left the stream at its max_age before it was applied", first)
	}
	return fmt.Sprintf("WEBHOOKS seq %d-%d (%d events) left the stream at its max_age before they were applied", first, last, last-first+1)
}

// ExpiredRange returns the sequences an ExpiredReason names.
func ExpiredRange(reason string) (first, last uint64, ok bool) {
	if _, err := fmt.Sscanf(reason, "WEBHOOKS seq %d-%d ", &first, &last); err == nil && first > 0 && last >= first {
		return first, last, true
	}
	if _, err := fmt.Sscanf(reason, "WEBHOOKS seq %d (1 event) ", &first); err == nil && first > 0 {
		return first, first, true
	}
	return 0, 0, false
}
