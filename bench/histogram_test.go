package bench

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketRangeInvertsBucketOf(t *testing.T) {
	for _, v := range []uint64{0, 1, 127, 128, 129, 255, 256, 1000, 1 << 20, 123456789, 1 << 40, 1<<63 - 1} {
		lo, hi := bucketRange(bucketOf(v))
		if v < lo || v > hi {
			t.Errorf("value %d: bucket %d covers [%d, %d]", v, bucketOf(v), lo, hi)
		}
		if v >= subCount && float64(hi-lo) > float64(v)/float64(halfSub) {
			t.Errorf("value %d: bucket [%d, %d] wider than 1/%d", v, lo, hi, halfSub)
		}
	}
	for i := 1; i < bucketOf(1<<62); i++ {
		_, prevHi := bucketRange(i - 1)
		lo, _ := bucketRange(i)
		if lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ends at %d", i, lo, prevHi)
		}
	}
}

func TestQuantileMatchesSortedSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	var all []time.Duration
	for range 100_000 {
		// log-normal-ish latencies from 50µs to a few hundred ms
		d := time.Duration(50_000 * (1 + rng.ExpFloat64()*rng.ExpFloat64()*20))
		h.Record(d)
		all = append(all, d)
	}
	slices.Sort(all)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		want := all[int(q*float64(len(all)))-1]
		got := h.Quantile(q)
		if diff := float64(got-want) / float64(want); diff > 0.02 || diff < -0.02 {
			t.Errorf("q%.3f: got %s, sorted samples say %s (%.1f%% off)", q, got, want, diff*100)
		}
	}
	if h.Count() != uint64(len(all)) || h.Max() != all[len(all)-1] {
		t.Errorf("count %d max %s, want %d %s", h.Count(), h.Max(), len(all), all[len(all)-1])
	}
}

func TestMergeAddsCounts(t *testing.T) {
	var a, b Histogram
	for i := range 100 {
		a.Record(time.Duration(i) * time.Millisecond)
		b.Record(time.Duration(i+100) * time.Millisecond)
	}
	a.Merge(&b)
	if a.Count() != 200 {
		t.Fatalf("count %d, want 200", a.Count())
	}
	if got := a.Quantile(0.5); got < 98*time.Millisecond || got > 101*time.Millisecond {
		t.Errorf("median %s, want about 99.5ms", got)
	}
	var empty Histogram
	if empty.Quantile(0.99) != 0 || empty.Mean() != 0 {
		t.Error("empty histogram should report 0")
	}
}
