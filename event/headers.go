package event

import "strconv"

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

// HeaderValue encodes an extracted value (account, subject, occurred_at,
// type) for its Hookgate-* header so that it reads back exactly: a NATS
// header cannot carry a control character such as CR or LF, and loses
// leading and trailing white space. Such a value, and one that starts
// with a double quote (so the form stays unambiguous), is stored Go-quoted
// (strconv.Quote); any other value as it is.
func HeaderValue(v string) string {
	if v == "" {
		return v
	}
	quote := v[0] == '"' || v[0] == ' ' || v[0] == '\t' || v[len(v)-1] == ' ' || v[len(v)-1] == '\t'
	for i := 0; i < len(v) && !quote; i++ {
		quote = v[i] < 0x20 || v[i] == 0x7f
	}
	if !quote {
		return v
	}
	return strconv.Quote(v)
}

// FromHeaderValue reverses HeaderValue. A value that does not unquote
// (written by a version before HeaderValue) is returned as it is.
func FromHeaderValue(s string) string {
	if len(s) < 2 || s[0] != '"' {
		return s
	}
	if v, err := strconv.Unquote(s); err == nil {
		return v
	}
	return s
}
