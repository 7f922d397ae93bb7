package statistics

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

func sampleDay(seed uint64) *day {
	r := rand.New(rand.NewPCG(seed, 7))
	s, _ := New("job", nil, DefaultSettings())
	for range 500 {
		st := r.IntN(numStatus)
		s.Record(Sample{At: day1, TaskID: "t", Status: st, Cost: time.Duration(r.ExpFloat64() * float64(50*time.Millisecond))})
		s.RecordLateness(day1, time.Duration(r.IntN(5000))*time.Microsecond)
	}
	d := s.days[dayOf(day1)]
	d.changed = false
	return d
}

// TestDayEncodings: the compact form round-trips exactly, the forms
// earlier versions stored (JSON, version 2) are still read, and the
// compact form is smaller.
func TestDayEncodings(t *testing.T) {
	t.Parallel()
	for seed := range uint64(5) {
		d := sampleDay(seed)
		v3 := appendDay(nil, d)
		v2 := appendDayAs(nil, d, dayVersion2)
		v1, _ := encodeDayV1(d)
		if v3[0] != dayVersion3 || len(v3) > len(v2)-20 {
			t.Errorf("a day in version %d is %d bytes, %d in version 2", v3[0], len(v3), len(v2))
		}
		for name, b := range map[string][]byte{"v3": v3, "v2": v2, "v1": v1} {
			back, err := decodeDay(b)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !reflect.DeepEqual(summaryOf(back), summaryOf(d)) {
				t.Fatalf("%s round trip differs:\n%+v\n%+v", name, summaryOf(back), summaryOf(d))
			}
		}
		if len(v3)*3 > len(v1) {
			t.Errorf("compact day %d bytes, JSON %d", len(v3), len(v1))
		}
	}
}

// TestDayThresholdsComeBack: version 3 writes the thresholds in the
// largest unit dividing all five, and every set reads back exactly: whole
// seconds, a millisecond among them, odd nanoseconds, zero, negative and
// the extremes. A unit it does not know, or a threshold its unit would
// overflow, is an error.
func TestDayThresholdsComeBack(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		th   [5]time.Duration
		unit byte
	}{
		{[5]time.Duration{time.Second, 10 * time.Second, time.Minute, 5 * time.Minute, time.Hour}, 3},
		{[5]time.Duration{time.Second, 1500 * time.Millisecond, time.Minute, 5 * time.Minute, time.Hour}, 2},
		{[5]time.Duration{time.Microsecond, time.Second, 0, 5 * time.Minute, time.Hour}, 1},
		{[5]time.Duration{-time.Second, 1, time.Minute, math.MaxInt64, math.MinInt64}, 0},
		{[5]time.Duration{}, 3},
	} {
		d := sampleDay(1)
		d.bucketTh = c.th
		b := appendDay(nil, d)
		back, err := decodeDay(b)
		if err != nil {
			t.Fatalf("%v: %v", c.th, err)
		}
		if back.bucketTh != c.th || back.bucketCounts() != d.bucketCounts() {
			t.Fatalf("thresholds %v read back as %v", c.th, back.bucketTh)
		}
		at := bytes.Index(b, appendDayUnit(c.th, c.unit))
		if at < 0 {
			t.Fatalf("%v: not written in unit %d", c.th, c.unit)
		}
		bad := slices.Clone(b)
		bad[at] = 4
		if _, err := decodeDay(bad); err == nil {
			t.Fatalf("%v: a day with threshold unit 4 read", c.th)
		}
	}
	d := sampleDay(1)
	d.bucketTh = [5]time.Duration{time.Second, time.Second, time.Second, time.Second, time.Second}
	b := appendDay(nil, d)
	at := bytes.Index(b, appendDayUnit(d.bucketTh, 3))
	huge := append(slices.Clone(b[:at+1]), binary.AppendVarint(nil, math.MaxInt64/int64(time.Second)+1)...)
	huge = append(huge, b[at+2:]...)
	if _, err := decodeDay(huge); err == nil {
		t.Fatal("a threshold past the largest duration read")
	}
}

// appendDayUnit is the unit byte and thresholds as version 3 writes them.
func appendDayUnit(th [5]time.Duration, unit byte) []byte {
	b := []byte{unit}
	for _, v := range th {
		b = binary.AppendVarint(b, int64(v/thresholdUnits()[unit]))
	}
	return b
}

func summaryOf(d *day) DaySummary {
	s, _ := New("job", nil, DefaultSettings())
	return s.summaryLocked(dayOf(day1), d)
}

// FuzzDecodeDay: a stored day that cannot be read is an error, never a
// panic or an absurd allocation.
func FuzzDecodeDay(f *testing.F) {
	v2 := appendDay(nil, sampleDay(1))
	v1, _ := encodeDayV1(sampleDay(2))
	f.Add(v2)
	f.Add(v1)
	f.Add(appendDayAs(nil, sampleDay(3), dayVersion2))
	f.Add([]byte{dayVersion2})
	f.Add([]byte{dayVersion2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{dayVersion3})
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if d, err := decodeDay(b); err == nil && d == nil {
			t.Fatal("nil day without an error")
		}
	})
}

// TestHistogramEncoding holds appendHist to the form stores hold (the
// count of non-zero buckets, then gaps and counts; what reader.hist
// reads), across the count's one- and two-byte varint, and after bytes
// already in the buffer.
func TestHistogramEncoding(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 9))
	for _, buckets := range []int{0, 1, 2, 127, 128, 129, 300, maxBucket + 1} {
		var h Histogram
		for _, k := range r.Perm(maxBucket + 1)[:buckets] {
			h.addN(int32(k), 1+r.Int64N(1<<40))
		}
		var want []byte
		want = binary.AppendUvarint(want, uint64(buckets))
		prev := int32(0)
		h.each(func(k int32, c int64) {
			want = binary.AppendUvarint(want, uint64(k-prev))
			want = binary.AppendVarint(want, c)
			prev = k
		})
		prefix := []byte{0xfe, 0xed}
		got := appendHist(slices.Clone(prefix), &h)
		if !bytes.Equal(got[:2], prefix) || !bytes.Equal(got[2:], want) {
			t.Fatalf("%d buckets: encoding differs from the stored form\n got %x\nwant %x", buckets, got[2:], want)
		}
		rd := &reader{b: got[2:]}
		back := rd.hist()
		if rd.err != nil || len(rd.b) != 0 || back.Count() != h.Count() || !reflect.DeepEqual(bucketsOfHist(&back), bucketsOfHist(&h)) {
			t.Fatalf("%d buckets: read back %d of %d counts (err %v, %d bytes left)", buckets, back.Count(), h.Count(), rd.err, len(rd.b))
		}
	}
}

// bucketsOfHist lists a histogram's non-zero buckets and counts.
func bucketsOfHist(h *Histogram) [][2]int64 {
	var out [][2]int64
	h.each(func(k int32, c int64) { out = append(out, [2]int64{int64(k), c}) })
	return out
}
