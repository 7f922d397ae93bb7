package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// BenchmarkSaveStatsSparse is a flush of an app whose 10 000 schedules
// fire rarely (hourly, say): each flush writes a day and a page for 14 of
// them, and pushes out to the tables the entries of the flush logKeep
// flushes before, rows scattered among the others'. Each such row costs
// the WAL a page, so the file's page size decides the bytes a flush
// writes (wchar of /proc/self/io, Linux). It is why a store keeps
// SQLite's 4 KiB pages: 64 KiB pages cut a dense flush's CPU by about a
// quarter (its row of hundreds of KB goes to the WAL in 6 writes instead
// of 90), but here they write 4 to 4.5 times the bytes and take half as
// long again, and for an app of 20 schedules whose flush changes one
// (perFlush 1) they wrote 140 KB a flush against 9 KB.
func BenchmarkSaveStatsSparse(b *testing.B) {
	for _, pageSize := range []int{4096, 65536} {
		b.Run(fmt.Sprint(pageSize), func(b *testing.B) { benchSaveStatsSparse(b, pageSize) })
	}
}

func benchSaveStatsSparse(b *testing.B, pageSize int) {
	const schedules, perFlush = 10000, 14
	dir := b.TempDir()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, FileName))
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{fmt.Sprintf("PRAGMA page_size=%d", pageSize), "PRAGMA journal_mode=WAL", "CREATE TABLE t(a)", "DROP TABLE t"} {
		if _, err := db.Exec(q); err != nil {
			b.Fatal(q, err)
		}
	}
	db.Close()
	s, err := Open(context.Background(), dir)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var got int
	if err := s.db.QueryRow("PRAGMA page_size").Scan(&got); err != nil || got != pageSize {
		b.Fatalf("page size %d (%v), want %d", got, err, pageSize)
	}
	day := time.Date(2026, 11, 18, 0, 0, 0, 0, time.UTC)
	dayData, page := make([]byte, 60), make([]byte, 180)
	entry := func(bt *store.StatsBatch, i int, seq int64) {
		name := fmt.Sprintf("schedule-%d", i)
		bt.Days = append(bt.Days, store.Day{Schedule: name, Day: day, Data: dayData})
		bt.Rounds = append(bt.Rounds, store.Round{Schedule: name, Slot: int(seq % 40), First: seq, Seq: seq,
			Start: day.Add(time.Duration(seq) * time.Hour), Data: page})
	}
	ctx := context.Background()
	// Every schedule's rows in the tables, as a day of running leaves them.
	s.log.keep = 0
	for from := 0; from < schedules; from += 1000 {
		var bt store.StatsBatch
		for i := from; i < from+1000; i++ {
			entry(&bt, i, 1)
		}
		if err := s.SaveStats(ctx, bt); err != nil {
			b.Fatal(err)
		}
	}
	s.log.keep = logKeep
	flush := func(n int) {
		var bt store.StatsBatch
		for k := range perFlush {
			i := (n*perFlush + k) * 7919 % schedules // scattered, each schedule in turn
			entry(&bt, i, int64(2+n))
		}
		if err := s.SaveStats(ctx, bt); err != nil {
			b.Fatal(err)
		}
	}
	for n := range 2 * logKeep { // the log full: each flush pushes one out
		flush(n)
	}
	before := wchar()
	b.ResetTimer()
	for n := range b.N {
		flush(2*logKeep + n)
	}
	b.StopTimer()
	if before >= 0 {
		b.ReportMetric(float64(wchar()-before)/float64(b.N), "B-written/flush")
	}
}

// wchar is the bytes this process passed to write calls (-1 if unknown).
func wchar() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}
