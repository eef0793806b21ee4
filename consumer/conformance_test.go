package consumer_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream/jstest"
)

// The conformance suites hold every implementation of the consumer's
// stores to one contract, the way watermill's tests.TestPubSub does.

func TestWatermarksConformance(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		testWatermarks(t, func(t *testing.T) consumer.Watermarks { return newMemMarks() })
	})
	t.Run("jetstream", func(t *testing.T) {
		testWatermarks(t, func(t *testing.T) consumer.Watermarks { return jstest.Start(t, "").Marks })
	})
}

func TestAppliedKeysConformance(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		testAppliedKeys(t, func(t *testing.T) consumer.AppliedKeys { return newMemApplied() })
	})
	t.Run("jetstream", func(t *testing.T) {
		testAppliedKeys(t, func(t *testing.T) consumer.AppliedKeys { return jstest.Start(t, "").Applied })
	})
}

// confKey is shaped like a real WATERMARKS key (provider.account.subject,
// tokens encoded).
const confKey = "grants.default.G-42"

// testWatermarks checks an implementation of consumer.Watermarks.
// newStore returns an empty store, cleaned up with t.
func testWatermarks(t *testing.T, newStore func(t *testing.T) consumer.Watermarks) {
	t.Run("absent is revision 0", func(t *testing.T) {
		s := newStore(t)
		m, rev, err := s.Get(t.Context(), confKey)
		if err != nil {
			t.Fatal(err)
		}
		if rev != 0 || !markEqual(m, consumer.Mark{}) {
			t.Fatalf("Get(absent) = %+v, rev %d; want the zero Mark, rev 0", m, rev)
		}
	})

	t.Run("create then get", func(t *testing.T) {
		s := newStore(t)
		want := consumer.Mark{At: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), Keys: []string{"k1"}}
		rev, err := s.Put(t.Context(), confKey, want, 0)
		if err != nil {
			t.Fatal(err)
		}
		if rev == 0 {
			t.Fatal("Put returned revision 0 for a created entry")
		}
		got, grev, err := s.Get(t.Context(), confKey)
		if err != nil {
			t.Fatal(err)
		}
		if grev != rev || !markEqual(got, want) {
			t.Fatalf("Get = %+v, rev %d; want %+v, rev %d", got, grev, want, rev)
		}
	})

	t.Run("create twice conflicts", func(t *testing.T) {
		s := newStore(t)
		first := consumer.Mark{Keys: []string{"first"}}
		rev, err := s.Put(t.Context(), confKey, first, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Put(t.Context(), confKey, consumer.Mark{Keys: []string{"second"}}, 0)
		if !errors.Is(err, consumer.ErrConflict) {
			t.Fatalf("second create: err = %v, want ErrConflict", err)
		}
		expectMark(t, s, first, rev)
	})

	t.Run("update of an absent entry conflicts", func(t *testing.T) {
		s := newStore(t)
		_, err := s.Put(t.Context(), confKey, consumer.Mark{Keys: []string{"x"}}, 7)
		if !errors.Is(err, consumer.ErrConflict) {
			t.Fatalf("update at rev 7 of an absent entry: err = %v, want ErrConflict", err)
		}
		if _, rev, err := s.Get(t.Context(), confKey); err != nil || rev != 0 {
			t.Fatalf("after a failed update: rev %d, err %v; want still absent", rev, err)
		}
	})

	t.Run("stale revision conflicts", func(t *testing.T) {
		s := newStore(t)
		r1, err := s.Put(t.Context(), confKey, consumer.Mark{Keys: []string{"a"}}, 0)
		if err != nil {
			t.Fatal(err)
		}
		second := consumer.Mark{Keys: []string{"a", "b"}}
		r2, err := s.Put(t.Context(), confKey, second, r1)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Put(t.Context(), confKey, consumer.Mark{Keys: []string{"lost"}}, r1)
		if !errors.Is(err, consumer.ErrConflict) {
			t.Fatalf("update at stale rev %d (current %d): err = %v, want ErrConflict", r1, r2, err)
		}
		expectMark(t, s, second, r2)
	})

	t.Run("revisions increase", func(t *testing.T) {
		s := newStore(t)
		var rev uint64
		for i := range 5 {
			next, err := s.Put(t.Context(), confKey, consumer.Mark{Keys: []string{fmt.Sprint(i)}}, rev)
			if err != nil {
				t.Fatalf("put %d at rev %d: %v", i, rev, err)
			}
			if next <= rev {
				t.Fatalf("put %d: revision %d after %d, want it to increase", i, next, rev)
			}
			rev = next
		}
	})

	t.Run("revisions belong to one entry", func(t *testing.T) {
		s := newStore(t)
		ra, err := s.Put(t.Context(), "p.a.A", consumer.Mark{Keys: []string{"a"}}, 0)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := s.Put(t.Context(), "p.a.B", consumer.Mark{Keys: []string{"b"}}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Put(t.Context(), "p.a.A", consumer.Mark{Keys: []string{"wrong"}}, rb); !errors.Is(err, consumer.ErrConflict) {
			t.Fatalf("update of A with B's revision %d: err = %v, want ErrConflict", rb, err)
		}
		// A write to B leaves A's revision valid.
		if _, err := s.Put(t.Context(), "p.a.B", consumer.Mark{Keys: []string{"b2"}}, rb); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Put(t.Context(), "p.a.A", consumer.Mark{Keys: []string{"a2"}}, ra); err != nil {
			t.Fatalf("update of A at its own revision after B changed: %v", err)
		}
	})

	t.Run("values round-trip", func(t *testing.T) {
		zone := time.FixedZone("UTC+5:30", 5*3600+1800)
		for _, tc := range []struct {
			name string
			mark consumer.Mark
		}{
			{"zero", consumer.Mark{}},
			{"nanoseconds", consumer.Mark{At: time.Date(2026, 11, 30, 10, 0, 0, 123456789, time.UTC), Keys: []string{"k"}}},
			{"zone", consumer.Mark{At: time.Date(2026, 11, 30, 15, 30, 0, 1, zone), Keys: []string{"k"}}},
			{"several keys", consumer.Mark{
				At:   time.Unix(1764504000, 999_999_999).UTC(),
				Keys: []string{"grantsgov:default:evt:1", "stripe:acct#ab:dig:0f", "p:a:evt:x/y.z*>~"},
			}},
			{"lease", consumer.Mark{
				At:    time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
				Keys:  []string{"k1", "k2"},
				Lease: &consumer.Lease{Owner: "host-a/1234", Key: "k3", Until: time.Date(2026, 1, 2, 3, 5, 5, 7, time.UTC)},
			}},
			{"lease on nothing applied", consumer.Mark{
				Lease: &consumer.Lease{Owner: "b", Key: "k", Until: time.Date(2030, 1, 1, 0, 0, 0, 1, time.UTC)},
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s := newStore(t)
				rev, err := s.Put(t.Context(), confKey, tc.mark, 0)
				if err != nil {
					t.Fatal(err)
				}
				expectMark(t, s, tc.mark, rev)
				// And through an update, which must clear what the new
				// value no longer has (the lease, the keys).
				rev, err = s.Put(t.Context(), confKey, consumer.Mark{}, rev)
				if err != nil {
					t.Fatal(err)
				}
				expectMark(t, s, consumer.Mark{}, rev)
				rev, err = s.Put(t.Context(), confKey, tc.mark, rev)
				if err != nil {
					t.Fatal(err)
				}
				expectMark(t, s, tc.mark, rev)
			})
		}
	})

	t.Run("concurrent compare-and-set: one winner per round", func(t *testing.T) {
		s := newStore(t)
		const writers, rounds = 8, 5
		_, rev, err := s.Get(t.Context(), confKey)
		if err != nil {
			t.Fatal(err)
		}
		for round := range rounds {
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				winners []int
				newRev  uint64
				others  []error
				startCh = make(chan struct{})
			)
			for w := range writers {
				wg.Go(func() {
					m := consumer.Mark{Keys: []string{fmt.Sprintf("r%d-w%d", round, w)}}
					<-startCh
					n, err := s.Put(t.Context(), confKey, m, rev)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						winners, newRev = append(winners, w), n
					case !errors.Is(err, consumer.ErrConflict):
						others = append(others, err)
					}
				})
			}
			close(startCh)
			wg.Wait()
			if len(others) > 0 {
				t.Fatalf("round %d: losers got errors other than ErrConflict: %v", round, others)
			}
			if len(winners) != 1 {
				t.Fatalf("round %d: %d writers won the compare-and-set at rev %d (%v), want exactly 1", round, len(winners), rev, winners)
			}
			expectMark(t, s, consumer.Mark{Keys: []string{fmt.Sprintf("r%d-w%d", round, winners[0])}}, newRev)
			rev = newRev
		}
	})

	t.Run("concurrent read-modify-write loses no update", func(t *testing.T) {
		s := newStore(t)
		const writers, each = 6, 5
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Go(func() {
				for i := 0; i < each; {
					m, rev, err := s.Get(t.Context(), confKey)
					if err != nil {
						errs <- err
						return
					}
					m.Keys = append(m.Keys, fmt.Sprintf("w%d-%d", w, i))
					if _, err := s.Put(t.Context(), confKey, m, rev); err != nil {
						if errors.Is(err, consumer.ErrConflict) {
							continue // lost the race: re-read and try again
						}
						errs <- err
						return
					}
					i++
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		m, _, err := s.Get(t.Context(), confKey)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Keys) != writers*each {
			t.Fatalf("after %d increments by compare-and-set the entry holds %d", writers*each, len(m.Keys))
		}
		for w := range writers {
			for i := range each {
				if k := fmt.Sprintf("w%d-%d", w, i); !slices.Contains(m.Keys, k) {
					t.Fatalf("update %s was lost", k)
				}
			}
		}
	})
}

// testAppliedKeys checks an implementation of consumer.AppliedKeys.
func testAppliedKeys(t *testing.T, newStore func(t *testing.T) consumer.AppliedKeys) {
	keys := []string{
		"grantsgov:default:evt:evt_1",
		"stripe:acct_1:dig:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"github:acct#00ff:evt#" + "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100",
		"shopify:demo.myshopify.com:evt:a/b.c*d>e~!",
	}
	t.Run("remember then seen", func(t *testing.T) {
		s := newStore(t)
		for _, k := range keys {
			if seen, err := s.Seen(t.Context(), k); err != nil || seen {
				t.Fatalf("Seen(%q) before Remember = %v, %v; want false", k, seen, err)
			}
		}
		if err := s.Remember(t.Context(), keys[0]); err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			seen, err := s.Seen(t.Context(), k)
			if err != nil {
				t.Fatal(err)
			}
			if seen != (i == 0) {
				t.Fatalf("Seen(%q) = %v after remembering only %q", k, seen, keys[0])
			}
		}
	})

	t.Run("remember is idempotent", func(t *testing.T) {
		s := newStore(t)
		for range 3 {
			if err := s.Remember(t.Context(), keys[1]); err != nil {
				t.Fatalf("Remember again: %v", err)
			}
		}
		if seen, err := s.Seen(t.Context(), keys[1]); err != nil || !seen {
			t.Fatalf("Seen = %v, %v; want true", seen, err)
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		s := newStore(t)
		var wg sync.WaitGroup
		errs := make(chan error, 2*len(keys))
		for _, k := range keys {
			wg.Go(func() {
				if err := s.Remember(t.Context(), k); err != nil {
					errs <- err
				}
			})
			wg.Go(func() {
				if _, err := s.Seen(t.Context(), k); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for _, k := range keys {
			if seen, err := s.Seen(t.Context(), k); err != nil || !seen {
				t.Fatalf("Seen(%q) = %v, %v after concurrent Remember", k, seen, err)
			}
		}
	})
}

func expectMark(t *testing.T, s consumer.Watermarks, want consumer.Mark, wantRev uint64) {
	t.Helper()
	got, rev, err := s.Get(t.Context(), confKey)
	if err != nil {
		t.Fatal(err)
	}
	if rev != wantRev || !markEqual(got, want) {
		t.Fatalf("Get = %s, rev %d; want %s, rev %d", fmtMark(got), rev, fmtMark(want), wantRev)
	}
}

// markEqual compares marks as the contract does: instants (not zones or
// monotonic readings), keys in order (nil and empty alike), leases.
func markEqual(a, b consumer.Mark) bool {
	if !a.At.Equal(b.At) || !slices.Equal(a.Keys, b.Keys) || (a.Lease == nil) != (b.Lease == nil) {
		return false
	}
	if a.Lease == nil {
		return true
	}
	return a.Lease.Owner == b.Lease.Owner && a.Lease.Key == b.Lease.Key && a.Lease.Until.Equal(b.Lease.Until)
}

func fmtMark(m consumer.Mark) string {
	s := fmt.Sprintf("{At:%s Keys:%q", m.At.Format(time.RFC3339Nano), m.Keys)
	if m.Lease != nil {
		s += fmt.Sprintf(" Lease:{Owner:%q Key:%q Until:%s}", m.Lease.Owner, m.Lease.Key, m.Lease.Until.Format(time.RFC3339Nano))
	}
	return s + "}"
}
