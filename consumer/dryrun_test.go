package consumer_test

import (
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream/jstest"
)

// A dry run says, event by event, what a run applying them in the same
// order decides: each event it judges applied counts for the ones after
// it. Judge alone reads the stores as they are and said "apply" for an
// event the real run then found stale (review V). Under both orderings,
// against the real run over the same events on a real JetStream.
func TestDryRunDecidesAsTheRunAfterIt(t *testing.T) {
	for _, watermark := range []bool{true, false} {
		t.Run(map[bool]string{true: "watermark", false: "none"}[watermark], func(t *testing.T) {
			env := jstest.Start(t, "")
			ctx := t.Context()
			event := func(key, subject, occurred string) consumer.Event {
				return consumer.Event{Key: key, Provider: "grants", Account: "default", Subject: subject, Type: "award.updated",
					OccurredRaw: occurred, ReceivedAt: time.Now()}
			}
			// Applied before the run: G-1's mark at 10:00.
			proc := newProcessor(env, "a", watermark, &auditLog{})
			if out := proc.ProcessOnce(ctx, event("k0", "G-1", "2026-11-30T10:00:00Z"), 1); out.Decision != consumer.Applied {
				t.Fatalf("setup: %+v", out)
			}
			evs := []consumer.Event{
				event("k-new", "G-1", "2026-11-30T12:00:00Z"),   // applies, moves the mark
				event("k-old", "G-1", "2026-11-30T11:00:00Z"),   // newer than the store's mark, older than the run's
				event("k-same", "G-1", "2026-11-30T12:00:00Z"),  // the mark's instant, another key
				event("k-same", "G-1", "2026-11-30T12:00:00Z"),  // stored twice: applied by the run already
				event("k0", "G-1", "2026-11-30T10:00:00Z"),      // applied before the run
				event("k-other", "G-2", "2026-11-30T09:00:00Z"), // another subject
			}
			dry := proc.NewDryRun()
			var said []string
			for _, ev := range evs {
				j, err := dry.Judge(ctx, ev, 0)
				if err != nil {
					t.Fatal(err)
				}
				said = append(said, j.Decision)
			}
			if m, _, err := env.Marks.Get(ctx, consumer.MarkKey(evs[0])); watermark && (err != nil || !m.At.Equal(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))) {
				t.Fatalf("the dry run changed G-1's mark: %+v, %v", m, err)
			}
			for i, ev := range evs {
				out := proc.ProcessOnce(ctx, ev, 1)
				if out.Decision != said[i] {
					t.Errorf("event %d (%s at %s): the dry run said %s, the run decided %s (%s)", i, ev.Key, ev.OccurredRaw, said[i], out.Decision, out.Reason)
				}
			}
			if watermark && said[1] != consumer.Stale {
				t.Errorf("k-old after k-new: the dry run said %s, want stale", said[1])
			}
			if said[3] != consumer.AlreadyApplied {
				t.Errorf("k-same's second copy: the dry run said %s, want already-applied", said[3])
			}
		})
	}
}
