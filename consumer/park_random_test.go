package consumer_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookgate/hookgate/consumer"
)

// Random schedules over subjects in doubt (a dead holder's lease
// naming kD-<subject>), kD delivered at a random place or never, a stop at
// a random moment, several workers, virtual time. Checks: every message
// taken settled exactly once (acked, after an hour without a stop), no
// concurrent effects per subject, per subject the applied order is kD (if
// applied) first then delivery order, Run returns. (Written in review of
// the parking.)
func TestRunParkingRandomSchedules(t *testing.T) {
	for round := range 100 {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(round), 7))
			rec := &subjectRecorder{running: map[string]bool{}, order: map[string][]string{}}
			eff := rec.effect(300 * time.Millisecond)
			marks := newMemMarks()
			const subjects = 4
			inDoubt := map[string]bool{}
			for s := range subjects {
				if s%2 == 0 {
					subj := fmt.Sprint("G-", s)
					inDoubt[subj] = true
					ev := spec{key: "x", provider: provWatermark, subject: subj, at: at(1)}.event(0)
					if _, err := marks.Put(t.Context(), consumer.MarkKey(ev), consumer.Mark{At: at(0),
						Lease: &consumer.Lease{Owner: "dead", Key: "kD-" + subj, Until: time.Now().Add(-time.Second)}}, 0); err != nil {
						t.Fatal(err)
					}
				}
			}
			rules := map[string]consumer.Rule{provWatermark: {Watermark: true, Effects: []consumer.Effect{eff}}}
			inDoubtWait := time.Duration(1+rng.IntN(6)) * time.Second
			proc := consumer.NewProcessor(rules, marks, newMemApplied(), noLetters{}, nopAuditor{}, slog.New(slog.DiscardHandler), nil,
				consumer.Options{Owner: "me", MaxDeliver: 3, LeaseTTL: time.Hour, InDoubtWait: inDoubtWait, Now: time.Now})
			src := newList()
			var ds []*countingDelivery
			var keys []string
			want := map[string][]string{}
			dAt := map[string]int{}
			for s := range subjects {
				subj := fmt.Sprint("G-", s)
				if inDoubt[subj] && rng.IntN(4) > 0 {
					dAt[subj] = rng.IntN(8)
				} else {
					dAt[subj] = -1
				}
			}
			n := 0
			add := func(key, subj string, atT time.Time) {
				d := &countingDelivery{}
				ds = append(ds, d)
				keys = append(keys, key)
				n++
				src.msgs = append(src.msgs, &consumer.Message{Event: spec{key: key, provider: provWatermark, subject: subj, at: atT}.event(uint64(n)), Deliveries: 2, Delivery: d})
			}
			cnt := map[string]int{}
			for i := range 60 {
				subj := fmt.Sprint("G-", rng.IntN(subjects))
				if cnt[subj] == dAt[subj] {
					add("kD-"+subj, subj, at(1)) // oldest of its subject
					dAt[subj] = -2
				}
				cnt[subj]++
				key := fmt.Sprint("k", i)
				add(key, subj, at(2).Add(time.Duration(i)*time.Second))
				want[subj] = append(want[subj], key)
			}
			workers := 1 + rng.IntN(4)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- proc.Run(ctx, src, workers) }()
			drain := rng.IntN(3) == 0
			if drain {
				time.Sleep(time.Hour)
			} else {
				time.Sleep(time.Duration(rng.IntN(15_000)) * time.Millisecond)
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(time.Hour):
				t.Fatalf("round %d: Run did not return within an hour of the stop", round)
			}
			synctest.Wait()
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.bad) > 0 {
				t.Fatalf("round %d: %v", round, rec.bad)
			}
			for s, got := range rec.order {
				g := slices.Clone(got)
				if len(g) > 0 && g[0] == "kD-"+s {
					g = g[1:]
				}
				if slices.Contains(g, "kD-"+s) {
					t.Errorf("round %d: %s: in-doubt event applied after others: %v", round, s, got)
					continue
				}
				// Applied in delivery order (stale ones skipped).
				w := want[s]
				j := 0
				for _, k := range g {
					for j < len(w) && w[j] != k {
						j++
					}
					if j == len(w) {
						t.Errorf("round %d: %s applied out of order: %v (delivery order %v)", round, s, got, w)
						break
					}
				}
			}
			src.mu.Lock()
			taken := len(ds) - len(src.msgs)
			src.mu.Unlock()
			if drain {
				// An hour is time enough for every message (review AG: a Run
				// that took nothing passed every check below, which cover
				// only what was taken).
				if taken != len(ds) {
					t.Fatalf("round %d (workers %d): after an hour %d of %d messages taken", round, workers, taken, len(ds))
				}
				for s, w := range want {
					if len(rec.order[s]) == 0 && len(w) > 0 {
						t.Errorf("round %d: subject %s: none of its %d events applied", round, s, len(w))
					}
				}
			}
			for i, d := range ds[:taken] {
				if a, n := d.acked(); drain && a != 1 {
					t.Errorf("round %d (workers %d): after an hour, message %s acked %d, naked %d; want acked", round, workers, keys[i], a, n)
				} else if a+n != 1 {
					t.Errorf("round %d (workers %d): message %s acked %d, naked %d; want settled once", round, workers, keys[i], a, n)
				}
			}
		})
	}
}
