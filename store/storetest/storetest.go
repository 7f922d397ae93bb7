// Package storetest is the test suite every store.Store must pass: the
// same cases run against the embedded SQLite store and PostgreSQL, so the
// two behave alike wherever fom relies on them.
package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fom-go/fom/store"
)

// Open returns a fresh, empty store for one test; the suite closes it.
type Open func(t *testing.T) store.Store

// Run runs every case of the suite, each on a store of its own.
func Run(t *testing.T, open Open) {
	cases := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"ConfigIsReplacedAsAWhole", configIsReplacedAsAWhole},
		{"ConfigOfUnknownScheduleIsEmpty", configOfUnknownScheduleIsEmpty},
		{"Settings", settings},
		{"StatsUpsertAndLoadFrom", statsUpsertAndLoadFrom},
		{"FailuresNewestFirstWithLimit", failuresNewestFirstWithLimit},
		{"PruneByAgeAndCount", pruneByAgeAndCount},
		{"PruneByCountOnly", pruneByCountOnly},
		{"LargeBatch", largeBatch},
		{"ConcurrentWrites", concurrentWrites},
		{"EmptyWritesAreNoOps", emptyWritesAreNoOps},
		{"AuditNewestFirstAndPruned", auditNewestFirstAndPruned},
		{"RoundsInSlotsNewestFirst", roundsInSlotsNewestFirst},
		{"RoundsPrunedByAgeAndCount", roundsPrunedByAgeAndCount},
		{"NamespacesKeptAndFound", namespacesKeptAndFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			t.Cleanup(func() { s.Close() })
			c.fn(t, s)
		})
	}
	for _, c := range timerCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			t.Cleanup(func() { s.Close() })
			runTimers(t, s, c.fn)
		})
	}
}

var day0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func configIsReplacedAsAWhole(t *testing.T, s store.Store) {
	ctx := context.Background()
	if err := s.SaveConfig(ctx, "a", map[string]string{"threadMax": "4", "cron": "", "remark": "ünïcode ✓"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadConfig(ctx, "a")
	if err != nil || len(got) != 3 || got["cron"] != "" || got["remark"] != "ünïcode ✓" {
		t.Fatalf("first save: %v %v", got, err)
	}
	if err := s.SaveConfig(ctx, "a", map[string]string{"threadMax": "8"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveConfig(ctx, "b", map[string]string{"threadMax": "2"}); err != nil {
		t.Fatal(err)
	}
	got, _ = s.LoadConfig(ctx, "a")
	if len(got) != 1 || got["threadMax"] != "8" {
		t.Fatalf("the second save must replace the first as a whole: %v", got)
	}
	if err := s.SaveConfig(ctx, "a", nil); err != nil {
		t.Fatal(err)
	}
	if got, _ = s.LoadConfig(ctx, "a"); len(got) != 0 {
		t.Fatalf("an empty save clears: %v", got)
	}
	if got, _ = s.LoadConfig(ctx, "b"); got["threadMax"] != "2" {
		t.Fatalf("another schedule's edits touched: %v", got)
	}
}

func configOfUnknownScheduleIsEmpty(t *testing.T, s store.Store) {
	got, err := s.LoadConfig(context.Background(), "nobody")
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("%v %v: want an empty, non-nil map", got, err)
	}
}

func settings(t *testing.T, s store.Store) {
	ctx := context.Background()
	if _, ok, err := s.GetSetting(ctx, "a", "logLevel"); ok || err != nil {
		t.Fatalf("unset: %v %v", ok, err)
	}
	for _, v := range []string{"debug", "warn"} {
		if err := s.PutSetting(ctx, "a", "logLevel", v); err != nil {
			t.Fatal(err)
		}
	}
	if v, ok, err := s.GetSetting(ctx, "a", "logLevel"); v != "warn" || !ok || err != nil {
		t.Fatalf("got %q %v %v", v, ok, err)
	}
	if _, ok, _ := s.GetSetting(ctx, "b", "logLevel"); ok {
		t.Fatal("a setting of another schedule")
	}
}

func statsUpsertAndLoadFrom(t *testing.T, s store.Store) {
	ctx := context.Background()
	d1, d2, d3 := day0, day0.AddDate(0, 0, 1), day0.AddDate(0, 0, 2)
	err := s.SaveStats(ctx, store.StatsBatch{Days: []store.Day{
		{Schedule: "a", Day: d1, Data: []byte{1}}, {Schedule: "a", Day: d2, Data: []byte{2}},
		{Schedule: "a", Day: d3, Data: []byte{3, 0, 255}}, {Schedule: "b", Day: d2, Data: []byte("b")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SaveStats(ctx, store.StatsBatch{Days: []store.Day{{Schedule: "a", Day: d2.Add(13 * time.Hour), Data: []byte{22}}}}); err != nil {
		t.Fatal(err)
	}
	days, err := s.LoadDays(ctx, "a", d2.Add(5*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(days) != 2 || !days[0].Day.Equal(d2) || string(days[0].Data) != string([]byte{22}) || string(days[1].Data) != string([]byte{3, 0, 255}) {
		t.Fatalf("days from d2, oldest first, the day's latest data: %+v", days)
	}
	if days[0].Schedule != "a" || days[0].Day.Location() != time.UTC {
		t.Fatalf("day %+v", days[0])
	}
}

func failuresNewestFirstWithLimit(t *testing.T, s store.Store) {
	ctx := context.Background()
	var fs []store.Failure
	for i := range 10 {
		fs = append(fs, store.Failure{Schedule: "a", At: day0.Add(time.Duration(i) * time.Minute), TaskID: fmt.Sprint(i), Status: "failed",
			Error: "boom", Stack: "goroutine 1", Cost: time.Duration(i) * time.Millisecond})
	}
	if err := s.SaveStats(ctx, store.StatsBatch{Failures: fs}); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadFailures(ctx, "a", 3)
	if err != nil {
		t.Fatal(err)
	}
	want := fs[9]
	if len(got) != 3 || got[0].TaskID != "9" || got[2].TaskID != "7" {
		t.Fatalf("newest three: %+v", got)
	}
	if g := got[0]; !g.At.Equal(want.At) || g.Status != want.Status || g.Error != want.Error || g.Stack != want.Stack || g.Cost != want.Cost || g.Schedule != "a" {
		t.Fatalf("round trip: %+v, want %+v", g, want)
	}
}

func pruneByAgeAndCount(t *testing.T, s store.Store) {
	ctx := context.Background()
	var b store.StatsBatch
	for i := range 5 {
		d := day0.AddDate(0, 0, i)
		for _, sch := range []string{"a", "b"} {
			b.Days = append(b.Days, store.Day{Schedule: sch, Day: d, Data: []byte{byte(i)}})
			for j := range 3 {
				b.Failures = append(b.Failures, store.Failure{Schedule: sch, At: d.Add(time.Duration(j) * time.Hour), TaskID: fmt.Sprint(i, j), Status: "failed"})
			}
		}
	}
	if err := s.SaveStats(ctx, b); err != nil {
		t.Fatal(err)
	}
	cut := day0.AddDate(0, 0, 2)
	err := s.Prune(ctx, []store.Retention{{Schedule: "a", Before: cut, KeepFailures: 4}, {Schedule: "b", Before: cut, KeepFailures: 100}})
	if err != nil {
		t.Fatal(err)
	}
	for sch, wantFailures := range map[string]int{"a": 4, "b": 9} {
		days, _ := s.LoadDays(ctx, sch, day0)
		fs, _ := s.LoadFailures(ctx, sch, 100)
		if len(days) != 3 || !days[0].Day.Equal(cut) || len(fs) != wantFailures {
			t.Fatalf("%s after prune: %d days from %v, %d failures (want 3 from %v, %d)", sch, len(days), days[0].Day, len(fs), cut, wantFailures)
		}
		if fs[len(fs)-1].At.Before(cut) {
			t.Fatalf("%s: a failure before the cut survived", sch)
		}
	}
}

func pruneByCountOnly(t *testing.T, s store.Store) {
	ctx := context.Background()
	var fs []store.Failure
	for i := range 20 {
		fs = append(fs, store.Failure{Schedule: "a", At: day0.Add(time.Duration(i) * time.Second), TaskID: fmt.Sprint(i), Status: "failed"})
	}
	if err := s.SaveStats(ctx, store.StatsBatch{Failures: fs, Days: []store.Day{{Schedule: "a", Day: day0, Data: []byte{1}}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Prune(ctx, []store.Retention{{Schedule: "a", KeepFailures: 5}}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.LoadFailures(ctx, "a", 100)
	days, _ := s.LoadDays(ctx, "a", day0.AddDate(-1, 0, 0))
	if len(got) != 5 || got[0].TaskID != "19" || got[4].TaskID != "15" || len(days) != 1 {
		t.Fatalf("kept %d failures (%v) and %d days", len(got), got, len(days))
	}
}

// largeBatch writes more rows than one statement takes.
func largeBatch(t *testing.T, s store.Store) {
	ctx := context.Background()
	var b store.StatsBatch
	for i := range 2500 {
		b.Days = append(b.Days, store.Day{Schedule: fmt.Sprintf("s%d", i), Day: day0, Data: []byte{byte(i)}})
		b.Failures = append(b.Failures, store.Failure{Schedule: fmt.Sprintf("s%d", i%7), At: day0.Add(time.Duration(i)), TaskID: "t", Status: "rejected"})
	}
	if err := s.SaveStats(ctx, b); err != nil {
		t.Fatal(err)
	}
	days, _ := s.LoadDays(ctx, "s2499", day0)
	fs, _ := s.LoadFailures(ctx, "s3", 1000)
	if len(days) != 1 || days[0].Data[0] != byte(2499%256) || len(fs) != 357 {
		t.Fatalf("%d days, %d failures of s3", len(days), len(fs))
	}
	rules := make([]store.Retention, 2500)
	for i := range rules {
		rules[i] = store.Retention{Schedule: fmt.Sprintf("s%d", i), Before: day0, KeepFailures: 10}
	}
	if err := s.Prune(ctx, rules); err != nil {
		t.Fatal(err)
	}
	if fs, _ = s.LoadFailures(ctx, "s3", 1000); len(fs) != 10 {
		t.Fatalf("%d failures of s3 after pruning to 10", len(fs))
	}
}

func concurrentWrites(t *testing.T, s store.Store) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.SaveConfig(ctx, "a", map[string]string{"k": fmt.Sprint(i), "other": "x"}); err != nil {
				t.Error(err)
			}
			if err := s.SaveStats(ctx, store.StatsBatch{Days: []store.Day{{Schedule: "a", Day: day0, Data: []byte{byte(i)}}}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, _ := s.LoadConfig(ctx, "a")
	if len(got) != 2 || got["other"] != "x" {
		t.Fatalf("interleaved whole saves mixed: %v", got)
	}
}

func emptyWritesAreNoOps(t *testing.T, s store.Store) {
	ctx := context.Background()
	if err := s.SaveStats(ctx, store.StatsBatch{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Prune(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

func auditNewestFirstAndPruned(t *testing.T, s store.Store) {
	ctx := context.Background()
	for i := range 5 {
		e := store.AuditEntry{At: day0.AddDate(0, 0, i), Schedule: "a", Action: "config", Principal: "ops@127.0.0.1", Detail: fmt.Sprintf("threadMax: %d -> %d", i, i+1), Outcome: "ok"}
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	s.AppendAudit(ctx, store.AuditEntry{At: day0, Schedule: "b", Action: "stop", Principal: "x", Outcome: "refused"})
	got, err := s.LoadAudit(ctx, "a", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Detail != "threadMax: 4 -> 5" || !got[0].At.Equal(day0.AddDate(0, 0, 4)) || got[0].Principal != "ops@127.0.0.1" || got[0].Schedule != "a" {
		t.Fatalf("newest three: %+v", got)
	}
	if err := s.Prune(ctx, []store.Retention{{Schedule: "a", Before: day0.AddDate(0, 0, 3), KeepFailures: 10}}); err != nil {
		t.Fatal(err)
	}
	if got, _ = s.LoadAudit(ctx, "a", 10); len(got) != 2 {
		t.Fatalf("after pruning before day 3: %d entries", len(got))
	}
	if got, _ = s.LoadAudit(ctx, "b", 10); len(got) != 1 || got[0].Outcome != "refused" {
		t.Fatalf("another schedule's entries: %+v", got)
	}
}

// rounds returns n rounds of schedule with sequence numbers from, a minute
// apart from start, in slots of a history of keep.
func rounds(schedule string, from, n int64, keep int, start time.Time) []store.Round {
	var out []store.Round
	for seq := from; seq < from+n; seq++ {
		out = append(out, store.Round{Schedule: schedule, Slot: int(seq % int64(keep)), First: seq, Seq: seq,
			Start: start.Add(time.Duration(seq) * time.Minute), Data: []byte(fmt.Sprintf("round %d", seq))})
	}
	return out
}

func roundsInSlotsNewestFirst(t *testing.T, s store.Store) {
	ctx := context.Background()
	if seq, err := s.LastRoundSeq(ctx, "a"); err != nil || seq != 0 {
		t.Fatalf("empty history: last seq %d, %v", seq, err)
	}
	// Two flushes of a history of 5: rounds 1-4, then 5-9 (one batch
	// holding slot 4 twice: 4 is written by round 4, then 9).
	if err := s.SaveStats(ctx, store.StatsBatch{Rounds: rounds("a", 1, 4, 5, day0)}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveStats(ctx, store.StatsBatch{Rounds: append(rounds("a", 5, 5, 5, day0), rounds("b", 1, 1, 5, day0)...)}); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadRounds(ctx, "a", 100)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, r := range got {
		seqs = append(seqs, r.Seq)
		if want := fmt.Sprintf("round %d", r.Seq); string(r.Data) != want || !r.Start.Equal(day0.Add(time.Duration(r.Seq)*time.Minute)) || r.Schedule != "a" {
			t.Fatalf("round %d: %q at %s", r.Seq, r.Data, r.Start)
		}
	}
	if fmt.Sprint(seqs) != "[9 8 7 6 5]" {
		t.Fatalf("history of 5 after 9 rounds: %v, want [9 8 7 6 5]", seqs)
	}
	if got, _ := s.LoadRounds(ctx, "a", 2); len(got) != 2 || got[0].Seq != 9 {
		t.Fatalf("limit 2: %v", got)
	}
	if seq, err := s.LastRoundSeq(ctx, "a"); err != nil || seq != 9 {
		t.Fatalf("last seq %d, %v; want 9", seq, err)
	}
	r, ok, err := s.LoadRound(ctx, "a", "", 7)
	if err != nil || !ok || string(r.Data) != "round 7" {
		t.Fatalf("round 7: %v %v %q", ok, err, r.Data)
	}
	if _, ok, err := s.LoadRound(ctx, "a", "", 2); err != nil || ok {
		t.Fatalf("round 2 was overwritten by round 7, found %v (%v)", ok, err)
	}
	if got, _ := s.LoadRounds(ctx, "b", 10); len(got) != 1 {
		t.Fatalf("schedule b: %d rounds", len(got))
	}
	// A page of rounds 10 to 14 (slot 4) is found by any of them.
	page := store.Round{Schedule: "a", Slot: 4, First: 10, Seq: 14, Start: day0.Add(14 * time.Minute), Data: []byte("rounds 10-14")}
	if err := s.SaveStats(ctx, store.StatsBatch{Rounds: []store.Round{page}}); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []int64{10, 12, 14} {
		r, ok, err := s.LoadRound(ctx, "a", "", seq)
		if err != nil || !ok || r.First != 10 || r.Seq != 14 || string(r.Data) != "rounds 10-14" {
			t.Fatalf("round %d: %v %v %+v", seq, ok, err, r)
		}
	}
	if _, ok, _ := s.LoadRound(ctx, "a", "", 15); ok {
		t.Fatal("round 15 found in no page")
	}
	if seq, _ := s.LastRoundSeq(ctx, "a"); seq != 14 {
		t.Fatalf("last seq %d after the page, want 14", seq)
	}
}

func roundsPrunedByAgeAndCount(t *testing.T, s store.Store) {
	ctx := context.Background()
	// 20 rounds a minute apart in slots of 100, then a smaller history.
	if err := s.SaveStats(ctx, store.StatsBatch{Rounds: append(rounds("a", 1, 20, 100, day0), rounds("b", 1, 20, 100, day0)...)}); err != nil {
		t.Fatal(err)
	}
	err := s.Prune(ctx, []store.Retention{
		{Schedule: "a", Before: day0.Add(11 * time.Minute), KeepFailures: 1, KeepRounds: 100},
		{Schedule: "b", KeepFailures: 1, KeepRounds: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s.LoadRounds(ctx, "a", 100)
	b, _ := s.LoadRounds(ctx, "b", 100)
	if len(a) != 10 || a[len(a)-1].Seq != 11 {
		t.Fatalf("a by age: %d rounds, want 10 from seq 11", len(a))
	}
	// b's history shrank from 100 to 3: the pages in slots 3 and up go
	// (rounds 1 and 2 stay, in slots 1 and 2, until rounds overwrite them).
	if len(b) != 2 || b[0].Seq != 2 || b[1].Seq != 1 {
		t.Fatalf("b after its history shrank to 3: %d pages", len(b))
	}
}
