package consumer_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
)

// lostGrants is GRANTS for a rule that publishes the sequenced way (a
// publish is stored only after the expected last message; no duplicate
// window) whose first publish of lose is stored and then answered as
// jetstream's Publisher answers one whose every retry went unanswered
// until its deadline (publisher.go).
type lostGrants struct {
	mu   sync.Mutex
	msgs map[string][]consumer.GrantMsg
	seq  uint64
	lose string
	lost bool
}

func (g *lostGrants) PublishGrant(context.Context, string, string, http.Header, []byte) (uint64, error) {
	return 0, errors.New("not a sequenced publish")
}

func (g *lostGrants) PublishGrantAfter(_ context.Context, subject, key string, last uint64, h http.Header, _ []byte) (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if lastSeq(g.msgs[subject]) != last {
		return 0, consumer.ErrGrantMoved
	}
	g.seq++
	g.msgs[subject] = append(g.msgs[subject], consumer.GrantMsg{Seq: g.seq, Key: key, Header: h.Clone()})
	if key == g.lose && !g.lost {
		g.lost = true
		return 0, errors.New("publish " + subject + ": jetstream unavailable: context deadline exceeded (last error: nats: timeout)")
	}
	return g.seq, nil
}

func (g *lostGrants) LastGrant(_ context.Context, subject string) (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return lastSeq(g.msgs[subject]), nil
}

func (g *lostGrants) ScanGrants(_ context.Context, subject string, after uint64, _ time.Time, upTo uint64, fn func(consumer.GrantMsg)) error {
	g.mu.Lock()
	msgs := slices.Clone(g.msgs[subject])
	g.mu.Unlock()
	for _, m := range msgs {
		if m.Seq > after && m.Seq <= upTo {
			fn(m)
		}
	}
	return nil
}

func (g *lostGrants) HasGrant(_ context.Context, subject, key string, _ time.Time) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.ContainsFunc(g.msgs[subject], func(m consumer.GrantMsg) bool { return m.Key == key }), nil
}

func (g *lostGrants) stored(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, msgs := range g.msgs {
		for _, m := range msgs {
			if m.Key == key {
				n++
			}
		}
	}
	return n
}

// k0 and k1 share a subject and an instant; k0 applies. k1's sequenced
// publish is stored but its answer is lost until the publisher's deadline:
// an effect failure, retried, its lease released. Its redelivery finds its
// message in GRANTS after the mark's last commit there, and the mark at
// its instant without its key. It was applied once, by the first
// delivery, and nobody recorded it: the redelivery takes it into the mark
// and records it applied (found by the property test once its GRANTS
// models lost answers; it was decided already-applied with no AUDIT
// record, the gap review K closed for a lost commit answer). A further
// redelivery is already-applied, not recorded again. (Under a plain GRANTS
// memory the walk that finds the message cannot tell a commit from none:
// that gap stays, see the README's Known limits.)
func TestLostPublishAnswerRecordedAppliedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lost := &lostGrants{msgs: map[string][]consumer.GrantMsg{}, lose: "k1"}
		audit := &auditLog{}
		rules := map[string]consumer.Rule{provWatermark: {Watermark: true, OneAccount: true, Effects: []consumer.Effect{
			consumer.GrantsEffect{Template: "grants.{provider}.{subject}.{type}", Grants: lost}}}}
		proc := consumer.NewProcessor(rules, newMemMarks(), newMemApplied(), noLetters{}, audit, slog.New(slog.DiscardHandler), nil,
			consumer.Options{Owner: "me", MaxDeliver: 3, LeaseTTL: time.Minute, Now: time.Now})
		k0 := spec{key: "k0", provider: provWatermark, subject: "G-1", at: at(10)}
		k1 := spec{key: "k1", provider: provWatermark, subject: "G-1", at: at(10)}
		ctx := context.Background()

		if out := proc.ProcessOnce(ctx, k0.event(1), 1); out.Decision != consumer.Applied {
			t.Fatalf("k0: %+v, want applied", out)
		}
		if out := proc.ProcessOnce(ctx, k1.event(2), 1); out.Decision != consumer.Retry || !lost.lost {
			t.Fatalf("k1, its answer lost: %+v (lost %v), want retry", out, lost.lost)
		}
		for i, want := range []string{consumer.Applied, consumer.AlreadyApplied} {
			if out := proc.ProcessOnce(ctx, k1.event(2), 2+i); out.Decision != want {
				t.Fatalf("k1's redelivery %d: %+v, want %s", i+1, out, want)
			}
		}
		if n := lost.stored("k1"); n != 1 {
			t.Fatalf("GRANTS holds k1 %d times, want once", n)
		}
		if recs := audit.of("k1", event.DecisionApplied); len(recs) != 1 {
			t.Fatalf("AUDIT applied records of k1: %+v, want one", recs)
		}
	})
}
