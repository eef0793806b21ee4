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

// answerLostMarks stores the first commit (a Put that clears the lease and
// moves the mark) and then answers it with a timeout, as a WATERMARKS
// write does whose stream leader was lost after the write reached a quorum
// and before the answer went out (a leader election on a cluster).
type answerLostMarks struct {
	*memMarks
	lost atomic.Bool
}

func (s *answerLostMarks) Put(ctx context.Context, key string, m consumer.Mark, rev uint64) (uint64, error) {
	n, err := s.memMarks.Put(ctx, key, m, rev)
	if err == nil && m.Lease == nil && !m.At.IsZero() && s.lost.CompareAndSwap(false, true) {
		return 0, errors.New("put watermark " + key + ": jetstream unavailable: nats: timeout")
	}
	return n, err
}

// TestReviewKCommitAnswerLostStillRecordsApplied: an event's effects ran,
// its key was remembered and its commit landed, but the commit's answer
// was lost (a WATERMARKS leader change). Process tries again in place
// (infrastructure trouble), finds the mark committed and decides
// "already-applied": the event was applied exactly once, yet AUDIT gets no
// "applied" record for it (trace shows it never applied, though its GRANTS
// message is there) and the metrics count it as a replay. The live process
// knows it ran the effects (Message.effectsRan); a user expects the one
// "applied" record. Cause: consumer/lease.go applyLeased (the commit
// error returns a transient retry) and checkApplied/settleOwn, which on the
// retry see the committed mark (lease cleared) and ack AlreadyApplied
// without recording.
func TestReviewKCommitAnswerLostStillRecordsApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		marks := &answerLostMarks{memMarks: newMemMarks()}
		grants := &grantLog{}
		audit := &auditLog{}
		rules := map[string]consumer.Rule{provWatermark: {Watermark: true, Effects: []consumer.Effect{
			consumer.GrantsEffect{Template: "grants.{provider}.{subject}", Grants: grants}}}}
		proc := consumer.NewProcessor(rules, marks, newMemApplied(), noLetters{}, audit, slog.New(slog.DiscardHandler), nil,
			consumer.Options{Owner: "me", MaxDeliver: 3, LeaseTTL: time.Minute, Now: time.Now})
		e := spec{key: "k1", provider: provWatermark, subject: "G-1", at: at(10)}.event(1)
		out := proc.ProcessOnce(context.Background(), e, 1)
		if !marks.lost.Load() {
			t.Fatal("the commit's answer was never lost: the fault did not hit")
		}
		t.Logf("decision %q, GRANTS %v, AUDIT applied records %d", out.Decision, grants.calls(), audit.count("applied"))
		if len(grants.calls()) != 1 {
			t.Fatalf("GRANTS calls %v, want the event once", grants.calls())
		}
		if out.Decision != consumer.Applied || audit.count("applied") != 1 {
			t.Errorf("applied once (GRANTS %v) but decided %q with %d AUDIT applied records; want %q and 1",
				grants.calls(), out.Decision, audit.count("applied"), consumer.Applied)
		}
	})
}
