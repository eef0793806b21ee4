package consumer

import (
	"context"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"

	"github.com/hookgate/hookgate/event"
)

// Rule is how one provider's events are applied.
type Rule struct {
	// Watermark: apply only events newer than the subject's watermark
	// (or equal with an unseen key). Otherwise every distinct key applies.
	Watermark bool
	// OneAccount: every event of the rule has the same account (the
	// config takes it from no header and no JSON field). See
	// SequencedTemplate.
	OneAccount bool
	// Effects run in order (forward first); all must succeed.
	Effects []Effect
}

// GrantsEffect publishes the original body to the subject rendered from a
// template ({provider}, {account}, {subject}, {type}), with Nats-Msg-Id =
// key so a repeat after a crash is a duplicate, not a second message.
type GrantsEffect struct {
	Template string
	Grants   Grants
}

// Apply implements Effect.
func (g GrantsEffect) Apply(ctx context.Context, ev Event) error {
	subj := RenderSubject(g.Template, ev)
	if _, err := g.Grants.PublishGrant(ctx, subj, ev.Key, ev.Header, ev.Body); err != nil {
		return fmt.Errorf("publish %s: %w", subj, err)
	}
	return nil
}

// RenderSubject fills a publish template. Outside values are encoded as
// tokens so they cannot change the subject's shape; the type's dots become
// subject levels.
func RenderSubject(tmpl string, ev Event) string {
	s := renderSubject(tmpl, ev)
	if len(s) <= event.MaxSubject {
		return s
	}
	// Too long to publish (see event.MaxSubject): the template's start up
	// to its first outside value, then a digest of the whole. {provider}
	// (a config name, [a-z0-9_-]+) is kept, so the event stays under its
	// provider's subjects (grants.<provider>.>, the natural filter of a
	// service that wants one provider's events; before stop 42 it went to
	// grants.=H<sha256>, which no such filter sees: audit 42).
	prefix := templateLiteralStart(tmpl)
	if rest, ok := strings.CutPrefix(tmpl[len(prefix):], "{provider}"); ok {
		prefix += ev.Provider + templateLiteralStart(rest)
	}
	return event.Bounded(s, prefix, event.MaxSubject)
}

// templateLiteralStart is tmpl's start up to its first placeholder.
func templateLiteralStart(tmpl string) string {
	i := strings.IndexByte(tmpl, '{')
	if i < 0 {
		return tmpl
	}
	return tmpl[:i]
}

func renderSubject(tmpl string, ev Event) string {
	// A scan rather than a strings.Replacer: one per event cost more than
	// the rest of the rendering.
	var b strings.Builder
	b.Grow(len(tmpl) + len(ev.Provider) + len(ev.Account) + len(ev.Subject) + len(ev.Type))
	for {
		i := strings.IndexByte(tmpl, '{')
		if i < 0 {
			b.WriteString(tmpl)
			return b.String()
		}
		b.WriteString(tmpl[:i])
		rest := tmpl[i:]
		switch {
		case strings.HasPrefix(rest, "{provider}"):
			b.WriteString(ev.Provider)
			tmpl = rest[len("{provider}"):]
		case strings.HasPrefix(rest, "{account}"):
			b.WriteString(event.Token(ev.Account))
			tmpl = rest[len("{account}"):]
		case strings.HasPrefix(rest, "{subject}"):
			b.WriteString(event.Token(ev.Subject))
			tmpl = rest[len("{subject}"):]
		case strings.HasPrefix(rest, "{type}"):
			b.WriteString(event.Tokens(ev.Type))
			tmpl = rest[len("{type}"):]
		default:
			b.WriteByte('{')
			tmpl = rest[1:]
		}
	}
}

// MarkKey is the WATERMARKS key of an event's subject: provider, account
// and subject tokens, or, past event.MaxKey, the provider and a digest of
// the whole (two levels: no three-level key can be it).
func MarkKey(ev Event) string {
	return event.Bounded(ev.Provider+"."+event.Token(ev.Account)+"."+event.Token(ev.Subject), ev.Provider+".", event.MaxKey)
}

// KeyShards is how many leases share the events without a subject (under
// ordering none) of one provider, whatever their account: a constant of
// the WATERMARKS layout (every instance must pick the same entry for a
// key), large enough that subject-less events rarely queue behind each
// other in Run (which runs one event per lease at a time) and a slow event
// holds up few others.
const KeyShards = 1024

// KeyShardToken is the second level of the key-shard entries
// (<provider>.=K.<n>). No account token can be it: tokens escape = as =3D
// and write a byte as = and two hex digits.
const KeyShardToken = "=K"

// LeaseKey is the WATERMARKS entry whose lease an event's effects run
// under: its subject's mark or, without a subject, one of KeyShards
// entries by key (two deliveries of one key meet there). It reads only
// Provider, Account, Subject and Key.
func LeaseKey(ev Event) string {
	if ev.Subject != "" {
		return MarkKey(ev)
	}
	return ev.Provider + "." + KeyShardToken + "." + strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(ev.Key))%KeyShards), 10)
}
