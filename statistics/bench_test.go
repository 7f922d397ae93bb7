package statistics

import (
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// BenchmarkTake is a flush's share of one schedule firing every second:
// five one-task rounds recorded, then taken and marked written.
func BenchmarkTake(b *testing.B) {
	clk := clockwork.NewFakeClockAt(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	s, _ := New("bench", clk, DefaultSettings())
	b.ReportAllocs()
	for b.Loop() {
		for r := range 5 {
			at := clk.Now().Add(time.Duration(r) * time.Second)
			s.Record(Sample{At: at, TaskID: "t", Status: Success, Cost: time.Millisecond})
			s.RecordRound(RoundSample{Number: int64(r + 1), Cause: "plan", Planned: at, Start: at, End: at.Add(time.Millisecond),
				Tasks: []TaskSample{{ID: "t", Status: Success, Started: at, Cost: time.Millisecond}}})
		}
		ch := s.Take()
		ch.Done()
	}
}

// BenchmarkRecordFires is a fire's statistics (its task's outcome, then
// its round) on one of 10 000 schedules in turn, as an aligned burst
// records them: each fire finds its schedule's statistics cold. Run under
// `valgrind --tool=callgrind --cache-sim=yes` it counts the cache misses
// of a fire's recording; its time per op is mostly those misses.
func BenchmarkRecordFires(b *testing.B) { benchmarkFires(b, 0) }

// BenchmarkRecordFiresAndFlush is BenchmarkRecordFires with a flush's
// Take of every schedule after each one's fifth fire, as a running app
// with schedules firing every second and a flush every five: what a fire
// costs the statistics, recording and writing out.
func BenchmarkRecordFiresAndFlush(b *testing.B) { benchmarkFires(b, 5) }

func benchmarkFires(b *testing.B, flushEvery int) {
	clk := clockwork.NewFakeClockAt(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	ss := make([]*Stats, 10000)
	for i := range ss {
		ss[i], _ = New(fmt.Sprintf("job-%d", i), clk, DefaultSettings())
	}
	fire := func(s *Stats, i int) {
		at := clk.Now().Add(time.Duration(i/len(ss)) * time.Second)
		cost := time.Duration(900+i%200) * time.Microsecond
		late := time.Duration(100+i%5000) * time.Microsecond
		s.Record(Sample{At: at.Add(late + cost), TaskID: "run", Status: Success, Started: at.Add(late), Cost: cost})
		s.RecordRound(RoundSample{Number: int64(i/len(ss) + 1), Cause: "plan", Planned: at, Start: at.Add(late), End: at.Add(late + cost),
			Tasks: []TaskSample{{ID: "run", Status: Success, Started: at.Add(late), Cost: cost}}})
	}
	for i := range 2 * len(ss) { // two rounds each: every schedule has its day and history
		fire(ss[i%len(ss)], i)
	}
	i := 2 * len(ss)
	b.ReportAllocs()
	for b.Loop() {
		fire(ss[i%len(ss)], i)
		i++
		if flushEvery > 0 && i%(flushEvery*len(ss)) == 0 {
			for _, s := range ss {
				ch := s.Take()
				ch.Done()
			}
		}
	}
}

// BenchmarkEncodeDay is a flush's encoding of one changed day whose costs
// and lateness spread over several octaves, as an aligned burst's
// lateness does.
func BenchmarkEncodeDay(b *testing.B) {
	d := sampleDay(1)
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		buf = appendDay(buf[:0], d)
	}
	b.SetBytes(int64(len(buf)))
}
