package event

import (
	"strconv"
	"strings"
)

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
	// HeaderDlqResponse is an excerpt of a forward receiver's refusal
	// (one line, credentials cut out), on a letter whose last failure was
	// an answer other than 2xx. Kept off AUDIT and logs: it may echo the
	// payload.
	HeaderDlqResponse = "Hookgate-Dlq-Response"
	// HeaderStoredSeq is the event's WEBHOOKS sequence, on DLQ letters.
	HeaderStoredSeq = "Hookgate-Stored-Seq"
	HeaderPrefix    = "Hookgate-"
)

// WebhookSubject is the WEBHOOKS subject of an event.
func WebhookSubject(provider, account string) string {
	return "webhooks." + provider + "." + Token(account)
}

// HeaderQuoted lists (comma-separated) the Hookgate-* headers of a stored
// event whose value is Go-quoted (see HeaderValue). Absent on events
// stored before it, whose values are read as they are.
const HeaderQuoted = "Hookgate-Quoted"

// HeaderValue encodes an extracted value (account, subject, occurred_at,
// type) for its Hookgate-* header so that it reads back exactly: a NATS
// header cannot carry a control character such as CR or LF, and loses
// leading and trailing white space. Such a value is stored Go-quoted
// (strconv.Quote), and quoted says so (the header is then listed in
// HeaderQuoted); any other value as it is.
func HeaderValue(v string) (stored string, quoted bool) {
	if v == "" {
		return v, false
	}
	quote := v[0] == ' ' || v[0] == '\t' || v[len(v)-1] == ' ' || v[len(v)-1] == '\t'
	for i := 0; i < len(v) && !quote; i++ {
		quote = v[i] < 0x20 || v[i] == 0x7f
	}
	if !quote {
		return v, false
	}
	return strconv.Quote(v), true
}

// ExtractedValue reads the extracted value a stored event's header name
// holds: unquoted when HeaderQuoted lists it, else as it is.
func ExtractedValue(h map[string][]string, name string) string {
	v := first(h[name])
	for _, q := range strings.Split(first(h[HeaderQuoted]), ",") {
		if q == name {
			if u, err := strconv.Unquote(v); err == nil {
				return u
			}
		}
	}
	return v
}

func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}
