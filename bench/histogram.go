package bench

import (
	"math/bits"
	"time"
)

// Latencies are counted in log-linear buckets, the way HdrHistogram does:
// values below 2^subBits nanoseconds are exact, above that each power of two
// is split into 2^(subBits-1) buckets, so a reported quantile is within
// 1/64 (1.6%) of the true value. Recording is an index computation and an
// increment: cheap enough to run in every load-generator request.
const (
	subBits  = 7
	subCount = 1 << subBits
	halfSub  = subCount / 2
	nBuckets = 64 * halfSub
)

// Histogram counts durations. The zero value is empty and ready; it is not
// safe for concurrent use (each load worker keeps its own and they are
// merged at the end).
type Histogram struct {
	counts [nBuckets]uint64
	n      uint64
	sum    time.Duration
	max    time.Duration
}

func bucketOf(v uint64) int {
	if v < subCount {
		return int(v)
	}
	shift := bits.Len64(v) - subBits
	return shift*halfSub + int(v>>uint(shift))
}

// bucketRange returns the smallest and largest value counted in bucket i.
func bucketRange(i int) (lo, hi uint64) {
	if i < subCount {
		return uint64(i), uint64(i)
	}
	shift := i/halfSub - 1
	m := uint64(i - shift*halfSub)
	lo = m << uint(shift)
	return lo, lo + (uint64(1) << uint(shift)) - 1
}

// Record counts one duration; negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d))]++
	h.n++
	h.sum += d
	if d > h.max {
		h.max = d
	}
}

// Merge adds o's counts to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	if o.max > h.max {
		h.max = o.max
	}
}

// Count is the number of recorded durations.
func (h *Histogram) Count() uint64 { return h.n }

// Max is the largest recorded duration.
func (h *Histogram) Max() time.Duration { return h.max }

// Mean is the average recorded duration, 0 when empty.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}

// Quantile returns the duration below which a share q (0..1) of the
// recorded durations fall: the midpoint of the bucket holding the
// ceil(q*n)-th value, never more than Max. 0 when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.999999999)
	if rank < 1 {
		rank = 1
	}
	if rank > h.n {
		rank = h.n
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketRange(i)
			d := time.Duration(lo + (hi-lo)/2)
			if d > h.max {
				d = h.max
			}
			return d
		}
	}
	return h.max
}
