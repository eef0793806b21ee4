package event

// Headers hookgate adds to a stored event (WEBHOOKS), and carries to GRANTS,
// DLQ and forwarded requests. Values are the raw extracted values, not
// tokens.
const (
	HeaderKey        = "Hookgate-Key"
	HeaderProvider   = "Hookgate-Provider"
	HeaderAccount    = "Hookgate-Account"
	HeaderReceivedAt = "Hookgate-Received-At" // RFC 3339 with nanoseconds, UTC
	HeaderSubject    = "Hookgate-Subject"
	HeaderOccurredAt = "Hookgate-Occurred-At"
	HeaderType       = "Hookgate-Type"

	HeaderDlqReason      = "Hookgate-Dlq-Reason"
	HeaderDlqDeliveries  = "Hookgate-Dlq-Deliveries"
	HeaderDlqPreviousSeq = "Hookgate-Dlq-Previous-Seq"
	// HeaderStoredSeq is the event's WEBHOOKS sequence, on DLQ letters.
	HeaderStoredSeq = "Hookgate-Stored-Seq"
	HeaderPrefix    = "Hookgate-"
)

// WebhookSubject is the WEBHOOKS subject of an event.
func WebhookSubject(provider, account string) string {
	return "webhooks." + provider + "." + Token(account)
}
