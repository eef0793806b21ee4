package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
)

// countingMarks counts a store's reads and the creates that conflicted.
type countingMarks struct {
	*memMarks
	gets, lostCreates atomic.Int64
}

func (c *countingMarks) Get(ctx context.Context, key string) (consumer.Mark, uint64, error) {
	c.gets.Add(1)
	return c.memMarks.Get(ctx, key)
}

func (c *countingMarks) Put(ctx context.Context, key string, m consumer.Mark, rev uint64) (uint64, error) {
	n, err := c.memMarks.Put(ctx, key, m, rev)
	if rev == 0 && errors.Is(err, consumer.ErrConflict) {
		c.lostCreates.Add(1)
	}
	return n, err
}

// A subject this process has no mark cached for is claimed without a read
// while such subjects were mostly new lately, and read first once they are
// mostly known (a restart over existing subjects): a wrong guess costs a
// failed create, never a wrong decision.
func TestUncachedSubjectsGuessedNewOnlyWhileMostAre(t *testing.T) {
	e := newBugEnv()
	marks := &countingMarks{memMarks: e.marks}
	proc := func(owner string) *consumer.Processor {
		effects := []consumer.Effect{consumer.GrantsEffect{Template: "grants.{provider}.{subject}", Grants: e.grants}}
		rules := map[string]consumer.Rule{provWatermark: {Watermark: true, Effects: effects}}
		return consumer.NewProcessor(rules, marks, e.applied, noLetters{}, nopAuditor{}, slog.New(slog.DiscardHandler), nil,
			consumer.Options{Owner: owner, MaxDeliver: 3, LeaseTTL: time.Minute, Now: func() time.Time { return e.now }})
	}
	run := func(p *consumer.Processor, n int, subject func(i int) string, when time.Time, want string) (gets, lost int64) {
		t.Helper()
		g0, l0 := marks.gets.Load(), marks.lostCreates.Load()
		for i := range n {
			s := spec{key: fmt.Sprintf("k-%s-%s", subject(i), when.Format("15")), provider: provWatermark, subject: subject(i), at: when}
			if out := deliver(p, s, 1); out.Decision != want {
				t.Fatalf("%s: %s, want %s", s.key, out.Decision, want)
			}
		}
		return marks.gets.Load() - g0, marks.lostCreates.Load() - l0
	}
	a := proc("a")
	// New subjects: claimed at once, no reads.
	if gets, lost := run(a, 100, func(i int) string { return fmt.Sprintf("G-%d", i) }, at(10), consumer.Applied); gets != 0 || lost != 0 {
		t.Fatalf("100 new subjects: %d reads, %d lost creates; want none", gets, lost)
	}
	// Replays of older events on subjects it has cached are read (stale
	// is decided on a read), which says nothing about uncached subjects:
	// new subjects are still claimed without a read.
	if gets, _ := run(a, 40, func(i int) string { return fmt.Sprintf("G-%d", i) }, at(9), consumer.Stale); gets != 40 {
		t.Fatalf("40 older events on cached subjects: %d reads, want 40", gets)
	}
	if gets, lost := run(a, 10, func(i int) string { return fmt.Sprintf("M-%d", i) }, at(10), consumer.Applied); gets != 0 || lost != 0 {
		t.Fatalf("10 new subjects after replays on cached ones: %d reads, %d lost creates; want none", gets, lost)
	}
	// A restart: the same subjects, uncached. The first guess is wrong;
	// its event, older than the mark, is still judged on the mark read
	// after the failed create. Then it reads first.
	b := proc("b")
	if gets, lost := run(b, 1, func(int) string { return "G-0" }, at(9), consumer.Stale); gets != 1 || lost != 1 {
		t.Fatalf("older event on a known subject, guessed new: %d reads, %d lost creates; want 1, 1", gets, lost)
	}
	if gets, lost := run(b, 99, func(i int) string { return fmt.Sprintf("G-%d", i+1) }, at(11), consumer.Applied); lost > 2 || gets != 99 {
		t.Fatalf("99 known subjects: %d reads, %d lost creates; want 99 and at most 2", gets, lost)
	}
	// New subjects again: it reads until the tally turns, then guesses.
	gets, lost := run(b, 100, func(i int) string { return fmt.Sprintf("N-%d", i) }, at(12), consumer.Applied)
	if lost != 0 || gets == 0 || gets > 40 {
		t.Fatalf("100 new subjects after known ones: %d reads, %d lost creates; want some reads, at most 40, and no lost creates", gets, lost)
	}
}
