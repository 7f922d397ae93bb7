package statistics

import (
	"math/bits"
	"slices"
	"time"
)

// Histogram counts durations in log-linear buckets: exact below 16µs, then
// 16 sub-buckets per power of two, so any percentile read from it is within
// about 6% of the true value. Two histograms merge by adding counts, which
// is what makes per-day percentiles combinable over any window.
type Histogram struct {
	counts map[int32]int64
	total  int64
}

const subBuckets = 16

func bucketOf(d time.Duration) int32 {
	us := uint64(max(d, 0) / time.Microsecond)
	if us < subBuckets {
		return int32(us)
	}
	e := bits.Len64(us) - 1 // us in [2^e, 2^(e+1))
	sub := (us >> (e - 4)) & (subBuckets - 1)
	return int32(subBuckets + (e-4)*subBuckets + int(sub))
}

// bounds returns the bucket's [lower, upper) range.
func bounds(i int32) (time.Duration, time.Duration) {
	if i < subBuckets {
		return time.Duration(i) * time.Microsecond, time.Duration(i+1) * time.Microsecond
	}
	e := int(i-subBuckets)/subBuckets + 4
	sub := int64(i-subBuckets) % subBuckets
	width := int64(1) << (e - 4)
	lo := (int64(1) << e) + sub*width
	return time.Duration(lo) * time.Microsecond, time.Duration(lo+width) * time.Microsecond
}

// Add counts one duration.
func (h *Histogram) Add(d time.Duration) {
	if h.counts == nil {
		h.counts = map[int32]int64{}
	}
	h.counts[bucketOf(d)]++
	h.total++
}

// Merge adds o's counts to h.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.total == 0 {
		return
	}
	if h.counts == nil {
		h.counts = map[int32]int64{}
	}
	for k, v := range o.counts {
		h.counts[k] += v
	}
	h.total += o.total
}

// Count is the number of durations added.
func (h *Histogram) Count() int64 { return h.total }

// Quantile returns the q-quantile (0 < q ≤ 1) as the middle of the bucket
// holding it; zero for an empty histogram.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := int64(q*float64(h.total) + 0.5)
	rank = min(max(rank, 1), h.total)
	var seen int64
	for _, k := range h.sortedKeys() {
		seen += h.counts[k]
		if seen >= rank {
			lo, hi := bounds(k)
			return lo + (hi-lo)/2
		}
	}
	return 0
}

// CountBelow returns how many durations are below d (by bucket; a bucket
// that straddles d counts by its lower bound).
func (h *Histogram) CountBelow(d time.Duration) int64 {
	var n int64
	for k, v := range h.counts {
		if lo, _ := bounds(k); lo < d {
			n += v
		}
	}
	return n
}

func (h *Histogram) sortedKeys() []int32 {
	keys := make([]int32, 0, len(h.counts))
	for k := range h.counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (h *Histogram) clone() Histogram {
	c := Histogram{total: h.total, counts: make(map[int32]int64, len(h.counts))}
	for k, v := range h.counts {
		c.counts[k] = v
	}
	return c
}
