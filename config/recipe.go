package config

import (
	"strings"
)

// KeyRecipe describes, in a line, what builds p's idempotency keys: the
// event id sources (the scheme's default filled in by Load), the account
// sources, the fallback and its fields. Two configs with the same recipe
// give the same key to the same request; a change means a sender's retry
// of an event accepted before it gets a new key, and applies again. It
// holds no secret. Header names are written in lower case (they match
// case-insensitively).
func (p Provider) KeyRecipe() string {
	src := func(s string) string {
		if name, ok := strings.CutPrefix(s, "header:"); ok {
			return "header:" + strings.ToLower(name)
		}
		return s
	}
	ids := make([]string, len(p.EventID))
	for i, s := range p.EventID {
		ids[i] = src(s)
	}
	var b strings.Builder
	b.WriteString("event_id=[" + strings.Join(ids, " ") + "]")
	b.WriteString(" account=[header:" + strings.ToLower(p.Account.Header) + " json:" + p.Account.JSON + " value:" + p.Account.Value + "]")
	b.WriteString(" fallback=" + p.Fallback)
	if p.Fallback == FallbackFields {
		b.WriteString(" key_fields=[" + strings.Join(p.KeyFields, " ") + "]")
	}
	return b.String()
}
