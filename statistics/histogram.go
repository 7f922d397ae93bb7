package statistics

import (
	"math"
	"math/bits"
	"time"
)

// Histogram counts durations in log-linear buckets: exact below 16µs, then
// 16 sub-buckets per power of two, so any percentile read from it is within
// about 6% of the true value. Two histograms merge by adding counts, which
// is what makes per-day percentiles combinable over any window.
//
// The counts sit in arrays of 16, one per power of two ("octave"),
// allocated on first use: recording is an index, not a map update, and a
// schedule whose costs stay within a few octaves holds a few of them.
// The octave added to last is kept at hand: a schedule's costs mostly
// fall in the same octave, and with thousands of schedules the octaves'
// array of pointers is one more line to fetch from memory on every add.
type Histogram struct {
	last    *[subBuckets]int64 // octaves[lastO], or nil
	lastO   int
	total   int64
	octaves []*[subBuckets]int64 // octave o counts buckets o*16 .. o*16+15 (after what an add reads)
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
	const most = int64(math.MaxInt64 / time.Microsecond) // the top bucket ends at the longest duration
	return time.Duration(min(lo, most)) * time.Microsecond, time.Duration(min(lo+width, most)) * time.Microsecond
}

// maxBucket is the bucket of the longest duration, bucketOf(MaxInt64).
const maxBucket = 800

// Add counts one duration.
func (h *Histogram) Add(d time.Duration) {
	h.addN(bucketOf(d), 1)
}

// addN adds n to bucket k (0 <= k <= maxBucket).
func (h *Histogram) addN(k int32, n int64) {
	o := int(k) / subBuckets
	if h.last != nil && h.lastO == o {
		h.last[int(k)%subBuckets] += n
		h.total += n
		return
	}
	if o >= len(h.octaves) {
		h.octaves = append(h.octaves, make([]*[subBuckets]int64, o+1-len(h.octaves))...)
	}
	if h.octaves[o] == nil {
		h.octaves[o] = new([subBuckets]int64)
	}
	h.last, h.lastO = h.octaves[o], o
	h.last[int(k)%subBuckets] += n
	h.total += n
}

// octaveCount is the number of octaves with counts.
func (h *Histogram) octaveCount() int {
	n := 0
	for _, oct := range h.octaves {
		if oct != nil {
			n++
		}
	}
	return n
}

// each calls f for every bucket with a count, in bucket order.
func (h *Histogram) each(f func(k int32, n int64)) {
	for o, oct := range h.octaves {
		if oct == nil {
			continue
		}
		for i, n := range oct {
			if n != 0 {
				f(int32(o*subBuckets+i), n)
			}
		}
	}
}

// Merge adds o's counts to h.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.total == 0 {
		return
	}
	o.each(h.addN)
}

// subtract takes o's counts from h, which holds them.
func (h *Histogram) subtract(o *Histogram) {
	o.each(func(k int32, n int64) { h.addN(k, -n) })
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
	var at int32 = -1
	h.each(func(k int32, n int64) {
		seen += n
		if at < 0 && seen >= rank {
			at = k
		}
	})
	if at < 0 {
		return 0
	}
	lo, hi := bounds(at)
	return lo + (hi-lo)/2
}

// CountBelow returns how many durations are below d (by bucket; a bucket
// that straddles d counts by its lower bound).
func (h *Histogram) CountBelow(d time.Duration) int64 {
	var below int64
	h.each(func(k int32, n int64) {
		if lo, _ := bounds(k); lo < d {
			below += n
		}
	})
	return below
}
