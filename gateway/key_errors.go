package gateway

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNoEventID is wrapped by DeriveKey's error when a provider with
// fallback: reject sends a request without an event id. It maps to HTTP
// 400; the message lists the sources tried, which come from the config and
// are safe to show the sender.
//
// The other key error, ErrBadJSON, is declared with the JSON parser.
var ErrNoEventID = errors.New("no event id")

// maxSourceInMessage caps how much of each configured source name an error
// message repeats, so a long pointer cannot bloat a 400 body.
const maxSourceInMessage = 64

func noEventIDError(sources []Source) error {
	if len(sources) == 0 {
		return fmt.Errorf("%w: no event_id sources are configured and fallback is reject", ErrNoEventID)
	}
	names := make([]string, len(sources))
	for i, s := range sources {
		name := s.String()
		if len(name) > maxSourceInMessage {
			name = name[:maxSourceInMessage] + "..."
		}
		names[i] = name
	}
	return fmt.Errorf("%w: none of %s is present (empty counts as absent) and fallback is reject",
		ErrNoEventID, strings.Join(names, ", "))
}
