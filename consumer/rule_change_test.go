package consumer_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
)

// Events applied under a watermark rule that published per subject are
// remembered in GRANTS only. A provider changed to ordering none together
// with its publish template (or publishing turned off) renders other
// GRANTS subjects: an operator's replay must still find them applied
// through the subject's mark, not apply and forward them again (a replay
// audit, stop 39: "3 applied", the receiver's count 4 -> 7, GRANTS with
// two messages of one key).
func TestRuleChangeToNoneWithAnotherTemplateFindsEarlierEvents(t *testing.T) {
	env := jstest.Start(t, "")
	ctx := t.Context()
	for _, e := range []ev{
		{"k-old", "G-1", "2026-11-30T10:00:00Z", "application.submitted"},
		{"k-mid", "G-1", "2026-11-30T10:30:00Z", "application.reviewed"},
		{"k-new", "G-1", "2026-11-30T11:00:00Z", "application.approved"},
	} {
		store(t, env, e)
	}
	start(t, env, newProcessor(env, "a", true, &auditLog{}), 1)
	waitSettled(t, env)
	if n := len(grants(t, env)); n != 3 {
		t.Fatalf("setup: GRANTS holds %d messages, want 3", n)
	}

	fx := jetstream.NewEffects(env.Conn)
	changed := func(effects ...consumer.Effect) *consumer.Processor {
		rules := map[string]consumer.Rule{"grants": {Watermark: false, OneAccount: true, Effects: effects}}
		return consumer.NewProcessor(rules, env.Marks, env.Applied, fx, &auditLog{}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, consumer.Options{
			Owner: "op", MaxDeliver: 3, Backoff: []time.Duration{50 * time.Millisecond}, LeaseTTL: time.Second, GrantsIndex: fx,
			Actor: "operator",
		})
	}
	event := func(key, occurred, typ string) consumer.Event {
		return consumer.Event{Key: key, Provider: "grants", Account: "default", Subject: "G-1", Type: typ,
			OccurredRaw: occurred, ReceivedAt: time.Now().Add(-time.Minute)}
	}
	for name, proc := range map[string]*consumer.Processor{
		"publish off":      changed(),
		"another template": changed(consumer.GrantsEffect{Template: "grants.{provider}.{type}.{subject}", Grants: fx}),
		"no subject in it": changed(consumer.GrantsEffect{Template: "grants.{provider}.{type}", Grants: fx}),
	} {
		t.Run(name, func(t *testing.T) {
			for _, ev := range []consumer.Event{
				event("k-old", "2026-11-30T10:00:00Z", "application.submitted"),
				event("k-mid", "2026-11-30T10:30:00Z", "application.reviewed"),
				event("k-new", "2026-11-30T11:00:00Z", "application.approved"),
			} {
				if got, err := proc.Judge(ctx, ev, 0); err != nil || got.Decision != consumer.AlreadyApplied {
					t.Errorf("Judge(%s) = %+v, %v; want already-applied", ev.Key, got, err)
				}
				if out := proc.ProcessOnce(ctx, ev, 1); out.Decision != consumer.AlreadyApplied {
					t.Errorf("ProcessOnce(%s) = %+v; want already-applied", ev.Key, out)
				}
			}
		})
	}
	if n := len(grants(t, env)); n != 3 {
		t.Fatalf("GRANTS holds %d messages after the replays, want still 3", n)
	}
}
