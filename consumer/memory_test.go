package consumer_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream/jstest"
)

// A watermark rule that publishes per subject remembers applied keys by
// its GRANTS messages: APPLIED is never written for it, and an event its
// mark has passed is still told apart (already-applied vs stale) on a
// real JetStream. Ordering none keeps APPLIED.
func TestGrantsAreTheAppliedMemory(t *testing.T) {
	env := jstest.Start(t, "")
	ctx := t.Context()
	for _, e := range []ev{
		{"k-old", "G-1", "2026-11-30T10:00:00Z", "application.submitted"},
		{"k-new", "G-1", "2026-11-30T11:00:00Z", "application.approved"},
	} {
		store(t, env, e)
	}
	start(t, env, newProcessor(env, "a", true, &auditLog{}), 1)
	waitSettled(t, env)
	if n := len(grants(t, env)); n != 2 {
		t.Fatalf("GRANTS holds %d messages, want both events", n)
	}
	for _, k := range []string{"k-old", "k-new"} {
		if seen, err := env.Applied.Seen(ctx, k); err != nil || seen {
			t.Errorf("APPLIED has %s (%v, %v): the watermark rule must not write it", k, seen, err)
		}
	}

	event := func(key, occurred, typ string) consumer.Event {
		return consumer.Event{Key: key, Provider: "grants", Account: "default", Subject: "G-1", Type: typ,
			OccurredRaw: occurred, ReceivedAt: time.Now()}
	}
	proc := newProcessor(env, "b", true, &auditLog{})
	for _, tc := range []struct {
		ev   consumer.Event
		want string
	}{
		// Older than the mark (11:00), gone from its keys: only GRANTS knows.
		{event("k-old", "2026-11-30T10:00:00Z", "application.submitted"), consumer.AlreadyApplied},
		{event("k-never", "2026-11-30T10:00:00Z", "application.submitted"), consumer.Stale},
		{event("k-new", "2026-11-30T11:00:00Z", "application.approved"), consumer.AlreadyApplied},
	} {
		got, err := proc.Judge(ctx, tc.ev, 0)
		if err != nil || got.Decision != tc.want {
			t.Errorf("Judge(%s) = %+v, %v; want %s", tc.ev.Key, got, err, tc.want)
		}
		if out := proc.ProcessOnce(ctx, tc.ev, 1); out.Decision != tc.want {
			t.Errorf("ProcessOnce(%s) = %+v; want %s", tc.ev.Key, out, tc.want)
		}
	}
	if n := len(grants(t, env)); n != 2 {
		t.Fatalf("GRANTS holds %d messages after the replays, want still 2", n)
	}

	none := newProcessor(env, "c", false, &auditLog{})
	k := event("k-none", "", "application.submitted")
	if out := none.ProcessOnce(ctx, k, 1); out.Decision != consumer.Applied {
		t.Fatalf("ordering none, first: %+v", out)
	}
	if seen, err := env.Applied.Seen(ctx, "k-none"); err != nil || !seen {
		t.Fatalf("ordering none: APPLIED has k-none = %v, %v; want true", seen, err)
	}
	// Still in APPLIED, its own memory: decided there, not "found in
	// GRANTS: its key is no longer in APPLIED" (review BH).
	if out := none.ProcessOnce(ctx, k, 1); out.Decision != consumer.AlreadyApplied || strings.Contains(out.Reason, "GRANTS") {
		t.Fatalf("ordering none, again: %+v; want already-applied from APPLIED", out)
	}
}
