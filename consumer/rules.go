package consumer

import (
	"context"
	"fmt"
	"strings"

	"github.com/hookgate/hookgate/event"
)

// Rule is how one provider's events are applied.
type Rule struct {
	// Watermark: apply only events newer than the subject's watermark
	// (or equal with an unseen key). Otherwise every distinct key applies.
	Watermark bool
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
	r := strings.NewReplacer(
		"{provider}", ev.Provider,
		"{account}", event.Token(ev.Account),
		"{subject}", event.Token(ev.Subject),
		"{type}", event.Tokens(ev.Type),
	)
	return r.Replace(tmpl)
}

// MarkKey is the WATERMARKS key of an event's subject.
func MarkKey(ev Event) string {
	return ev.Provider + "." + event.Token(ev.Account) + "." + event.Token(ev.Subject)
}
