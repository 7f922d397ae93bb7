package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fom-go/fom/store"
)

// BenchmarkSaveStats is one flush in the steady state of an app whose
// schedules each ran a few rounds since the last: a day row (rewritten)
// and a page of the run history per schedule, in one transaction.
func BenchmarkSaveStats(b *testing.B) {
	const schedules = 1000
	s, err := Open(context.Background(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	day := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	dayData, page := make([]byte, 200), make([]byte, 300)
	batch := func(flush int) store.StatsBatch {
		var bt store.StatsBatch
		for i := range schedules {
			name := fmt.Sprintf("schedule-%d", i)
			seq := int64(flush * 5)
			bt.Days = append(bt.Days, store.Day{Schedule: name, Day: day, Data: dayData})
			bt.Rounds = append(bt.Rounds, store.Round{Schedule: name, Slot: int(seq % 50), First: seq - 4, Seq: seq,
				Start: day.Add(time.Duration(seq) * time.Second), Data: page})
		}
		return bt
	}
	ctx := context.Background()
	for f := range 10 { // a lap of the history's slots: rows are replaced from here on
		if err := s.SaveStats(ctx, batch(f)); err != nil {
			b.Fatal(err)
		}
	}
	batches := make([]store.StatsBatch, 10)
	for i := range batches {
		batches[i] = batch(10 + i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.SaveStats(ctx, batches[i%len(batches)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*schedules)/1000, "µs/schedule")
}
