package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/fom-go/fom/store"
)

// A flush writes, for every schedule, its newest day and a page of its
// run history. In rows of their own, that is two rows to bind, find and
// rewrite per schedule in every flush; so the day rides in the page's row
// (rounds.day, rounds.day_data): one row per schedule per flush. A row of
// stats_days is written only when a page cannot carry the day: an older
// day that changed, a day that changed with no round, and a day whose
// last copy is about to be lost.
//
// Which copy of a day is the newest is told by the run history's
// sequence number: a page's seq, and stats_days.seq, the newest page's
// seq when the row was written (a row and a page of equal seq: the row,
// written after). LoadDays takes, for each day, the newest of its row and
// the copies in the schedule's pages.
//
// A copy in a page lasts until its slot is rewritten, a lap of the
// history later, or retention deletes the page. So the store copies a
// day from its newest page into stats_days ("settles" it) before that
// can happen:
//   - when a schedule's pages start carrying another day (the day
//     changed): the day they carried until then. The store remembers
//     which day each schedule's pages carry (learned from its own writes
//     and from LoadDays); for a schedule it knows nothing of (its first
//     flush since the store opened, nobody having read its days), it
//     settles every day its pages carry but the new one.
//   - before Prune deletes pages: the days they carry.
//
// Rows from before this schema (stats_days.seq 0, pages without a day)
// read as they always did.

// roundRow is a page of the run history as written: the batch's page,
// and the day it carries, if any.
type roundRow struct {
	*store.Round
	day *store.Day
}

// dayArgs are the page's day columns: its key and data, or NULLs.
func (r roundRow) dayArgs(args []any) []any {
	if r.day == nil {
		return append(args, nil, nil)
	}
	return append(args, dayKey(r.day.Day), r.day.Data)
}

// settle is a schedule's days to copy from its pages into stats_days
// before a flush writes: the one named, or (all) every one but day.
type settle struct {
	schedule, day string
	all           bool
}

const (
	// settleDaySQL copies a schedule's day from its newest page carrying
	// it; settleOtherDaysSQL every day but one, each from its newest page.
	// Neither replaces a row as new or newer (a row of the same seq was
	// written after the page).
	settleDaySQL = `INSERT INTO stats_days (schedule, day, data, seq)
		SELECT schedule, day, day_data, max(seq) FROM rounds WHERE schedule = ? AND day = ? GROUP BY day
		ON CONFLICT (schedule, day) DO UPDATE SET data = excluded.data, seq = excluded.seq WHERE excluded.seq > stats_days.seq`
	settleOtherDaysSQL = `INSERT INTO stats_days (schedule, day, data, seq)
		SELECT schedule, day, day_data, max(seq) FROM rounds WHERE schedule = ? AND day IS NOT NULL AND day <> ? GROUP BY day
		ON CONFLICT (schedule, day) DO UPDATE SET data = excluded.data, seq = excluded.seq WHERE excluded.seq > stats_days.seq`
	// newestSeqSQL is a schedule's newest page, for a day row written
	// when the store does not know it.
	newestSeqSQL = "SELECT coalesce(max(seq), 0) FROM rounds WHERE schedule = ?"
	// loadRiddenDaysSQL reads the days a schedule's pages carry.
	loadRiddenDaysSQL = "SELECT day, day_data, seq FROM rounds WHERE schedule = ? AND day >= ?"
)

// settlePrunedSQL copies the days that the pages a Prune deletes carry
// (where, over the schedules in) into stats_days, each from the newest of
// those pages, where newer than the day's row.
func settlePrunedSQL(where, in string) string {
	return `INSERT INTO stats_days (schedule, day, data, seq)
		SELECT schedule, day, day_data, max(seq) FROM rounds WHERE ` + where + ` AND schedule IN ` + in + ` AND day IS NOT NULL GROUP BY schedule, day
		ON CONFLICT (schedule, day) DO UPDATE SET data = excluded.data, seq = excluded.seq WHERE excluded.seq > stats_days.seq`
}

// ride sorts a batch's days: each schedule's newest page carries the
// schedule's newest day; the other days become rows of stats_days, as of
// the schedule's newest page. It returns the pages, the day rows, the
// settling to do first, and what the store learns once they committed.
func (s *Store) ride(rounds []store.Round, days []store.Day) (pages []roundRow, rows []dayRow, settles []settle, carried []learned) {
	pages = make([]roundRow, len(rounds))
	for i := range rounds {
		pages[i].Round = &rounds[i]
	}
	rides := make([]bool, len(days))
	seqs := make([]int64, len(days))
	newestPage := pairPages(pages, days, rides, seqs)
	s.ids.mu.Lock()
	defer s.ids.mu.Unlock()
	for _, i := range newestPage {
		p := &pages[i]
		day := ""
		if p.day != nil {
			day = dayKey(p.day.Day)
		}
		switch was, known := s.ids.carriedLocked(p.Schedule); {
		case !known:
			settles = append(settles, settle{schedule: p.Schedule, day: day, all: true})
		case was == day:
			continue // nothing to learn
		case was != "":
			settles = append(settles, settle{schedule: p.Schedule, day: was})
		}
		carried = append(carried, learned{schedule: p.Schedule, slot: -1, carries: day, carriesSet: true})
	}
	for j, d := range days {
		if rides[j] {
			continue
		}
		rows = append(rows, dayRow{schedule: d.Schedule, day: dayKey(d.Day), data: d.Data, seq: seqs[j]})
	}
	return pages, rows, settles, carried
}

// pairPages gives each schedule's newest page its newest day, marking the
// days that ride and giving every day its schedule's newest page's seq in
// seqs (-1 for none in the batch: read in the transaction); it returns the
// newest page of each schedule. An app's flush lists pages and days
// schedule by schedule, in the same order: they pair in one walk. Any
// other order pairs through maps.
func pairPages(pages []roundRow, days []store.Day, rides []bool, seqs []int64) (newest []int) {
	newest = make([]int, 0, len(pages))
	i, j := 0, 0
	for j < len(pages) {
		schedule := pages[j].Schedule
		p := j
		for j++; j < len(pages) && pages[j].Schedule == schedule; j++ {
			if pages[j].Seq > pages[p].Seq {
				p = j
			}
		}
		newest = append(newest, p)
		if i >= len(days) || days[i].Schedule != schedule {
			return pairByMaps(pages, days, rides, seqs)
		}
		d := i
		for seqs[i] = pages[p].Seq; i+1 < len(days) && days[i+1].Schedule == schedule; {
			i++
			seqs[i] = pages[p].Seq
			if days[i].Day.After(days[d].Day) {
				d = i
			}
		}
		i++
		pages[p].day, rides[d] = &days[d], true
	}
	if i != len(days) {
		return pairByMaps(pages, days, rides, seqs)
	}
	return newest
}

func pairByMaps(pages []roundRow, days []store.Day, rides []bool, seqs []int64) []int {
	clear(rides)
	newestDay := make(map[string]int, len(days))
	for i, d := range days {
		if j, ok := newestDay[d.Schedule]; !ok || d.Day.After(days[j].Day) {
			newestDay[d.Schedule] = i
		}
	}
	newestPage := make(map[string]int, len(pages))
	for i := range pages {
		pages[i].day = nil
		if j, ok := newestPage[pages[i].Schedule]; !ok || pages[i].Seq > pages[j].Seq {
			newestPage[pages[i].Schedule] = i
		}
	}
	newest := make([]int, 0, len(newestPage))
	for schedule, i := range newestPage {
		newest = append(newest, i)
		if d, ok := newestDay[schedule]; ok {
			pages[i].day, rides[d] = &days[d], true
		}
	}
	for j, d := range days {
		seqs[j] = -1
		if i, ok := newestPage[d.Schedule]; ok {
			seqs[j] = pages[i].Seq
		}
	}
	return newest
}

// settleDays runs the settling a flush does before it writes its pages,
// and finds the newest page of the schedules whose day rows ride() could
// not date. Like a flush's writes (eachStatement), its statements run
// under ctx without its cancellation, ctx checked before each.
func (s *Store) settleDays(ctx context.Context, tx *sql.Tx, settles []settle, rows []dayRow) error {
	quiet := context.WithoutCancel(ctx)
	for _, st := range settles {
		if err := ctx.Err(); err != nil {
			return err
		}
		q := settleDaySQL
		if st.all {
			q = settleOtherDaysSQL
		}
		if err := s.execPrepared(quiet, tx, q, st.schedule, st.day); err != nil {
			return err
		}
	}
	for i := range rows {
		if rows[i].seq >= 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		st, err := s.stmt(quiet, tx, newestSeqSQL)
		if err != nil {
			return err
		}
		if err := st.QueryRowContext(quiet, rows[i].schedule).Scan(&rows[i].seq); err != nil {
			return err
		}
	}
	return nil
}

// riddenDays merges into a schedule's stored days (its rows, oldest
// first, with their seqs) the days its pages carry, each where newer than
// its row; it returns the day the newest page carries ("" for none).
func riddenDays(schedule string, out []store.Day, seqs []int64, ridden []riddenDay) ([]store.Day, string) {
	newest, carries := int64(-1), ""
	for _, r := range ridden {
		if r.seq > newest {
			newest, carries = r.seq, r.day
		}
		t, err := time.Parse(time.DateOnly, r.day)
		if err != nil {
			continue // not a day fom wrote: the row, if any, stands
		}
		i := 0
		for i < len(out) && out[i].Day.Before(t) {
			i++
		}
		if i < len(out) && out[i].Day.Equal(t) {
			if r.seq > seqs[i] {
				out[i].Data, seqs[i] = r.data, r.seq
			}
			continue
		}
		out = append(out[:i], append([]store.Day{{Schedule: schedule, Day: t, Data: r.data}}, out[i:]...)...)
		seqs = append(seqs[:i], append([]int64{r.seq}, seqs[i:]...)...)
	}
	return out, carries
}

// riddenDay is a day a page carries.
type riddenDay struct {
	day  string
	data []byte
	seq  int64
}
