package sqlite

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/fom-go/fom/store"
)

// rideDay is the first day of these tests.
var rideDay = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// page is schedule a's page of round seq, in the slot of a ten-slot
// history, starting on day.
func page(seq int64, day time.Time) store.Round {
	return store.Round{Schedule: "a", Slot: int(seq % 10), First: seq, Seq: seq, Start: day.Add(time.Duration(seq) * time.Second)}
}

// flushA writes schedule a's day (data v) and, when given, a page (data
// v too).
func flushA(t *testing.T, s *Store, day time.Time, v byte, pages ...store.Round) {
	t.Helper()
	if err := s.SaveStats(context.Background(), scheduleA(day, v, pages...)); err != nil {
		t.Fatal(err)
	}
}

// wantDays checks schedule a's stored days from rideDay: one per value
// given, in order, each holding its value.
func wantDays(t *testing.T, s *Store, vs ...byte) {
	t.Helper()
	days, err := s.LoadDays(context.Background(), "a", rideDay)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 0, len(days))
	for i, d := range days {
		if len(d.Data) != 1 || !d.Day.Equal(rideDay.AddDate(0, 0, i)) || d.Schedule != "a" {
			t.Fatalf("days %+v, want %v from %s", days, vs, rideDay.Format(time.DateOnly))
		}
		got = append(got, d.Data[0])
	}
	if !bytes.Equal(got, vs) {
		t.Fatalf("days hold %v, want %v", got, vs)
	}
}

// daysRows counts schedule a's rows of stats_days.
func daysRows(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow("SELECT count(*) FROM stats_days WHERE schedule = 'a'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDayRidesInItsPage: a flush writes a schedule's day into the row of
// its page, one row per schedule; the day reads back from it, and after a
// restart.
func TestDayRidesInItsPage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	for seq := int64(1); seq <= 3; seq++ {
		flushA(t, s, rideDay, byte(seq), page(seq, rideDay))
	}
	wantDays(t, s, 3)
	if n := daysRows(t, s); n != 0 {
		t.Fatalf("%d rows of stats_days, want none: the day rides in the page", n)
	}
	s.Close()
	s = open(t, dir)
	wantDays(t, s, 3)
	flushA(t, s, rideDay, 4, page(4, rideDay))
	wantDays(t, s, 4)
}

// TestRiddenDayOutlivesItsPages: when a schedule's pages start carrying
// the next day, the day they carried is copied into its own row, so that
// it outlives the pages, which the history rewrites a lap later. Also
// after a restart, when the store has not read the schedule's days and so
// does not know which day its pages carry.
func TestRiddenDayOutlivesItsPages(t *testing.T) {
	t.Parallel()
	for _, restart := range []bool{false, true} {
		dir := t.TempDir()
		s, err := Open(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		flushA(t, s, rideDay, 1, page(1, rideDay))
		flushA(t, s, rideDay, 2, page(2, rideDay))
		if restart {
			s.Close()
			s = open(t, dir)
		}
		next := rideDay.AddDate(0, 0, 1)
		flushA(t, s, next, 3, page(3, next))
		// A lap of the history later: every slot rewritten, by next's pages.
		for seq := int64(4); seq <= 13; seq++ {
			flushA(t, s, next, byte(seq), page(seq, next))
		}
		wantDays(t, s, 2, 13)
		if n := daysRows(t, s); n != 1 {
			t.Fatalf("restart %v: %d rows of stats_days, want the first day's", restart, n)
		}
		s.Close()
	}
}

// TestADayWrittenWithoutAPageIsTheNewest: a day that changed with no new
// page is written to its row, which then reads over the older copy in
// the newest page; the next page's copy reads over the row.
func TestADayWrittenWithoutAPageIsTheNewest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	flushA(t, s, rideDay, 1, page(1, rideDay))
	flushA(t, s, rideDay, 2) // no page
	wantDays(t, s, 2)
	flushA(t, s, rideDay, 3, page(2, rideDay))
	wantDays(t, s, 3)
	flushA(t, s, rideDay, 4) // no page, the store not knowing the newest page
	s.ids.mu.Lock()
	s.ids.of = nil
	s.ids.mu.Unlock()
	flushA(t, s, rideDay, 5)
	wantDays(t, s, 5)
}

// TestOlderDaysOfAFlushGetRows: of the days a flush writes for a
// schedule, its page carries the newest; the others get rows.
func TestOlderDaysOfAFlushGetRows(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	next := rideDay.AddDate(0, 0, 1)
	b := scheduleA(next, 2, page(1, next))
	b.Days = append(b.Days, store.Day{Schedule: "a", Day: rideDay, Data: []byte{1}})
	if err := s.SaveStats(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	wantDays(t, s, 1, 2)
	if n := daysRows(t, s); n != 1 {
		t.Fatalf("%d rows of stats_days, want the older day's", n)
	}
}

// TestPruneKeepsTheDaysItsPagesCarry: pages deleted by retention, by age
// or because the history shrank, leave the days they carried in rows.
func TestPruneKeepsTheDaysItsPagesCarry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("slots", func(t *testing.T) {
		t.Parallel()
		s := open(t, t.TempDir())
		flushA(t, s, rideDay, 1, page(6, rideDay))
		flushA(t, s, rideDay, 2, page(7, rideDay))
		if err := s.Prune(ctx, []store.Retention{{Schedule: "a", KeepFailures: 10, KeepRounds: 5}}); err != nil {
			t.Fatal(err)
		}
		if rs, err := s.LoadRounds(ctx, "a", 10); err != nil || len(rs) != 0 {
			t.Fatalf("rounds %+v, %v; want none left", rs, err)
		}
		wantDays(t, s, 2)
	})
	t.Run("age", func(t *testing.T) {
		t.Parallel()
		s := open(t, t.TempDir())
		// A round started the evening before and recorded on rideDay.
		late := store.Round{Schedule: "a", Slot: 1, First: 1, Seq: 1, Start: rideDay.Add(-time.Minute)}
		flushA(t, s, rideDay, 1, late)
		if err := s.Prune(ctx, []store.Retention{{Schedule: "a", Before: rideDay, KeepFailures: 10, KeepRounds: 10}}); err != nil {
			t.Fatal(err)
		}
		if rs, err := s.LoadRounds(ctx, "a", 10); err != nil || len(rs) != 0 {
			t.Fatalf("rounds %+v, %v; want none left", rs, err)
		}
		wantDays(t, s, 1)
	})
}

// TestPagesAndDaysInAnyOrder: a batch that does not list pages and days
// schedule by schedule in the same order (as an app's flush does) pairs
// each schedule's page and day all the same.
func TestPagesAndDaysInAnyOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	b := store.StatsBatch{
		Rounds: []store.Round{
			{Schedule: "c", Slot: 1, First: 1, Seq: 1, Start: rideDay, Data: []byte{3}},
			{Schedule: "a", Slot: 1, First: 1, Seq: 1, Start: rideDay, Data: []byte{1}},
		},
		Days: []store.Day{{Schedule: "b", Day: rideDay, Data: []byte{2}}, {Schedule: "a", Day: rideDay, Data: []byte{1}}},
	}
	if err := s.SaveStats(ctx, b); err != nil {
		t.Fatal(err)
	}
	wantDays(t, s, 1)
	for name, want := range map[string]int{"b": 1, "c": 0} {
		days, err := s.LoadDays(ctx, name, rideDay)
		if err != nil || len(days) != want {
			t.Fatalf("%s: days %+v, %v; want %d", name, days, err, want)
		}
	}
	if n := daysRows(t, s); n != 0 {
		t.Fatalf("a has %d rows of stats_days, want none: its day rides in its page", n)
	}
}
