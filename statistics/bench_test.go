package statistics

import (
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
		ch, err := s.Take()
		if err != nil {
			b.Fatal(err)
		}
		ch.Done()
	}
}
