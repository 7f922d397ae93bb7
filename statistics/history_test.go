package statistics

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/jonboulle/clockwork"

	"github.com/fom-go/fom/store"
)

// pageData is a page as stored: its header and the rounds.
func pageData(rounds []byte, n int) []byte { return append(pageHeader(n, len(rounds)), rounds...) }

func round(n int64, at time.Time, cause string, tasks ...TaskSample) RoundSample {
	return RoundSample{Number: n, Cause: cause, Planned: at, Start: at.Add(3 * time.Millisecond), End: at.Add(50 * time.Millisecond), Tasks: tasks}
}

// TestRunHistorySurvivesARestart records rounds of every cause, flushes
// some, restarts on the same file: the history lists them all newest
// first with their causes, counts and outcomes; a round opens to its
// tasks (errors and panics' stacks included); numbering goes on after
// the stored rounds.
func TestRunHistorySurvivesARestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st := openStore(t, dir)
	clk := clockwork.NewFakeClockAt(day1)
	s, _ := New("job", clk, DefaultSettings())
	at := day1.Add(time.Hour)
	s.RecordRound(round(1, at, "start", TaskSample{ID: "a", Status: Success, Started: at, Cost: time.Millisecond}))
	s.RecordRound(round(2, at.Add(time.Minute), "plan",
		TaskSample{ID: "a", Status: Success, Cost: time.Millisecond},
		TaskSample{ID: "b", Status: Failed, Cost: 2 * time.Millisecond, Err: fmt.Errorf("import: %w", errors.New("no such file"))},
		TaskSample{ID: "c", Status: Failed, Err: stackErr{}}))
	if err := s.Flush(ctx, st); err != nil {
		t.Fatal(err)
	}
	if n := len(s.RecentRounds()); n != 0 {
		t.Fatalf("%d rounds still in memory after a flush", n)
	}
	s.RecordRound(RoundSample{Number: 3, Cause: "exec", By: "alice@127.0.0.1", Planned: at.Add(2 * time.Minute), Start: at.Add(2 * time.Minute), End: at.Add(3 * time.Minute),
		Tasks: []TaskSample{{ID: "a", Status: Timeout, Cost: time.Minute}}})
	hist, err := s.History(ctx, st, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range hist {
		got = append(got, fmt.Sprintf("%d:%d %s %s %v", r.Seq, r.Number, r.Cause, r.Outcome, r.Counts))
	}
	want := "[3:3 exec timeout map[timeout:1] 2:2 plan partial map[failed:2 success:1] 1:1 start success map[success:1]]"
	if fmt.Sprint(got) != want {
		t.Fatalf("history (memory and store):\n got %v\nwant %s", got, want)
	}
	if hist[0].By != "alice@127.0.0.1" || hist[1].Late != 3*time.Millisecond || hist[1].Duration != 47*time.Millisecond {
		t.Fatalf("by %q, late %s, duration %s", hist[0].By, hist[1].Late, hist[1].Duration)
	}
	st = restart(t, s, st, dir)
	defer st.Close()
	again, _ := New("job", clk, DefaultSettings())
	if _, err := again.Load(ctx, st); err != nil {
		t.Fatal(err)
	}
	r, ok, err := again.Round(ctx, st, "", 2)
	if err != nil || !ok {
		t.Fatalf("round 2 after restart: %v %v", ok, err)
	}
	if len(r.Tasks) != 3 || r.Tasks[1].Error != "import: no such file" || r.Tasks[2].Stack == "" || r.Tasks[0].Status != "success" || r.Tasks[1].Cost != 2*time.Millisecond {
		t.Fatalf("round 2's tasks: %+v", r.Tasks)
	}
	again.RecordRound(round(1, at.Add(time.Hour), "plan"))
	hist, _ = again.History(ctx, st, 10)
	if len(hist) != 4 || hist[0].Seq != 4 || hist[0].Outcome != "success" {
		t.Fatalf("after restart: %d rounds, newest seq %d (%s); want 4, seq 4", len(hist), hist[0].Seq, hist[0].Outcome)
	}
}

// TestRunHistoryIsBounded: a history of 5 keeps the newest 5 in the store
// whatever the number of rounds and flushes; between two flushes memory
// keeps at most 5, counting what it dropped.
func TestRunHistoryIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, t.TempDir())
	defer st.Close()
	set := DefaultSettings()
	set.Rounds = 5
	s, _ := New("job", clockwork.NewFakeClockAt(day1), set)
	at := day1
	for i := range 23 {
		at = at.Add(time.Second)
		s.RecordRound(round(int64(i+1), at, "plan", TaskSample{ID: "t"}, TaskSample{ID: "u", Status: Failed, Err: stackErr{}}))
		if i%4 == 3 {
			if err := s.Flush(ctx, st); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 9 { // three waiting and nine more, no flush: seven dropped
		at = at.Add(time.Second)
		s.RecordRound(round(0, at, "plan", TaskSample{ID: "v", Status: Failed, Err: stackErr{}}))
	}
	if u := s.UnsavedRounds(); u != 7 {
		t.Fatalf("unsaved rounds %d, want 7", u)
	}
	if err := s.Flush(ctx, st); err != nil {
		t.Fatal(err)
	}
	// The store holds at most 5 pages (one per flush), and the newest 5
	// rounds among them.
	pages, _ := st.LoadRounds(ctx, "job", 100)
	hist, _ := s.History(ctx, st, 5)
	if len(pages) > 5 || len(hist) != 5 || hist[0].Seq != 32 || hist[4].Seq != 28 {
		t.Fatalf("%d pages stored; history of %d rounds", len(pages), len(hist))
	}
	for _, r := range hist { // the rounds kept after trimming read whole
		if r.Counts["failed"] != 1 || r.Outcome != "failed" {
			t.Fatalf("round %d after trimming: %v", r.Seq, r.Counts)
		}
	}
}

// TestRunHistoryOfAFailedFlush: the rounds of a flush that failed are
// written by the next one, and stay listed in between.
func TestRunHistoryOfAFailedFlush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	real := openStore(t, t.TempDir())
	defer real.Close()
	st := &failingStore{Store: real, broken: true}
	s, _ := New("job", clockwork.NewFakeClockAt(day1), DefaultSettings())
	s.RecordRound(round(1, day1, "plan"))
	if err := s.Flush(ctx, st); err == nil {
		t.Fatal("flush to a failing store succeeded")
	}
	s.RecordRound(round(2, day1.Add(time.Second), "plan"))
	if h, _ := s.History(ctx, st, 10); len(h) != 2 {
		t.Fatalf("%d rounds listed after a failed flush, want 2", len(h))
	}
	st.broken = false
	if err := s.Flush(ctx, st); err != nil {
		t.Fatal(err)
	}
	if n := len(s.RecentRounds()); n != 0 {
		t.Fatalf("%d rounds still in memory after healing", n)
	}
	if h, _ := s.History(ctx, real, 10); len(h) != 2 || h[0].Seq != 2 {
		t.Fatalf("stored %d rounds after healing", len(h))
	}
}

// TestALargeRoundKeepsItsFailures: of a round of 1 000 tasks, 30 failed,
// the record details the 30 failures and 70 successes and counts all.
func TestALargeRoundKeepsItsFailures(t *testing.T) {
	t.Parallel()
	s, _ := New("job", clockwork.NewFakeClockAt(day1), DefaultSettings())
	var tasks []TaskSample
	for i := range 1000 {
		task := TaskSample{ID: fmt.Sprint(i), Status: Success}
		if i%33 == 32 {
			task.Status, task.Err = Failed, errors.New(strings.Repeat("x", 5000))
		}
		tasks = append(tasks, task)
	}
	s.RecordRound(round(1, day1, "plan", tasks...))
	r := s.RecentRounds()[0]
	failed := 0
	for _, task := range r.Tasks {
		if task.Status == "failed" {
			failed++
			if len(task.Error) > maxTaskError+len("…") {
				t.Fatalf("an error of %d bytes kept whole", len(task.Error))
			}
		}
	}
	if len(r.Tasks) != MaxRoundTasks || failed != 30 || r.Omitted != 900 || r.Counts["success"] != 970 || r.Outcome != "partial" {
		t.Fatalf("%d tasks detailed (%d failed), %d omitted, counts %v", len(r.Tasks), failed, r.Omitted, r.Counts)
	}
	ch := s.Take()
	page, err := DecodePage(ch.Rounds[0])
	if err != nil || len(page) != 1 {
		t.Fatalf("decoded: %v, %d rounds", err, len(page))
	}
	if back := page[0]; len(back.Tasks) != len(r.Tasks) || back.Omitted != r.Omitted || back.Counts["failed"] != 30 || back.Seq != r.Seq || !back.Start.Equal(r.Start) {
		t.Fatalf("decoded: %d tasks, %d omitted, %v", len(back.Tasks), back.Omitted, back.Counts)
	}
}

// TestUnreadableRoundsAreNamed: a corrupt record is an error naming the
// schedule and round; in a listing it shows as unreadable, the others
// still listed.
func TestUnreadableRoundsAreNamed(t *testing.T) {
	t.Parallel()
	pageOf := func(seq int64, x RoundSample) []byte { return pageData(appendRound(nil, "job", seq, &x), 1) }
	whole := pageOf(7, round(1, day1, "plan", TaskSample{ID: strings.Repeat("x", 30), Status: Failed}))
	for _, data := range [][]byte{nil, {9}, {pageVersion1}, {pageVersion1, 1, 7, 0, 200}, whole[:len(whole)-5], {pageVersion1, 2, 7, 0, roundVersion1, 1}, append(slices.Clone(whole[:len(whole)-2]), 1)} {
		_, err := DecodePage(store.Round{Schedule: "job", First: 7, Seq: 7, Data: data})
		if err == nil || !strings.Contains(err.Error(), `schedule "job": rounds #7-#7 of the history unreadable`) {
			t.Fatalf("%v: %v", data, err)
		}
	}
	ctx := context.Background()
	st := openStore(t, t.TempDir())
	defer st.Close()
	if err := st.SaveStats(ctx, store.StatsBatch{Rounds: []store.Round{
		{Schedule: "job", Slot: 1, First: 1, Seq: 1, Start: day1, Data: pageOf(1, round(1, day1, "plan", TaskSample{ID: "t"}))},
		{Schedule: "job", Slot: 2, First: 2, Seq: 2, Start: day1.Add(time.Second), Data: []byte{1, 2, 3}},
	}}); err != nil {
		t.Fatal(err)
	}
	s, _ := New("job", clockwork.NewFakeClockAt(day1), DefaultSettings())
	h, err := s.History(ctx, st, 10)
	if err != nil || len(h) != 2 || h[0].Cause != "unreadable" || h[1].Outcome != "success" {
		t.Fatalf("%v %+v", err, h)
	}
}

// TestRoundCountsItsLateness: a recorded round counts its lateness on the
// day it started (a round that started early counts as on time); a batch
// has no plan and counts none.
func TestRoundCountsItsLateness(t *testing.T) {
	day := time.Date(2026, 5, 2, 0, 0, 0, 0, time.UTC)
	clk := clockwork.NewFakeClockAt(day.Add(12 * time.Hour))
	s, err := New("job", clk, DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	at := day.Add(-time.Hour) // 23:00 the day before the clock's
	s.RecordRound(RoundSample{Number: 1, Cause: "plan", Planned: at, Start: at.Add(4 * time.Millisecond), End: at.Add(time.Second)})
	s.RecordRound(RoundSample{Number: 1, Batch: true, Cause: "submit", Planned: at, Start: at.Add(time.Minute), End: at.Add(time.Minute)})
	noon := day.Add(12 * time.Hour)
	s.RecordRound(RoundSample{Number: 2, Cause: "plan", Planned: noon, Start: noon.Add(-time.Millisecond), End: noon})
	if prev := s.Day(day.AddDate(0, 0, -1)); prev.Rounds != 1 || prev.LateMax != 4*time.Millisecond {
		t.Fatalf("day of the late round: %d rounds, late max %v; want 1, 4ms", prev.Rounds, prev.LateMax)
	}
	if d := s.Day(day); d.Rounds != 1 || d.LateMax != 0 {
		t.Fatalf("day of the early round: %d rounds, late max %v; want 1, 0", d.Rounds, d.LateMax)
	}
}

// TestSkipRoundEndsWhereReadRoundDoes: for rounds of every shape (batch,
// by, tasks with errors and panics' stacks, over MaxRoundTasks) skipRound
// stops exactly where readRound does; a round cut short anywhere is nil.
func TestSkipRoundEndsWhereReadRoundDoes(t *testing.T) {
	t.Parallel()
	many := make([]TaskSample, 300)
	for i := range many {
		many[i] = TaskSample{ID: fmt.Sprint("task-", i), Status: i % numStatus, Started: day1, Cost: time.Duration(i) * time.Hour}
		if i%7 == 0 {
			many[i].Err = errors.New(strings.Repeat("e", 200+i))
		}
	}
	batch := round(5, day1, "submit", TaskSample{ID: "", Status: Canceled})
	batch.Batch, batch.By = true, strings.Repeat("operator ", 40)
	rounds := []RoundSample{
		round(1, day1, "plan"),
		round(1<<40, day1.AddDate(30, 0, 0), "exec", TaskSample{ID: "t", Status: Failed, Err: errors.New("boom")}),
		batch,
		round(3, day1, "rerun", many...),
	}
	for i, x := range rounds {
		enc := appendRound(nil, "job", int64(i)*1e12+1, &x)
		tail := []byte{42, 43}
		full := append(slices.Clone(enc), tail...)
		rd := &reader{b: full}
		if _, err := readRound(rd, "job", true); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if got := skipRound(full); !slices.Equal(got, rd.b) || !slices.Equal(got, tail) {
			t.Fatalf("round %d: skipped to %v, read to %v", i, got, rd.b)
		}
		for cut := range len(enc) {
			if got := skipRound(enc[:cut]); got != nil {
				t.Fatalf("round %d cut at %d of %d: skipped to %v", i, cut, len(enc), got)
			}
		}
	}
}

// TestHistoryWithoutAStoreKeepsTheNewest: with no flush, 1 000 rounds
// leave the newest Settings.Rounds, in order, and count the rest as
// unsaved; once the page has grown, recording a round allocates nothing
// (the kept rounds are copied down in their array).
func TestHistoryWithoutAStoreKeepsTheNewest(t *testing.T) {
	// Not parallel: AllocsPerRun counts the whole process's allocations.
	set := DefaultSettings()
	set.Rounds = 50
	s, _ := New("job", clockwork.NewFakeClockAt(day1), set)
	at := day1
	ids := make([]string, 7)
	for i := range ids {
		ids[i] = fmt.Sprint("task-", i)
	}
	tasks := make([]TaskSample, 1)
	record := func(i int) {
		at = at.Add(time.Second)
		tasks[0] = TaskSample{ID: ids[i%7], Status: i % numStatus, Started: at, Cost: time.Duration(i) * time.Millisecond}
		s.RecordRound(round(int64(i), at, "plan", tasks...))
	}
	for i := 1; i <= 1000; i++ {
		record(i)
	}
	rs := s.RecentRounds()
	if len(rs) != 50 || rs[0].Number != 1000 || rs[49].Number != 951 || rs[0].Tasks[0].ID != "task-6" {
		t.Fatalf("%d rounds kept, newest %d, oldest %d", len(rs), rs[0].Number, rs[len(rs)-1].Number)
	}
	for i, r := range rs {
		if r.Number != int64(1000-i) || r.Seq != int64(1000-i) {
			t.Fatalf("round %d of the history is number %d, seq %d", i, r.Number, r.Seq)
		}
	}
	if u := s.UnsavedRounds(); u != 950 {
		t.Fatalf("unsaved %d, want 950", u)
	}
	// AllocsPerRun would round an allocation every few dozen rounds down
	// to none: the count is taken over all of them. It is the whole
	// process's, which a goroutine of the runtime or of an earlier test
	// may add to once in a while; an allocation of the history would be
	// in every try.
	var counts []uint64
	for try, next := 0, 1001; try < 3; try++ {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for range 500 {
			record(next)
			next++
		}
		runtime.ReadMemStats(&m1)
		if n := m1.Mallocs - m0.Mallocs; n != 0 {
			counts = append(counts, n)
			continue
		}
		return
	}
	t.Fatalf("allocations in 500 rounds, three tries: %v", counts)
}

// TestSkipVarints compares skipping by continuation bits with decoding
// one varint after another, from every start and for every count, on
// varints of every length; past the end it is len(b)+1.
func TestSkipVarints(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	var b []byte
	for range 200 {
		b = binary.AppendUvarint(b, r.Uint64()>>r.IntN(64))
	}
	for i := 0; i < len(b); i++ {
		at := i
		for n := 1; n <= 40; n++ {
			if at <= len(b) {
				if at < len(b) {
					_, k := binary.Uvarint(b[at:])
					if k <= 0 {
						at = len(b) + 1
					} else {
						at += k
					}
				} else {
					at = len(b) + 1
				}
			}
			if got := skipVarints(b, i, n); got != at {
				t.Fatalf("skip %d varints from %d: %d, want %d", n, i, got, at)
			}
		}
	}
}

// TestRoundInstantsComeBackExactly: a round's planned, end and task
// start are kept from its start (version 2) and read back to the
// nanosecond: before the start, long after it, the zero time (a task that
// never started), across a wrap of the difference.
func TestRoundInstantsComeBackExactly(t *testing.T) {
	t.Parallel()
	start := day1.Add(123456789 * time.Nanosecond)
	far := time.Unix(0, math.MaxInt64).UTC()
	early := time.Unix(0, math.MinInt64+1).UTC()
	cases := []struct{ planned, end, started time.Time }{
		{start.Add(-3 * time.Millisecond), start.Add(time.Second), start.Add(7)},
		{start.Add(time.Hour), start, time.Time{}},
		{early, far, far},
		{far, early, early},
	}
	for i, c := range cases {
		x := RoundSample{Number: 9, Cause: "exec", By: "ops", Planned: c.planned, Start: start, End: c.end,
			Tasks: []TaskSample{{ID: "t", Status: Success, Started: c.started, Cost: time.Millisecond}}}
		enc := appendRound(nil, "job", 3, &x)
		if enc[len(binary.AppendUvarint(nil, 3))+len(binary.AppendVarint(nil, start.UnixNano()))] != roundVersion2 {
			t.Fatalf("case %d: not written as version 2", i)
		}
		r, err := readRound(&reader{b: enc}, "job", true)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if !r.Start.Equal(start) || !r.Planned.Equal(c.planned) || !r.End.Equal(c.end) || !r.Tasks[0].Started.Equal(c.started) || r.Tasks[0].Started.IsZero() != c.started.IsZero() {
			t.Fatalf("case %d: read planned %v end %v started %v; wrote %v %v %v", i, r.Planned, r.End, r.Tasks[0].Started, c.planned, c.end, c.started)
		}
	}
	one := round(1, day1, "plan", TaskSample{ID: "import", Status: Success, Started: day1.Add(time.Millisecond), Cost: time.Millisecond})
	if n, was := len(appendRound(nil, "import", 1000, &one)), len(appendRoundV1(1000, one)); n > was-15 {
		t.Fatalf("a round of one task is %d bytes, %d in version 1", n, was)
	} else {
		t.Logf("a round of one task: %d bytes, %d in version 1", n, was)
	}
}

// appendRoundV1 writes a round of one task in version 1's form, which
// pages stored by earlier releases hold: instants as Unix ns.
func appendRoundV1(seq int64, x RoundSample) []byte {
	b := binary.AppendUvarint(nil, uint64(seq))
	b = binary.AppendVarint(b, x.Start.UnixNano())
	b = append(b, roundVersion1)
	for _, v := range []int64{x.Number, 0, x.Planned.UnixNano(), x.End.UnixNano(), 1, 0, 0, 0, 0, 0} { // number, batch, planned, end, six counts
		b = binary.AppendVarint(b, v)
	}
	b = binary.AppendUvarint(b, 0) // plan
	b = appendString(b, "")
	tk := x.Tasks[0]
	b = append(b, 1)
	b = appendString(b, tk.ID)
	b = binary.AppendUvarint(b, uint64(tk.Status))
	b = binary.AppendVarint(b, tk.Started.UnixNano())
	b = binary.AppendVarint(b, int64(tk.Cost))
	b = appendString(b, "")
	b = appendString(b, "")
	b = append(b, 0)
	return binary.AppendVarint(b, 0)
}

// TestVersion1RoundsStillRead: a page of an earlier release, its rounds in
// version 1, reads as before, and one that mixes both versions (a page
// handed back by a failed flush across an upgrade cannot, but a reader
// must not care) reads round by round.
func TestVersion1RoundsStillRead(t *testing.T) {
	t.Parallel()
	x := round(4, day1, "plan", TaskSample{ID: "import", Status: Success, Started: day1.Add(2 * time.Millisecond), Cost: 5 * time.Millisecond})
	x.Planned, x.Start, x.End = day1.Add(-time.Millisecond), day1, day1.Add(9*time.Millisecond)
	old := appendRoundV1(10, x)
	body := append(slices.Clone(old), appendRound(nil, "job", 11, &x)...)
	if got := skipRound(body); !slices.Equal(got, body[len(old):]) {
		t.Fatal("skipRound does not end a version 1 round where it ends")
	}
	rs, err := DecodePage(store.Round{Schedule: "job", First: 10, Seq: 11, Data: pageData(body, 2)})
	if err != nil || len(rs) != 2 {
		t.Fatalf("%v, %d rounds", err, len(rs))
	}
	for _, r := range rs {
		if !r.Planned.Equal(x.Planned) || !r.Start.Equal(x.Start) || !r.End.Equal(x.End) || r.Late != time.Millisecond ||
			r.Duration != 9*time.Millisecond || r.Outcome != "success" || len(r.Tasks) != 1 || !r.Tasks[0].Started.Equal(x.Tasks[0].Started) || r.Tasks[0].Cost != 5*time.Millisecond {
			t.Fatalf("round #%d read as %+v", r.Seq, r)
		}
	}
}

// TestTaskIDsComeBack: a task named as its schedule (a Run job's one task)
// is written as one byte; every other id, the empty one included, as
// itself; each reads back as written, and skipRound ends where readRound
// does.
func TestTaskIDsComeBack(t *testing.T) {
	t.Parallel()
	ids := []string{"import", "", "import.Run", "other", "импорт"}
	var tasks []TaskSample
	for _, id := range ids {
		tasks = append(tasks, TaskSample{ID: id, Status: Success, Started: day1, Cost: time.Millisecond})
	}
	x := round(1, day1, "plan", tasks...)
	enc := appendRound(nil, "import", 1, &x)
	full := append(slices.Clone(enc), 42)
	rd := &reader{b: full}
	r, err := readRound(rd, "import", true)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if r.Tasks[i].ID != id {
			t.Fatalf("task %d read as %q, wrote %q", i, r.Tasks[i].ID, id)
		}
	}
	if got := skipRound(full); !slices.Equal(got, rd.b) || !slices.Equal(got, []byte{42}) {
		t.Fatalf("skipped to %v, read to %v", got, rd.b)
	}
	// Asked for: a planned round of one task named as its schedule would
	// take the short form.
	named, other := round(1, day1, "exec", tasks[0]), round(1, day1, "exec", tasks[3])
	if a, b := len(appendRound(nil, "import", 1, &named)), len(appendRound(nil, "import", 1, &other)); a != b-len("other") {
		t.Fatalf("a task named as its schedule takes %d bytes, one named other %d", a, b)
	}
}

// encodingRounds are rounds of every shape appendRound writes: one task
// named as its schedule, a batch asked for by someone with a failed task,
// counts past a varint's first byte, and a cause it does not know.
func encodingRounds() []RoundSample {
	start := time.Unix(1_700_000_000, 123_456_789)
	many := make([]TaskSample, 70)
	for i := range many {
		many[i] = TaskSample{ID: fmt.Sprintf("t%d", i), Status: Success, Started: start.Add(time.Duration(i) * time.Millisecond), Cost: time.Duration(i) * time.Microsecond}
	}
	many[3].Status, many[3].Err = Failed, errors.New("boom")
	return []RoundSample{
		{Number: 1, Cause: "plan", Planned: start.Add(-2 * time.Millisecond), Start: start, End: start.Add(time.Millisecond),
			Tasks: []TaskSample{{ID: "job", Status: Success, Started: start, Cost: 900 * time.Microsecond}}},
		{Number: 9, Batch: true, Cause: "submit", By: "ops", Planned: start, Start: start, End: start.Add(time.Second),
			Tasks: []TaskSample{{ID: "order-42", Status: Timeout, Started: start.Add(time.Microsecond), Cost: time.Second, Err: errors.New("took too long")}}},
		{Number: 1 << 40, Cause: "exec", By: "admin", Planned: start, Start: start, End: start.Add(time.Minute), Tasks: many},
		{Number: 3, Cause: "weird", Start: start},
	}
}

// goldenRounds reads a testdata file of encoded rounds, one a line.
func goldenRounds(t *testing.T, name string) [][]byte {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, line := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		b, err := hex.DecodeString(line)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, b)
	}
	return out
}

// TestRoundEncodingIsStable holds appendRound to the bytes stores already
// hold: testdata/rounds.hex has one line per round of encodingRounds (the
// first in the short form, the others in version 2). A change to the
// bytes needs a new version. testdata/rounds-v2.hex holds the same rounds
// as releases before the short form wrote them, all in version 2: each
// still reads as the same record.
func TestRoundEncodingIsStable(t *testing.T) {
	want, before := goldenRounds(t, "rounds.hex"), goldenRounds(t, "rounds-v2.hex")
	rounds := encodingRounds()
	if len(want) != len(rounds) || len(before) != len(rounds) {
		t.Fatalf("%d and %d golden lines for %d rounds", len(want), len(before), len(rounds))
	}
	for i, x := range rounds {
		got := appendRound(nil, "job", 77, &x)
		if !slices.Equal(got, want[i]) {
			t.Errorf("round %d (cause %q, %d tasks):\n got %x\nwant %x", i, x.Cause, len(x.Tasks), got, want[i])
		}
		now, err := readRound(&reader{b: got}, "job", true)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		then, err := readRound(&reader{b: before[i]}, "job", true)
		if err != nil {
			t.Fatalf("round %d as version 2: %v", i, err)
		}
		if !reflect.DeepEqual(now, then) {
			t.Errorf("round %d reads as\n%+v\nwritten in version 2 as\n%+v", i, now, then)
		}
	}
	if n, was := len(want[0]), len(before[0]); n > was*2/3 {
		t.Errorf("a short round is %d bytes, %d in version 2", n, was)
	}
}

// TestShortRoundsReadAsVersion2: a round of one task named as its
// schedule, without an error, planned, takes the short form, and reads
// back as the same record as its version 2 form, to the nanosecond, for
// every status, as a batch or not, with instants before, long after and
// across a wrap from its start and numbers far from its sequence number;
// skipRound ends where readRound does and a cut one reads as neither.
// Any other round is written in version 2.
func TestShortRoundsReadAsVersion2(t *testing.T) {
	t.Parallel()
	start := day1.Add(123456789 * time.Nanosecond)
	far, early := time.Unix(0, math.MaxInt64).UTC(), time.Unix(0, math.MinInt64+1).UTC()
	instants := []struct{ planned, started, end time.Time }{
		{start.Add(-3 * time.Millisecond), start.Add(7), start.Add(time.Millisecond)},
		{start.Add(time.Hour), start, start},
		{time.Time{}, far, early},
		{far, early, far},
	}
	n := 0
	for _, c := range instants {
		for status := range numStatus {
			for _, batch := range []bool{false, true} {
				for _, number := range []int64{1, 77, 0, -5, 1 << 50, math.MinInt64} {
					x := RoundSample{Number: number, Batch: batch, Cause: "plan", Planned: c.planned, Start: start, End: c.end,
						Tasks: []TaskSample{{ID: "job", Status: status, Started: c.started, Cost: time.Duration(n) * time.Microsecond}}}
					n++
					enc := appendRound(nil, "job", 77, &x)
					at := len(binary.AppendUvarint(nil, 77)) + len(binary.AppendVarint(nil, start.UnixNano()))
					if enc[at]&3 != roundShort {
						t.Fatalf("%+v: not written short", x)
					}
					long := appendLong(slices.Clone(enc[:at]), "job", start.UnixNano(), &x)
					full := append(slices.Clone(enc), 42)
					rd := &reader{b: full}
					got, err := readRound(rd, "job", true)
					if err != nil {
						t.Fatalf("%+v: %v", x, err)
					}
					want, err := readRound(&reader{b: long}, "job", true)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("short form reads as\n%+v\nversion 2 as\n%+v", got, want)
					}
					if !got.Planned.Equal(c.planned) || !got.End.Equal(c.end) || !got.Tasks[0].Started.Equal(c.started) || got.Number != number || got.Batch != batch {
						t.Fatalf("read %+v, wrote %+v", got, x)
					}
					if tail := skipRound(full); !slices.Equal(tail, rd.b) || !slices.Equal(tail, []byte{42}) {
						t.Fatalf("skipped to %v, read to %v", tail, rd.b)
					}
					for cut := range len(enc) {
						if skipRound(enc[:cut]) != nil {
							t.Fatalf("cut at %d of %d: skipRound read past its end", cut, len(enc))
						}
						if _, err := readRound(&reader{b: enc[:cut]}, "job", true); err == nil {
							t.Fatalf("cut at %d of %d: read", cut, len(enc))
						}
					}
				}
			}
		}
	}
	one := func(mend func(*RoundSample)) RoundSample {
		x := RoundSample{Number: 1, Cause: "plan", Planned: start, Start: start, End: start.Add(time.Millisecond),
			Tasks: []TaskSample{{ID: "job", Status: Success, Started: start, Cost: time.Microsecond}}}
		mend(&x)
		return x
	}
	for name, x := range map[string]RoundSample{
		"no task":     one(func(x *RoundSample) { x.Tasks = nil }),
		"two tasks":   one(func(x *RoundSample) { x.Tasks = append(x.Tasks, x.Tasks[0]) }),
		"other id":    one(func(x *RoundSample) { x.Tasks[0].ID = "job.1" }),
		"an error":    one(func(x *RoundSample) { x.Tasks[0].Status, x.Tasks[0].Err = Failed, errors.New("boom") }),
		"not started": one(func(x *RoundSample) { x.Tasks[0].Started = time.Time{} }),
		"no end":      one(func(x *RoundSample) { x.End = time.Time{} }),
		"asked for":   one(func(x *RoundSample) { x.Cause, x.By = "exec", "ops" }),
		"by someone":  one(func(x *RoundSample) { x.By = "ops" }),
		"bad status":  one(func(x *RoundSample) { x.Tasks[0].Status = numStatus }),
	} {
		enc := appendRound(nil, "job", 77, &x)
		at := len(binary.AppendUvarint(nil, 77)) + len(binary.AppendVarint(nil, start.UnixNano()))
		if enc[at] != roundVersion2 {
			t.Errorf("%s: written with version byte %d, not in version 2", name, enc[at])
		}
	}
}

// causeIndex (the encoder's switch) and causeNames (the decoder's list)
// name the same causes at the same indexes.
func TestCauseIndexMatchesNames(t *testing.T) {
	for i, name := range causeNames() {
		if got := causeIndex(name); int(got) != i {
			t.Errorf("causeIndex(%q) = %d, want %d", name, got, i)
		}
	}
	if got := causeIndex("unknown"); got != 0 {
		t.Errorf("causeIndex of an unknown cause = %d, want 0 (plan)", got)
	}
}

// TestHistoryKeepsTheNewestRounds drives a history with random rounds (of
// zero to three tasks, so that rounds differ in size), flushes that
// succeed or fail and settings that change its size, against a model: a
// list of the rounds kept. At every step the rounds listed are the
// newest it keeps (those a flush took first), each read whole, and the
// count of unsaved rounds is the model's.
func TestHistoryKeepsTheNewestRounds(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		set := DefaultSettings()
		set.Rounds = 1 + rng.IntN(20)
		s, _ := New("job", clockwork.NewFakeClockAt(day1), set)
		var kept, taken []int64 // the model: numbers, oldest first
		var unsaved int64
		trim := func() {
			if over := len(kept) - set.Rounds; over > 0 {
				kept, unsaved = kept[over:], unsaved+int64(over)
			}
		}
		var ch *Changes
		at, number := day1, int64(0)
		for step := range 600 {
			switch op := rng.IntN(20); {
			case op < 14:
				number++
				at = at.Add(time.Second)
				tasks := make([]TaskSample, rng.IntN(4))
				for i := range tasks {
					tasks[i] = TaskSample{ID: strings.Repeat("t", rng.IntN(30)), Status: rng.IntN(numStatus), Cost: time.Duration(rng.IntN(1e9))}
				}
				s.RecordRound(round(number, at, "plan", tasks...))
				kept = append(kept, number)
				trim()
			case op < 17 && ch == nil:
				ch = s.Take()
				taken, kept = kept, nil
			case op < 19 && ch != nil:
				if op == 17 {
					ch.Done()
				} else {
					ch.Failed()
					kept = append(taken, kept...)
					trim()
				}
				ch, taken = nil, nil
			default:
				set.Rounds = 1 + rng.IntN(20)
				if err := s.SetSettings(set); err != nil {
					t.Fatal(err)
				}
				trim()
			}
			var got []int64
			for _, r := range s.RecentRounds() {
				if r.Counts == nil {
					t.Fatalf("seed %d step %d: round %d unread", seed, step, r.Number)
				}
				got = append(got, r.Number)
			}
			slices.Reverse(got)
			if want := append(slices.Clone(taken), kept...); !slices.Equal(got, want) {
				t.Fatalf("seed %d step %d (keeping %d): rounds %v, want %v", seed, step, set.Rounds, got, want)
			}
			if u := s.UnsavedRounds(); u != unsaved {
				t.Fatalf("seed %d step %d: %d unsaved rounds, want %d", seed, step, u, unsaved)
			}
		}
	}
}

// TestHistoryWithoutAStoreMovesNoRound: without flushes, every round
// drops the oldest, and the kept ones stay where they were written (a
// history in one array copied them down, about six cold lines a fire):
// a round's bytes do not move until it is dropped, and once the pages
// have come round, a round allocates nothing.
func TestHistoryWithoutAStoreMovesNoRound(t *testing.T) {
	set := DefaultSettings()
	s, _ := New("job", clockwork.NewFakeClockAt(day1), set)
	at := day1
	record := func() {
		at = at.Add(time.Second)
		s.RecordRound(round(1, at, "plan", TaskSample{ID: "job", Status: Success, Started: at, Cost: time.Millisecond}))
	}
	for range 3 * set.Rounds {
		record()
	}
	h := s.hist
	if int(h.kept) != set.Rounds || h.unsaved != int64(2*set.Rounds) {
		t.Fatalf("%d rounds kept, %d unsaved", h.kept, h.unsaved)
	}
	page := h.rounds()
	oldest := page[:len(page)-len(skipRound(page))] // the page's oldest round, where it lies
	want := slices.Clone(oldest)
	for range set.Rounds - 1 { // it stays among the kept rounds
		record()
		if !slices.Equal(oldest, want) {
			t.Fatal("a kept round was moved or overwritten")
		}
	}
	if n := testing.AllocsPerRun(200, record); n != 0 {
		t.Fatalf("a round allocates %.1f times", n)
	}
	if rs := s.RecentRounds(); len(rs) != set.Rounds || !rs[0].Start.Equal(at.Add(3*time.Millisecond)) {
		t.Fatalf("%d rounds, newest at %v", len(rs), rs[0].Start)
	}
}

// TestAYoungPageGrowsOnce: a new schedule's first page is allocated for
// its first round, and then once for its size, rather than growing, copied,
// every other round of it; a page after a flush is not.
func TestAYoungPageGrowsOnce(t *testing.T) {
	set := DefaultSettings()
	s, _ := New("job", clockwork.NewFakeClockAt(day1), set)
	at := day1
	arrays := map[*byte]bool{}
	for range pageRounds(int32(set.Rounds)) {
		at = at.Add(time.Second)
		s.RecordRound(round(1, at, "plan", TaskSample{ID: "job", Status: Success, Started: at, Cost: time.Millisecond}))
		arrays[unsafe.SliceData(s.hist.page)] = true
	}
	if s.hist.n != pageRounds(int32(set.Rounds)) {
		t.Fatalf("%d rounds in the first page, want %d", s.hist.n, pageRounds(int32(set.Rounds)))
	}
	if len(arrays) > 2 {
		t.Errorf("the first page's rounds were written to %d arrays, want at most 2", len(arrays))
	}
	// A flush that takes a round at a time (a schedule slower than the
	// flushes) leaves an array for one round, not for a page.
	for range 3 {
		s.hist.take()
		at = at.Add(time.Second)
		s.RecordRound(round(1, at, "plan", TaskSample{ID: "job", Status: Success, Started: at, Cost: time.Millisecond}))
	}
	if c := cap(s.hist.page); c > pageHead+firstRoom {
		t.Errorf("after flushes of one round each, a page has room for %d bytes, want %d", c, pageHead+firstRoom)
	}
}

// recorder returns a function that records a round of one successful
// task of s, a second after the last.
func recorder(s *Stats) func() {
	at := day1
	return func() {
		at = at.Add(time.Second)
		s.RecordRound(round(1, at, "plan", TaskSample{ID: "job", Status: Success, Started: at, Cost: time.Millisecond}))
	}
}

// TestAFlushTakesItsPageWhole: a flush that takes one page of rounds
// hands its array over as the stored page, header included, and the
// rounds after it are written elsewhere; the stored page reads back.
func TestAFlushTakesItsPageWhole(t *testing.T) {
	s, _ := New("job", clockwork.NewFakeClockAt(day1), DefaultSettings())
	record := recorder(s)
	for range 5 {
		record()
	}
	first := &s.hist.rounds()[0]
	ch := s.Take()
	data := ch.Rounds[0].Data
	if &data[2] != first { // its version, its count (5), then the rounds where they were written
		t.Fatal("the page's rounds were copied")
	}
	want := slices.Clone(data)
	record()
	ch.Done()
	record()
	if !slices.Equal(data, want) {
		t.Fatal("a round after the flush wrote into the page it took")
	}
	rs, err := DecodePage(ch.Rounds[0])
	if err != nil || len(rs) != 5 || rs[4].Seq != 5 {
		t.Fatalf("stored page: %d rounds, %v", len(rs), err)
	}
	if n := len(s.RecentRounds()); n != 2 {
		t.Fatalf("%d rounds in memory after the flush, want 2", n)
	}
}

// TestAWrittenPageServesTheNext: once the store wrote a page a flush took
// whole, the next round begins a page in its array, rather than in a new
// one; a round before the write begins a page of its own, and the page
// reads back as written. Readers of the rounds in memory meanwhile read
// copies (run with -race).
func TestAWrittenPageServesTheNext(t *testing.T) {
	s, _ := New("job", clockwork.NewFakeClockAt(day1), DefaultSettings())
	record := recorder(s)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a page of the admin page, reading as flushes go
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				for _, r := range s.RecentRounds() {
					if r.Number != 1 || len(r.Tasks) != 1 || r.Tasks[0].ID != "job" {
						t.Errorf("a round read back as %+v", r)
						return
					}
				}
			}
		}
	}()
	flush := func() int {
		ch := s.Take()
		if len(ch.Rounds) != 1 {
			t.Fatalf("take: %+v", ch)
		}
		ch.Done()
		return len(ch.Rounds[0].Data)
	}
	for range 5 {
		record()
	}
	// A young schedule's first page has room for a page of rounds: not
	// kept for the next, which has room for what a flush took.
	young := cap(s.hist.page)
	took := flush()
	record()
	if c := cap(s.hist.page); c >= young || c > took*3/2 {
		t.Fatalf("after a young page of %d bytes taken with %d, the next has room for %d", young, took, c)
	}
	for range 4 {
		record()
	}
	first := &s.hist.rounds()[0]
	flush()
	for lap := range 20 {
		record()
		if lap == 0 && &s.hist.rounds()[0] != first {
			t.Fatal("the round after a written page began a new array")
		}
		if lap%4 == 3 {
			ch := s.Take()
			if len(ch.Rounds) != 1 {
				t.Fatalf("take: %+v", ch)
			}
			record() // before the write: a page of its own
			rs, err := DecodePage(ch.Rounds[0])
			if err != nil || len(rs) != 4 {
				t.Fatalf("page of lap %d: %d rounds, %v", lap, len(rs), err)
			}
			ch.Done()
			if got := len(s.RecentRounds()); got != 1 {
				t.Fatalf("%d rounds in memory after lap %d's flush, want 1", got, lap)
			}
			ch = s.Take()
			ch.Done() // that round written: the next begins in its array
		}
	}
	close(stop)
	wg.Wait()
}

// TestAReservedSchedulesFirstFireAllocatesNothing: Reserve makes the
// results ring and the history's first page, with room for a page of
// short rounds, before the first fire, which then allocates nothing for
// a short round; unreserved, the first fire allocates the ring, the
// history, its page and the page's room for rounds of its size (roomFor).
func TestAReservedSchedulesFirstFireAllocatesNothing(t *testing.T) {
	// Not parallel: the allocations are counted over the whole process.
	firstFire := func(reserve bool) uint64 {
		s, err := New("job", clockwork.NewFakeClockAt(day1), DefaultSettings())
		if err != nil {
			t.Fatal(err)
		}
		if reserve {
			s.Reserve()
			s.Reserve() // a second one, as a lease taken again: nothing more
		}
		at := day1.Add(time.Second)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s.Record(Sample{At: at, TaskID: "job", Status: Success, Cost: time.Millisecond})
		s.RecordRound(round(1, at, "plan", TaskSample{ID: "job", Status: Success, Started: at, Cost: time.Millisecond}))
		runtime.ReadMemStats(&after)
		if rs := s.Results(); len(rs) != 1 || rs[0].TaskID != "job" {
			t.Fatalf("reserved %v: results %+v, want the one", reserve, rs)
		}
		if rs := s.RecentRounds(); len(rs) != 1 {
			t.Fatalf("reserved %v: %d rounds, want 1", reserve, len(rs))
		}
		return after.Mallocs - before.Mallocs
	}
	unreserved, reserved := firstFire(false), firstFire(true)
	if reserved != 0 || unreserved < 4 {
		t.Fatalf("a first fire allocated %d times reserved, %d unreserved; want none, and at least 4 (ring, history, page, its room)", reserved, unreserved)
	}
}
