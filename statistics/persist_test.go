package statistics

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fom-go/fom/store"
	"github.com/fom-go/fom/store/sqlite"
)

// TestEveryOutcomeOfADayIsSaved records, flushes, records more and flushes
// again within one day: the store holds every outcome, not only the ones
// before the day's first flush.
func TestEveryOutcomeOfADayIsSaved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	clk := clockwork.NewFakeClockAt(day1)
	s, _ := New("job", clk, DefaultSettings())
	total := 0
	for flush := range 4 {
		for i := range 10 + flush {
			status := Success
			if i%3 == 0 {
				status = Failed
			}
			s.Record(Sample{TaskID: "t", Status: status, Cost: time.Millisecond, Err: errorIf(status == Failed)})
			total++
		}
		s.RecordLateness(time.Time{}, time.Millisecond)
		if err := s.Flush(ctx, st); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Minute)
	}
	st.Close()

	st, err = sqlite.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	again, _ := New("job", clk, DefaultSettings())
	if _, err := again.Load(ctx, st); err != nil {
		t.Fatal(err)
	}
	d := again.Day(day1)
	if d.Count != int64(total) || d.Rounds != 4 {
		t.Fatalf("after reopen: %d outcomes and %d rounds of the day, want %d and 4", d.Count, d.Rounds, total)
	}
	if fs := again.Failures(); len(fs) != int(d.ByStatus["failed"]) {
		t.Fatalf("%d failures reloaded, %d recorded", len(fs), d.ByStatus["failed"])
	}
}

func errorIf(b bool) error {
	if b {
		return errors.New("boom")
	}
	return nil
}

// failingStore fails every write until healed.
type failingStore struct {
	store.Store
	broken bool
}

func (f *failingStore) SaveStats(ctx context.Context, b store.StatsBatch) error {
	if f.broken {
		return errors.New("disk full")
	}
	return f.Store.SaveStats(ctx, b)
}

// TestAFailureBacklogIsBounded records a million rejections while the store
// fails: counts and aggregates stay exact, the failures waiting to be
// written stay at the last `failures`, the rest are counted as unsaved, and
// once the store heals one flush saves them.
func TestAFailureBacklogIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	real, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	st := &failingStore{Store: real, broken: true}
	clk := clockwork.NewFakeClockAt(day1)
	s, _ := New("job", clk, DefaultSettings())
	const n = 1_000_000
	rejected := errors.New("queue full")
	for i := range n {
		s.Record(Sample{At: day1, TaskID: fmt.Sprint(i % 10), Status: Rejected, Err: rejected})
		if i%250_000 == 0 {
			if err := s.Flush(ctx, st); err == nil {
				t.Fatal("flush to a failing store succeeded")
			}
		}
	}
	s.mu.Lock()
	pending := len(s.pending.buf)
	s.mu.Unlock()
	if pending != 100 {
		t.Fatalf("%d failures wait to be written, want the last 100", pending)
	}
	if u := s.Unsaved(); u != n-100 {
		t.Fatalf("unsaved %d, want %d", u, n-100)
	}
	if c := s.Counts()["rejected"]; c != n {
		t.Fatalf("rejected count %d, want %d", c, n)
	}
	st.broken = false
	if err := s.Flush(ctx, st); err != nil {
		t.Fatal(err)
	}
	fs, _ := real.LoadFailures(ctx, "job", 1000)
	days, _ := real.LoadDays(ctx, "job", day1)
	if len(fs) != 100 || len(days) != 1 {
		t.Fatalf("saved %d failures and %d days", len(fs), len(days))
	}
	back, _ := decodeDay(days[0].Data)
	if back.count != n || back.byStatus[Rejected] != n {
		t.Fatalf("saved day counts %d", back.count)
	}
}

// TestFailedFlushKeepsOrderAndNewerOutcomes: a flush that fails puts its
// data back ahead of what was recorded meanwhile.
func TestFailedFlushKeepsOrderAndNewerOutcomes(t *testing.T) {
	t.Parallel()
	clk := clockwork.NewFakeClockAt(day1)
	s, _ := New("job", clk, DefaultSettings())
	s.Record(Sample{TaskID: "first", Status: Failed})
	ch := s.Take()
	if len(ch.Failures) != 1 || len(ch.Days) != 1 {
		t.Fatalf("take %+v", ch)
	}
	s.Record(Sample{TaskID: "second", Status: Failed})
	ch.Failed()
	again := s.Take()
	if len(again.Failures) != 2 || again.Failures[0].TaskID != "first" || again.Failures[1].TaskID != "second" || len(again.Days) != 1 {
		t.Fatalf("after a failed write: %+v", again)
	}
	if empty := s.Take(); !empty.Empty() {
		t.Fatalf("a third take found %+v", empty)
	}
}

// TestTakeIntoUsedChanges: changes taken into a Changes that held
// another schedule's, with more days, failures and rounds, are what Take
// gives, nothing of the earlier ones left; Done and Failed act on the
// schedule they were taken from.
func TestTakeIntoUsedChanges(t *testing.T) {
	t.Parallel()
	clk := clockwork.NewFakeClockAt(day1.Add(12 * time.Hour))
	busy, _ := New("busy", clk, DefaultSettings())
	busy.Record(Sample{At: day1.Add(-24 * time.Hour), TaskID: "t", Status: Failed})
	busy.Record(Sample{At: clk.Now(), TaskID: "t", Status: Failed})
	busy.RecordRound(RoundSample{Number: 1, Start: clk.Now(), Planned: clk.Now(), End: clk.Now(), Tasks: []TaskSample{{ID: "t", Status: Failed}}})
	var ch Changes
	if busy.TakeInto(&ch); len(ch.Days) != 2 || len(ch.Failures) != 2 || len(ch.Rounds) != 1 {
		t.Fatalf("busy took %d days, %d failures, %d rounds", len(ch.Days), len(ch.Failures), len(ch.Rounds))
	}
	ch.Done()
	room := &ch.enc[0] // where the days were encoded (the last array, if they outgrew the first)

	quiet, _ := New("quiet", clk, DefaultSettings())
	quiet.Record(Sample{At: clk.Now(), TaskID: "q", Status: Success})
	quiet.TakeInto(&ch)
	if len(ch.Days) != 1 || ch.Days[0].Schedule != "quiet" || len(ch.Failures) != 0 || len(ch.Rounds) != 0 {
		t.Fatalf("quiet took %+v", ch)
	}
	if &ch.Days[0].Data[0] != room {
		t.Error("quiet's day was not encoded into the room busy's took")
	}
	d, err := decodeDay(ch.Days[0].Data)
	if err != nil || d.count != 1 || d.byStatus[Success] != 1 || d.byStatus[Failed] != 0 {
		t.Fatalf("quiet's day: %+v %v", d, err)
	}
	ch.Failed() // back to quiet, not busy
	if got := takenDays(t, quiet); len(got) != 1 || got[dayOf(clk.Now())] != 1 {
		t.Fatalf("quiet after a failed write: %v", got)
	}
	if got := takenDays(t, busy); len(got) != 0 {
		t.Fatalf("busy after quiet's failed write: %v", got)
	}

	// Reset drops what ch held but keeps the room.
	ch.Reset()
	if ch.s != nil || ch.Days != nil || ch.taken != nil || ch.days != nil {
		t.Fatalf("reset kept %+v", ch)
	}
	quiet.Record(Sample{At: clk.Now(), TaskID: "q", Status: Success})
	if quiet.TakeInto(&ch); len(ch.Days) != 1 || &ch.Days[0].Data[0] != room {
		t.Fatalf("after a reset: %d days, encoded in the kept room: %t", len(ch.Days), len(ch.Days) == 1 && &ch.Days[0].Data[0] == room)
	}
	if d, err := decodeDay(ch.Days[0].Data); err != nil || d.count != 2 {
		t.Fatalf("quiet's day after a reset: %+v %v", d, err)
	}
}

// takenDays returns the days a Take gives and their counts.
func takenDays(t *testing.T, s *Stats) map[time.Time]int64 {
	t.Helper()
	ch := s.Take()
	ch.Done()
	out := map[time.Time]int64{}
	for _, d := range ch.Days {
		dd, err := decodeDay(d.Data)
		if err != nil {
			t.Fatal(err)
		}
		out[d.Day] = dd.count
	}
	return out
}

// Take looks at today alone while nothing else changed, and at every day
// once another day changed or a new day began: no change is left behind.
func TestTakeFindsEveryChangedDay(t *testing.T) {
	t.Parallel()
	day1 := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	clk := clockwork.NewFakeClockAt(day1.Add(24*time.Hour - 2*time.Second)) // 23:59:58
	s, _ := New("job", clk, DefaultSettings())
	day2 := day1.Add(24 * time.Hour)
	rec := func(at time.Time) { s.Record(Sample{At: at, TaskID: "t", Status: Success, Cost: time.Millisecond}) }
	check := func(step string, want map[time.Time]int64) {
		t.Helper()
		got := takenDays(t, s)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: took %v, want %v", step, got, want)
		}
	}
	rec(clk.Now())
	check("first", map[time.Time]int64{day1: 1})
	check("nothing new", map[time.Time]int64{})
	rec(clk.Now())
	rec(clk.Now())
	check("today again", map[time.Time]int64{day1: 3})
	rec(day1.Add(24*time.Hour - time.Second)) // 23:59:59
	clk.Advance(3 * time.Second)
	rec(clk.Now()) // 00:00:01: a new day, yesterday's last change not taken yet
	check("across midnight", map[time.Time]int64{day1: 4, day2: 1})
	rec(clk.Now())
	check("the new day alone", map[time.Time]int64{day2: 2})
	rec(day1.Add(time.Hour)) // a late outcome of yesterday
	check("a late outcome", map[time.Time]int64{day1: 5})
	s.RecordLateness(day1.Add(2*time.Hour), time.Millisecond) // lateness only
	if got := takenDays(t, s); len(got) != 1 || got[day1] != 5 {
		t.Fatalf("lateness of yesterday: took %v", got)
	}
	ch := s.Take()
	s.Record(Sample{At: day1.Add(3 * time.Hour), TaskID: "t", Status: Success})
	ch.Failed() // nothing was taken: nothing to put back
	check("after a failed write of nothing", map[time.Time]int64{day1: 6})
	rec(day1)
	ch = s.Take()
	rec(clk.Now())
	ch.Failed() // yesterday goes back beside today's new change
	check("after a failed write", map[time.Time]int64{day1: 7, day2: 3})
}

// dayOf is the UTC day's midnight, before 1970 too and from any zone.
func TestDayOfIsTheUTCMidnight(t *testing.T) {
	t.Parallel()
	ny, _ := time.LoadLocation("America/New_York")
	for _, at := range []time.Time{
		time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 24, 23, 59, 59, 999999999, time.UTC),
		time.Date(2026, 3, 8, 1, 30, 0, 0, ny),
		time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC),
		time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC),
		time.Date(1900, 2, 28, 12, 0, 0, 5, time.UTC),
		time.Unix(0, 0),
		time.Unix(-1, 0),
	} {
		y, m, d := at.UTC().Date()
		if want, got := time.Date(y, m, d, 0, 0, 0, 0, time.UTC), dayOf(at); !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("dayOf(%v) = %v, want %v", at, got, want)
		}
	}
}

// A restarted process keeps today's day, as Load read it, open: the first
// Take does not close it (it is not over), and the rounds after it count
// on it rather than on a copy decoded back. Yesterday's is closed.
func TestLoadedTodayStaysOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	today := time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)
	clk := clockwork.NewFakeClockAt(today.Add(-time.Hour))
	st := openStore(t, dir)
	s, _ := New("job", clk, DefaultSettings())
	s.Record(Sample{TaskID: "a", Status: Success, Cost: time.Second})
	clk.Advance(2 * time.Hour)
	s.Record(Sample{TaskID: "b", Status: Failed, Cost: time.Millisecond})
	st = restart(t, s, st, dir)
	defer st.Close()
	// A new process's statistics of the schedule, as Load leaves them,
	// flushed once or not.
	loaded := func(clk clockwork.Clock, flush bool) *Stats {
		t.Helper()
		s, _ := New("job", clk, DefaultSettings())
		if w, err := s.Load(ctx, st); err != nil || len(w) != 0 {
			t.Fatalf("load: %v %v", w, err)
		}
		if flush {
			if err := s.Flush(ctx, st); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}

	s2 := loaded(clk, true)
	s2.mu.Lock()
	read := s2.days[today]
	yesterdayClosed, todayClosed := s2.closedAt(today.AddDate(0, 0, -1)) >= 0, s2.closedAt(today) >= 0
	s2.mu.Unlock()
	if read == nil || todayClosed || !yesterdayClosed {
		t.Fatalf("after the first flush: today open %v, closed %v; yesterday closed %v; want open, not closed, closed", read != nil, todayClosed, yesterdayClosed)
	}
	s2.Record(Sample{TaskID: "c", Status: Success, Cost: time.Second})
	if got := s2.Day(today); got.Count != 2 || got.ByStatus["failed"] != 1 {
		t.Fatalf("today after a round: %+v, want 2 outcomes, 1 failed", got)
	}
	s2.mu.Lock()
	same := s2.days[today] == read
	s2.mu.Unlock()
	if !same {
		t.Fatal("the round after the first flush counted on another copy of today than the one Load read")
	}
	if got := s2.Day(today.AddDate(0, 0, -1)); got.Count != 1 {
		t.Fatalf("yesterday: %+v, want 1 outcome", got)
	}

	// A day after today, written by a clock ahead of this one, is kept
	// but is not the day today's rounds count on.
	tomorrow := today.AddDate(0, 0, 1)
	ahead, _ := New("job", clockwork.NewFakeClockAt(tomorrow.Add(time.Hour)), DefaultSettings())
	ahead.Record(Sample{TaskID: "d", Status: Success, Cost: time.Second})
	if err := ahead.Flush(ctx, st); err != nil {
		t.Fatal(err)
	}
	s3 := loaded(clk, false)
	s3.mu.Lock()
	cur := s3.cur
	s3.mu.Unlock()
	if cur == nil || cur.from != today.UnixNano() {
		t.Fatalf("loaded with a day after today stored: the newest day counted on is %v, want today", cur)
	}
	if got := s3.Day(tomorrow); got.Count != 1 {
		t.Fatalf("the day after today: %+v, want 1 outcome", got)
	}

	// Restarted on a later day, an idle schedule keeps no day it read
	// open: the first flush closes them all.
	s4 := loaded(clockwork.NewFakeClockAt(today.AddDate(0, 0, 3).Add(time.Hour)), true)
	s4.mu.Lock()
	open := len(s4.days)
	s4.mu.Unlock()
	if open != 0 {
		t.Fatalf("restarted three days later, %d days read stay open after the first flush, want none", open)
	}
	if got := s4.Day(today); got.Count != 1 || got.ByStatus["failed"] != 1 {
		t.Fatalf("today, closed and read three days later: %+v, want the one failure stored", got)
	}
}

// A day over and written is kept closed (encoded): it reads as it did
// open, a late record opens it again with nothing lost, and it leaves
// memory with the retention window, its outcomes still counted since the
// start.
func TestClosedDaysReadAsOpenOnes(t *testing.T) {
	t.Parallel()
	day1 := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	clk := clockwork.NewFakeClockAt(day1.Add(12 * time.Hour))
	s, _ := New("job", clk, DefaultSettings())
	for i := range 50 {
		at := clk.Now().Add(time.Duration(i) * time.Second)
		st := Success
		if i%7 == 0 {
			st = Failed
		}
		s.Record(Sample{At: at, TaskID: "t", Status: st, Cost: time.Duration(i+1) * 3 * time.Millisecond})
		s.RecordLateness(at, time.Duration(i)*time.Millisecond)
	}
	takenDays(t, s)
	clk.Advance(24 * time.Hour)
	s.Record(Sample{At: clk.Now(), TaskID: "t", Status: Success, Cost: time.Second})
	open := s.Day(day1)
	counts := s.Counts()
	cost, _ := s.costSnapshot()
	closed := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		_, isOpen := s.days[day1]
		return !isOpen && s.closedAt(day1) >= 0
	}
	takenDays(t, s) // today's change; day 1 is over and written: closed
	if !closed() {
		t.Fatal("a day over and written is still open")
	}
	if got := s.Day(day1); fmt.Sprint(got) != fmt.Sprint(open) {
		t.Fatalf("closed, day 1 reads\n%+v\nwant\n%+v", got, open)
	}
	if got := s.Counts(); fmt.Sprint(got) != fmt.Sprint(counts) {
		t.Fatalf("closed, the counts are %v, want %v", got, counts)
	}
	if got, _ := s.costSnapshot(); got.Quantile(.5) != cost.Quantile(.5) || got.Count() != cost.Count() {
		t.Fatalf("closed, the cost since the start is %d outcomes, p50 %s; want %d, %s", got.Count(), got.Quantile(.5), cost.Count(), cost.Quantile(.5))
	}
	// A round that began on day 1 and ended today counts its lateness there.
	s.RecordLateness(day1.Add(23*time.Hour), 5*time.Millisecond)
	ch := s.Take()
	var written *day
	for _, d := range ch.Days {
		if d.Day.Equal(day1) {
			var err error
			if written, err = decodeDay(d.Data); err != nil {
				t.Fatal(err)
			}
		}
	}
	ch.Done()
	if written == nil || written.count != 50 || written.late.Count() != 51 || written.byStatus[Failed] != 8 {
		t.Fatalf("day 1 opened again for a late record, written as %+v", written)
	}
	takenDays(t, s)
	if !closed() {
		t.Fatal("day 1 not closed again after its late record was written")
	}
	clk.Advance(7 * 24 * time.Hour) // day 1 leaves the window
	s.Record(Sample{At: clk.Now(), TaskID: "t", Status: Success, Cost: time.Second})
	takenDays(t, s)
	s.mu.Lock()
	kept := s.closedAt(day1) >= 0
	s.mu.Unlock()
	if kept {
		t.Fatal("a closed day past the retention window is kept")
	}
	if got := s.Counts(); got["success"] != counts["success"]+1 || got["failed"] != counts["failed"] {
		t.Fatalf("after day 1 left memory, the counts are %v (before %v, one success since)", got, counts)
	}
}
