package consumer_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookgate/hookgate/consumer"
)

// commitFailsMarks refuses the first commit (a Put that clears the lease)
// without storing it, as a WATERMARKS write that timed out before it
// landed, and runs during before answering: another processor (a replay
// beside the live consumer) acting on the same event meanwhile.
type commitFailsMarks struct {
	*memMarks
	fired  atomic.Bool
	during func()
}

func (s *commitFailsMarks) Put(ctx context.Context, key string, m consumer.Mark, rev uint64) (uint64, error) {
	if m.Lease == nil && s.fired.CompareAndSwap(false, true) {
		s.during()
		return 0, errors.New("put watermark " + key + ": jetstream unavailable: nats: timeout")
	}
	return s.memMarks.Put(ctx, key, m, rev)
}

// TestReviewD3CommitFailedWhileAReplaySettlesRecordsAppliedOnce: the live
// consumer runs an event's effects and remembers its key; its commit fails
// (not landed). Before its in-place retry, a replay running beside it
// (contract: replay never applies an event twice) finds the key in APPLIED
// and the lease naming it, and settles it (settleOwn): commit, AUDIT
// "applied". The consumer's retry then finds the key applied and the lease
// gone; since f59f2f0 Message.effectsRan makes it record "applied" a
// second time (before, it decided already-applied without a record).
// Effects ran once (one GRANTS message): a user expects one "applied".
func TestReviewD3CommitFailedWhileAReplaySettlesRecordsAppliedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		marks := &commitFailsMarks{memMarks: newMemMarks()}
		applied := newMemApplied()
		grants := &grantLog{}
		audit := &auditLog{}
		rules := map[string]consumer.Rule{provNone: {Effects: []consumer.Effect{
			consumer.GrantsEffect{Template: "grants.{provider}.{subject}", Grants: grants}}}}
		live := consumer.NewProcessor(rules, marks, applied, noLetters{}, audit, slog.New(slog.DiscardHandler), nil,
			consumer.Options{Owner: "serve", MaxDeliver: 3, LeaseTTL: time.Minute, Now: time.Now})
		replay := consumer.NewProcessor(rules, marks, applied, noLetters{}, audit, slog.New(slog.DiscardHandler), nil,
			consumer.Options{Owner: "replay", MaxDeliver: 3, LeaseTTL: time.Minute, Now: time.Now})
		e := spec{key: "k1", provider: provNone, subject: "G-1", at: at(10)}.event(1)
		var replayOut consumer.Outcome
		marks.during = func() { replayOut = replay.ProcessOnce(context.Background(), e, 1) }
		out := live.ProcessOnce(context.Background(), e, 1)
		if !marks.fired.Load() {
			t.Fatal("the commit never failed: the fault did not hit")
		}
		t.Logf("live %q, replay %q, GRANTS %v, AUDIT applied %d", out.Decision, replayOut.Decision, grants.calls(), audit.count("applied"))
		if len(grants.calls()) != 1 {
			t.Fatalf("GRANTS calls %v, want the event once", grants.calls())
		}
		if n := audit.count("applied"); n != 1 {
			t.Errorf("effects ran once but AUDIT has %d applied records for k1 (live %q, replay %q); want 1",
				n, out.Decision, replayOut.Decision)
		}
	})
}
