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
// and a page of the run history per schedule, in one transaction. The
// store holds what a week of such flushes leaves: seven days per schedule
// and a lap of the history's slots.
func BenchmarkSaveStats(b *testing.B) { benchSaveStats(b, 0) }

// BenchmarkSaveStatsDrifting is BenchmarkSaveStats where one schedule in
// a hundred has a page of a round more every seventh flush (a flush that
// came a round late for it), as in a running app: its pages leave the
// lap of slots the log replaces, and each flush pushes out a row with a
// few entries still live among a thousand.
func BenchmarkSaveStatsDrifting(b *testing.B) { benchSaveStats(b, 100) }

// benchSaveStats runs the flushes; every drift-th schedule drifts (0:
// none).
func benchSaveStats(b *testing.B, drift int) {
	const schedules, days, slots = 1000, 7, 10
	s, err := Open(context.Background(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	first := time.Date(2026, 11, 18, 0, 0, 0, 0, time.UTC)
	dayData, page := make([]byte, 60), make([]byte, 180)
	names := make([]string, schedules)
	for i := range names {
		names[i] = fmt.Sprintf("schedule-%d", i)
	}
	batch := func(day, flush int) store.StatsBatch {
		var bt store.StatsBatch
		for i, name := range names {
			seq := int64(flush * 5)
			if drift > 0 && i%drift == 0 {
				seq += int64(flush / 7)
			}
			bt.Days = append(bt.Days, store.Day{Schedule: name, Day: first.AddDate(0, 0, day), Data: dayData})
			bt.Rounds = append(bt.Rounds, store.Round{Schedule: name, Slot: int(seq % (slots * 5)), First: seq - 4, Seq: seq,
				Start: first.Add(time.Duration(seq) * time.Second), Data: page})
		}
		return bt
	}
	ctx := context.Background()
	flush := 0
	for day := range days { // a day row per schedule and day
		if err := s.SaveStats(ctx, batch(day, flush)); err != nil {
			b.Fatal(err)
		}
		flush++
	}
	for range slots { // a lap of the history's slots: rows are replaced from here on
		if err := s.SaveStats(ctx, batch(days-1, flush)); err != nil {
			b.Fatal(err)
		}
		flush++
	}
	batches := make([]store.StatsBatch, 7*slots) // drifting pages come back to their slots after as many
	for i := range batches {
		batches[i] = batch(days-1, flush+i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// With a deadline, as an app's flush has one.
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := s.SaveStats(fctx, batches[i%len(batches)])
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*schedules)/1000, "µs/schedule")
}
