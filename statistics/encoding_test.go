package statistics

import (
	"math/rand/v2"
	"reflect"
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

// TestDayEncodings: the compact form round-trips exactly, the JSON form
// earlier versions stored is still read, and the compact form is smaller.
func TestDayEncodings(t *testing.T) {
	t.Parallel()
	for seed := range uint64(5) {
		d := sampleDay(seed)
		v2, _ := encodeDay(d)
		v1, _ := encodeDayV1(d)
		for name, b := range map[string][]byte{"v2": v2, "v1": v1} {
			back, err := decodeDay(b)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !reflect.DeepEqual(summaryOf(back), summaryOf(d)) {
				t.Fatalf("%s round trip differs:\n%+v\n%+v", name, summaryOf(back), summaryOf(d))
			}
		}
		if len(v2)*3 > len(v1) {
			t.Errorf("compact day %d bytes, JSON %d", len(v2), len(v1))
		}
	}
}

func summaryOf(d *day) DaySummary {
	s, _ := New("job", nil, DefaultSettings())
	return s.summaryLocked(dayOf(day1), d)
}

// FuzzDecodeDay: a stored day that cannot be read is an error, never a
// panic or an absurd allocation.
func FuzzDecodeDay(f *testing.F) {
	v2, _ := encodeDay(sampleDay(1))
	v1, _ := encodeDayV1(sampleDay(2))
	f.Add(v2)
	f.Add(v1)
	f.Add([]byte{dayVersion2})
	f.Add([]byte{dayVersion2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if d, err := decodeDay(b); err == nil && d == nil {
			t.Fatal("nil day without an error")
		}
	})
}
