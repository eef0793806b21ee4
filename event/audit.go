package event

import "time"

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
)

// Actors that make decisions.
const (
	ActorGateway  = "gateway"
	ActorConsumer = "consumer"
	ActorOperator = "operator"
)

// AuditRecord is one decision, stored as JSON on audit.<decision>.<provider>.
// It never holds a body or a secret.
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
