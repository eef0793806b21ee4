package consumer_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream"
)

// marksWrites is how many writes the WATERMARKS bucket has stored.
func marksWrites(t *testing.T, s *seqEnv) uint64 {
	t.Helper()
	st, err := s.env.Conn.JS.Stream(t.Context(), "KV_"+jetstream.BucketMarks)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

// A rule whose only effect is its sequenced GRANTS publish applies each
// event with one WATERMARKS write (the commit), no lease claimed; a rule
// with an effect before the publish claims the lease first (two). Both
// leave the same marks, without a lease, and the same GRANTS.
func TestLeaseFreeWritesTheMarkOnce(t *testing.T) {
	const n = 6
	var events []ev
	for i := range n {
		// Two subjects, their times increasing, types changing.
		events = append(events, ev{fmt.Sprintf("k%d", i), fmt.Sprintf("G-%d", i%2), fmt.Sprintf("2026-11-30T1%d:00:00Z", i), []string{"a", "b.c"}[i/2%2]})
	}
	for _, c := range []struct {
		name      string
		env       func(*testing.T) *seqEnv
		perEvent  uint64
		wantMarks int
	}{
		{"lease-free", newSeqEnv, 1, 1},
		{"leased", newLeasedSeqEnv, 2, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.env(t)
			p := s.proc("a", jetstream.NewEffects(s.env.Conn), &auditLog{})
			before := marksWrites(t, s)
			for _, e := range events {
				if out := s.deliver(t, p, e, 1); out.Decision != consumer.Applied {
					t.Fatalf("%s: %+v, want applied", e.key, out)
				}
			}
			if got := marksWrites(t, s) - before; got != c.perEvent*n {
				t.Fatalf("WATERMARKS writes for %d events: %d, want %d", n, got, c.perEvent*n)
			}
			for i, subj := range []string{"G-0", "G-1"} {
				m := mark(t, s.env, subj)
				last := events[n-2+i]
				if m.Lease != nil || strings.Join(m.Keys, ",") != last.key {
					t.Fatalf("mark of %s: %+v, want %s's, no lease", subj, m, last.key)
				}
			}
			if got := s.applied(t); len(got) != n {
				t.Fatalf("GRANTS = %v, want the %d events once", got, n)
			}
		})
	}
}

// Lease-free events of one subject, of several types, delivered to three
// processes at once (serve, a replay beside it, an instance that lost the
// consumer lock), each in its own order and each event to each process:
// GRANTS must hold the subject's events in watermark order, each at most
// once, the newest among them, and no event both in GRANTS and judged
// stale by anyone. The publish is sequenced on the subject's wildcard, so
// two processes publishing different types cannot both land after the
// same message.
func TestLeaseFreeProcessesRacingKeepOrder(t *testing.T) {
	for round := range 3 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			s := newSeqEnv(t)
			t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
			const n = 30
			var events []ev
			times := map[string]time.Time{}
			for i := range n {
				at := t0.Add(time.Duration(i) * time.Minute)
				k := fmt.Sprintf("k%02d", i)
				times[k] = at
				events = append(events, ev{k, "G-1", at.Format(time.RFC3339), []string{"a", "b.c", "d"}[i%3]})
			}
			rng := rand.New(rand.NewPCG(uint64(round), 7))
			var (
				mu       sync.Mutex
				outcomes = map[string][]string{}
				wg       sync.WaitGroup
			)
			for w := range 3 {
				order := slices.Clone(events)
				if w > 0 { // serve's in order; the others shuffled
					rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
				}
				p := s.proc(fmt.Sprintf("p%d", w), jetstream.NewEffects(s.env.Conn), &auditLog{})
				wg.Go(func() {
					for _, e := range order {
						var out consumer.Outcome
						for try := 1; ; try++ {
							out = s.deliver(t, p, e, try)
							if out.Decision != consumer.Retry || try == 20 {
								break
							}
						}
						mu.Lock()
						outcomes[e.key] = append(outcomes[e.key], out.Decision)
						mu.Unlock()
					}
				})
			}
			wg.Wait()

			var keys []string
			for _, g := range s.applied(t) {
				subj, key, _ := strings.Cut(g, " ")
				if !strings.HasPrefix(subj, "grants.grants.G-1.") {
					t.Fatalf("GRANTS message on %s", subj)
				}
				keys = append(keys, key)
			}
			for i, k := range keys {
				if i > 0 && !times[k].After(times[keys[i-1]]) {
					t.Fatalf("GRANTS out of watermark order at %s after %s: %v", k, keys[i-1], keys)
				}
			}
			if len(keys) == 0 || keys[len(keys)-1] != events[n-1].key {
				t.Fatalf("GRANTS = %v, want the newest, %s, last", keys, events[n-1].key)
			}
			for _, e := range events {
				got := outcomes[e.key]
				if len(got) != 3 {
					t.Fatalf("%s decided %d times, want 3: %v", e.key, len(got), got)
				}
				in := slices.Contains(keys, e.key)
				for _, d := range got {
					switch {
					case d == consumer.Retry:
						t.Fatalf("%s still retried after 20 tries: %v", e.key, got)
					case d == consumer.Stale && in:
						t.Fatalf("%s is in GRANTS and was judged stale: %v", e.key, got)
					case d == consumer.Applied && !in:
						t.Fatalf("%s applied but not in GRANTS: %v", e.key, got)
					}
				}
			}
			if m := mark(t, s.env, "G-1"); m.Lease != nil || !m.At.Equal(times[events[n-1].key]) {
				t.Fatalf("mark %+v, want %s's time, no lease", m, events[n-1].key)
			}
		})
	}
}
