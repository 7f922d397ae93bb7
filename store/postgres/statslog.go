package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fom-go/fom/internal/pgbulk"
	"github.com/fom-go/fom/store"
)

// The statistics log. A flush hands the store, for every schedule that
// ran since the last one, its day and a page of its run history: written
// as rows of stats_days and rounds, that was two row versions per
// schedule and flush (about 8 µs of the database's CPU each, 54 ms a
// flush of 3 333 schedules), and most are rewritten soon: a schedule
// firing every second rewrites today's row at every flush, and its
// history page lands in the same slot a lap of the history later. So a
// flush writes its days and pages as one row of stats_log (its entries as
// arrays, stored out of line: 4 ms for those 3 333 schedules), and each
// instance's log keeps its newest store.LogFlushes flushes. When a flush
// pushes an instance's oldest rows out, what in them no newer row of that
// instance holds (a schedule's day, a schedule's history slot) is written
// to its table row, as a flush would have written it, in the same
// statement that deletes them; the rest goes without being written.
//
// What the store holds is therefore the tables overlaid by the log, an
// instance's newest entry of a key winning, and every read of days or
// pages overlays it in the same statement (one snapshot: a push-out
// committing meanwhile is seen whole or not at all). The log is the
// database's, not a process's: every instance reads every other's newest
// statistics as soon as they are flushed, and an instance that restarts
// with its id folds the log it left into the tables at its first flush or
// read (knowLog). Retention (Prune) first folds into
// the tables the rows that hold what it deletes, and the rows an hour
// old: the log of an instance gone (or renamed by a restart) leaves at a
// retention run, whichever instance makes it. A fold of a live instance's
// rows is harmless: their entries go to the tables, the newer rows' win
// on reads, and its push-outs find the rows gone.

// Kinds of a log entry.
const (
	logDay  = 1
	logPage = 2
)

// statsLog is what a store remembers of its instance's log: the id of
// its next row, the first row of each flush it holds, oldest first (a
// flush of many schedules may write several rows, StatsBatch.Flush), and
// where each key's newest entry is, by schedule: what a push-out writes
// to the tables is what no newer row holds, and a read of this instance's
// statistics of a schedule the log does not hold reads the tables alone.
// Known from the first flush or read that needs it, which folds the rows
// an earlier process left (knowLog).
type statsLog struct {
	known    bool
	instance string  // whose log this is: a store's instance may be bound after it is opened
	next     int64   // the next row's id
	flushes  []int64 // the first row of each flush held, ascending
	flush    uint64  // the StatsBatch.Flush of the newest row, 0 for none
	refs     map[string][]logRef
}

// logRef is where the newest logged entry of one key of a schedule is:
// its row, and its place in the row's arrays (from 1).
type logRef struct {
	row  int64
	key  int64 // a day's number, or a page's slot
	ord  int32
	kind int16
}

// knows reports whether l is instance's log, known.
func (l *statsLog) knows(instance string) bool { return l.known && l.instance == instance }

// note records that row holds schedule's entry of kind and key at ord.
func (l *statsLog) note(schedule string, kind int16, key, row int64, ord int32) {
	rs := l.refs[schedule]
	for i := range rs {
		if rs[i].kind == kind && rs[i].key == key {
			rs[i].row, rs[i].ord = row, ord
			return
		}
	}
	l.refs[schedule] = append(rs, logRef{row: row, key: key, ord: ord, kind: kind})
}

// takeBefore removes the refs into rows before cut, and returns them as
// the rows and places of the entries a push-out of those rows writes.
func (l *statsLog) takeBefore(cut int64) (rows []int64, ords []int32) {
	for name, rs := range l.refs {
		kept := rs[:0]
		for _, r := range rs {
			if r.row < cut {
				rows, ords = append(rows, r.row), append(ords, r.ord)
			} else {
				kept = append(kept, r)
			}
		}
		if len(kept) == 0 {
			delete(l.refs, name)
		} else {
			l.refs[name] = kept
		}
	}
	return rows, ords
}

// knowLog makes l this instance's log, unless l knows it already. The
// rows an earlier process left under this instance's id (a restart with
// the same id; this process's own, after a flush that failed or another
// process's flush under its id) are folded into the tables first, and l
// starts empty after them. A restarted App reads each schedule it
// registers (its days, its last round): through a full log of 3 333
// schedules each read cost 20–30 ms, 2 min 41 s of registration, where a
// read of a schedule its log does not hold goes to the tables alone
// (BenchmarkLogReads: 0.4–0.6 ms the two). A fold of twelve flushes of 3 333
// schedules is one statement, about 470 ms, once. A process still running
// under the same id loses nothing by it (see fold).
func (s *Store) knowLog(ctx context.Context, tx pgx.Tx, l *statsLog) error {
	me := s.instanceID()
	if l.knows(me) {
		return nil
	}
	var ids []int64
	if err := tx.QueryRow(ctx, "SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM "+s.t("stats_log")+" WHERE instance = $1", me).Scan(&ids); err != nil {
		return err
	}
	fresh := statsLog{known: true, instance: me, next: 1, refs: map[string][]logRef{}}
	if len(ids) > 0 {
		if err := s.fold(ctx, tx, me, ids); err != nil {
			return err
		}
		fresh.next = ids[len(ids)-1] + 1
	}
	*l = fresh
	return nil
}

// ownLogged reports whether this instance's log holds an entry of
// schedule, and holds the log until unlock is called: a read of the
// tables alone, for a schedule the log does not hold, is not overtaken by
// a flush logging it.
func (s *Store) ownLogged(ctx context.Context, schedule string) (logged bool, unlock func(), err error) {
	s.logMu.Lock()
	if !s.log.knows(s.instanceID()) { // a transaction only to fold
		err := s.tx(ctx, "fold the statistics log", func(tx pgx.Tx) error { return s.knowLog(ctx, tx, &s.log) })
		if err != nil {
			s.log = statsLog{}
			s.logMu.Unlock()
			return false, nil, err
		}
	}
	return len(s.log.refs[schedule]) > 0, s.logMu.Unlock, nil
}

// SaveStats implements store.Store: the batch's days and pages as one row
// of the log, the rows of flushes past store.LogFlushes pushed out, and
// its failures, in one transaction.
func (s *Store) SaveStats(ctx context.Context, b store.StatsBatch) error {
	if len(b.Days) == 0 && len(b.Failures) == 0 && len(b.Rounds) == 0 {
		return nil
	}
	rounds, days := store.LastPerSlot(b.Rounds), store.LastPerDay(b.Days)
	s.logMu.Lock()
	defer s.logMu.Unlock()
	err := s.tx(ctx, "save statistics", func(tx pgx.Tx) error {
		if err := s.knowLog(ctx, tx, &s.log); err != nil {
			return err
		}
		if len(days)+len(rounds) > 0 {
			if err := s.logFlush(ctx, tx, &s.log, b.Flush, days, rounds); err != nil {
				return err
			}
		}
		if len(b.Failures) > 0 {
			return s.saveFailures(ctx, tx, b.Failures)
		}
		return nil
	})
	if err != nil {
		// What the log was noted as is the transaction's, rolled back:
		// the next flush or read folds the log (knowLog).
		s.log = statsLog{}
	}
	return err
}

// logFlush writes days and rounds as the next row of l's log, part of
// flush (0: a flush of its own), and pushes out the flushes past
// store.LogFlushes. l is updated as it will be once tx commits.
func (s *Store) logFlush(ctx context.Context, tx pgx.Tx, l *statsLog, flush uint64, days []store.Day, rounds []store.Round) error {
	n := len(days) + len(rounds)
	schedules, kinds, keys := make([]string, 0, n), make([]int32, 0, n), make([]int64, 0, n)
	firsts, seqs, starts, datas := make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n), make([][]byte, 0, n)
	for _, d := range days {
		schedules, kinds, keys = append(schedules, d.Schedule), append(kinds, logDay), append(keys, store.DayNumber(d.Day))
		firsts, seqs, starts, datas = append(firsts, 0), append(seqs, 0), append(starts, 0), append(datas, d.Data)
	}
	for _, r := range rounds {
		schedules, kinds, keys = append(schedules, r.Schedule), append(kinds, logPage), append(keys, int64(r.Slot))
		firsts, seqs, starts, datas = append(firsts, r.First), append(seqs, r.Seq), append(starts, r.Start.UnixNano()), append(datas, r.Data)
	}
	// Another process logging under the same instance id (a restart
	// overlapping its predecessor) took ids meanwhile: go on after them.
	// Its rows are not in l: this flush pushes nothing out, and the next
	// flush or read folds the log (knowLog).
	var b pgbulk.Batch
	in := b.Arg(l.instance)
	res, err := pgbulk.Send(ctx, tx.Conn(), &s.sendBuf, pgbulk.Statement{Params: &b, SQL: "INSERT INTO " + s.t("stats_log") + ` (instance, id, schedules, kinds, keys, firsts, seqs, starts, datas)
		SELECT ` + in + `::text, greatest(` + b.Arg(l.next) + `::bigint, coalesce(max(id), 0) + 1), ` + b.Arg(schedules) + `::text[], ` + b.Arg(kinds) + `::int[]::smallint[], ` +
		b.Arg(keys) + `::bigint[], ` + b.Arg(firsts) + `::bigint[], ` + b.Arg(seqs) + `::bigint[], ` + b.Arg(starts) + `::bigint[], ` + b.Arg(datas) + `::bytea[]
		FROM ` + s.t("stats_log") + ` WHERE instance = ` + in + `::text RETURNING id`})
	if err != nil {
		return err
	}
	if len(res) != 1 || len(res[0].Rows) != 1 {
		return fmt.Errorf("the statistics log's new row of instance %q: no id returned", l.instance)
	}
	id, err := strconv.ParseInt(string(res[0].Rows[0][0]), 10, 64)
	if err != nil {
		return fmt.Errorf("the statistics log's new row of instance %q: id %q: %w", l.instance, res[0].Rows[0][0], err)
	}
	if id != l.next {
		*l = statsLog{instance: l.instance}
		return nil
	}
	l.next = id + 1
	for i, d := range days {
		l.note(d.Schedule, logDay, store.DayNumber(d.Day), id, int32(i+1))
	}
	for i, r := range rounds {
		l.note(r.Schedule, logPage, int64(r.Slot), id, int32(len(days)+i+1))
	}
	if flush == 0 || flush != l.flush || len(l.flushes) == 0 {
		l.flushes = append(l.flushes, id)
	}
	l.flush = flush
	if len(l.flushes) <= store.LogFlushes {
		return nil
	}
	cut := l.flushes[len(l.flushes)-store.LogFlushes]
	rows, ords := l.takeBefore(cut)
	if err := s.pushOut(ctx, tx, l.instance, cut, rows, ords); err != nil {
		return err
	}
	l.flushes = slices.Clone(l.flushes[len(l.flushes)-store.LogFlushes:])
	return nil
}

// pushOut deletes instance's log rows before row cut, and writes to
// stats_days and rounds the entries of them at rows and ords (the places
// of the entries no row from cut on holds, statsLog.takeBefore), in one
// statement. The rows' entries are unnested once, then joined with the
// places: asked whether each place is among the entries, PostgreSQL
// unnested the rows again for every place, and a push-out of 3 333
// entries took seconds (BenchmarkPushOut).
func (s *Store) pushOut(ctx context.Context, tx pgx.Tx, instance string, cut int64, rows []int64, ords []int32) error {
	if len(rows) == 0 {
		_, err := tx.Exec(ctx, "DELETE FROM "+s.t("stats_log")+" WHERE instance = $1 AND id < $2", instance, cut)
		return err
	}
	_, err := tx.Exec(ctx, `WITH old AS (
			DELETE FROM `+s.t("stats_log")+` WHERE instance = $1 AND id < $2
			RETURNING id, schedules, kinds, keys, firsts, seqs, starts, datas),
		entries AS MATERIALIZED (SELECT old.id, u.s, u.k, u.key, u.f, u.q, u.st, u.d, u.ord
			FROM old, unnest(old.schedules, old.kinds, old.keys, old.firsts, old.seqs, old.starts, old.datas) WITH ORDINALITY AS u(s, k, key, f, q, st, d, ord)),
		live AS MATERIALIZED (SELECT e.s, e.k, e.key, e.f, e.q, e.st, e.d
			FROM entries e JOIN unnest($3::bigint[], $4::int[]) AS w(id, ord) ON w.id = e.id AND w.ord = e.ord) `+s.writeLive(),
		instance, cut, rows, ords)
	return err
}

// writeLive is the end of a statement whose CTE live holds log entries
// (s, k, key, f, q, st, d), one of a key at most, of instance $1: it
// writes them to stats_days and rounds.
func (s *Store) writeLive() string {
	return `, days AS (INSERT INTO ` + s.t("stats_days") + ` (schedule, day, data, instance)
			SELECT s, DATE '1970-01-01' + key::int, d, $1 FROM live WHERE k = ` + fmt.Sprint(logDay) + `
			ON CONFLICT (schedule, day, instance) DO UPDATE SET data = excluded.data)
		INSERT INTO ` + s.t("rounds") + ` (schedule, slot, first_seq, seq, start, data, instance)
			SELECT s, key::int, f, q, st, d, $1 FROM live WHERE k = ` + fmt.Sprint(logPage) + `
			ON CONFLICT (schedule, instance, slot) DO UPDATE SET first_seq = excluded.first_seq, seq = excluded.seq, start = excluded.start, data = excluded.data`
}

// foldIdle is how long a log row may stay before a retention run folds
// it into the tables: an instance flushing at the default pace pushes its
// rows out within a minute, so an older row is of an instance gone (or
// renamed by a restart), or of one that flushes seldom.
const foldIdle = time.Hour

// foldForRetention folds into the tables, before retention deletes from
// them, the log rows older than foldIdle and those holding an entry that
// groups would delete (a day or page older than its rule, a page past the
// history kept): deleted from the tables alone, such an entry would still
// be read through the log. A retention run at the default pace finds
// none of the second kind: a flush logs today's days and new pages.
func (s *Store) foldForRetention(ctx context.Context, tx pgx.Tx, groups []store.RetentionGroup) error {
	rows, err := tx.Query(ctx, "SELECT instance, id FROM "+s.t("stats_log")+" WHERE at < now() - $1::interval", foldIdle)
	if err != nil {
		return err
	}
	type rowID struct {
		Instance string
		ID       int64
	}
	fold, err := pgx.CollectRows(rows, pgx.RowToStructByPos[rowID])
	if err != nil {
		return err
	}
	for _, g := range groups {
		before, beforeDay := int64(math.MinInt64), int64(math.MinInt64)
		if !g.Before.IsZero() {
			before, beforeDay = g.Before.UnixNano(), store.DayNumber(g.Before)
		}
		keep := int64(math.MaxInt64)
		if g.KeepRounds > 0 {
			keep = int64(g.KeepRounds)
		}
		rows, err := tx.Query(ctx, "SELECT DISTINCT l.instance, l.id FROM "+s.t("stats_log")+` l, unnest(l.schedules, l.kinds, l.keys, l.starts) AS u(s, k, key, st)
			WHERE u.s IN (SELECT unnest($1::text[])) AND (u.k = `+fmt.Sprint(logDay)+` AND u.key < $2 OR u.k = `+fmt.Sprint(logPage)+` AND (u.st < $3 OR u.key >= $4))`,
			g.Schedules, beforeDay, before, keep)
		if err != nil {
			return err
		}
		more, err := pgx.CollectRows(rows, pgx.RowToStructByPos[rowID])
		if err != nil {
			return err
		}
		fold = append(fold, more...)
	}
	byInstance := map[string][]int64{}
	for _, r := range fold {
		byInstance[r.Instance] = append(byInstance[r.Instance], r.ID)
	}
	for in, ids := range byInstance {
		if err := s.fold(ctx, tx, in, ids); err != nil {
			return err
		}
	}
	return nil
}

// fold deletes instance's log rows ids, and writes each key's newest
// entry among them to the tables. Entries a newer row of the instance
// holds may be written too: the log's newer entry is what reads find,
// and its own push-out writes it over.
func (s *Store) fold(ctx context.Context, tx pgx.Tx, instance string, ids []int64) error {
	_, err := tx.Exec(ctx, `WITH old AS (
			DELETE FROM `+s.t("stats_log")+` WHERE instance = $1 AND id = ANY($2)
			RETURNING id, schedules, kinds, keys, firsts, seqs, starts, datas),
		live AS MATERIALIZED (SELECT DISTINCT ON (u.s, u.k, u.key) u.s, u.k, u.key, u.f, u.q, u.st, u.d
			FROM old, unnest(old.schedules, old.kinds, old.keys, old.firsts, old.seqs, old.starts, old.datas) AS u(s, k, key, f, q, st, d)
			ORDER BY u.s, u.k, u.key, old.id DESC) `+s.writeLive(), instance, ids)
	if err != nil {
		return fmt.Errorf("fold the statistics log of instance %q: %w", instance, err)
	}
	return nil
}

// saveFailures inserts failures in tx, in order.
func (s *Store) saveFailures(ctx context.Context, tx pgx.Tx, fs []store.Failure) error {
	n := len(fs)
	names, tasks, statuses, errs, stacks := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	ats, costs, rounds := make([]int64, n), make([]int64, n), make([]int64, n)
	for i, f := range fs {
		names[i], tasks[i], statuses[i], errs[i], stacks[i] = f.Schedule, f.TaskID, f.Status, f.Error, f.Stack
		ats[i], costs[i], rounds[i] = f.At.UnixNano(), int64(f.Cost), f.Round
	}
	_, err := tx.Exec(ctx, "INSERT INTO "+s.t("failures")+" (schedule, at, task_id, status, error, stack, cost_ns, round, instance) SELECT s, a, t, st, e, sk, c, r, $9 FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::bigint[]) WITH ORDINALITY AS f(s, a, t, st, e, sk, c, r, n) ORDER BY n",
		names, ats, tasks, statuses, errs, stacks, costs, rounds, s.instanceID())
	return err
}

// loggedDays is the newest logged day of each instance, schedule and day
// among schedules ($1) from day number $2, of every instance ($3) or of
// $4 only: a CTE the reads of days overlay on stats_days.
//
// An unnested entry's name is matched by IN (SELECT unnest($1)), hashed:
// = ANY($1) is read element by element for each entry in a generic plan
// (the plan a prepared statement settles on after five runs), 20.6 s
// against 0.1 for retention's look at a log of 10 000 schedules
// (BenchmarkRetention). No row is first asked whether its names overlap
// the set (&&): under a generic plan that made a read of 50 schedules'
// days 5 times slower, and every row holds most of its instance's
// schedules anyway.
//
// A log row holds an entry or two of every schedule that ran in its
// flush (6 666 at 3 333 schedules): unnested whole, its arrays cost the
// same whichever schedules a read wants, 24–48 ms a read of one schedule
// in a 10 000-schedule cluster's 36 rows (BenchmarkLogReads). A read of a
// few schedules looks each up instead (array_positions, a scan of the
// names in C) and takes only their entries, 5–8 ms for one schedule; the
// scans grow with the names, and past about thirty unnesting once is the
// cheaper (few says which).
func (s *Store) loggedDays(few bool) string {
	if few {
		return `logged AS MATERIALIZED (SELECT DISTINCT ON (l.instance, n.s, l.keys[p.i]) l.instance, n.s, l.keys[p.i] AS key, l.datas[p.i] AS d
			FROM ` + s.t("stats_log") + ` l, unnest($1::text[]) AS n(s), unnest(array_positions(l.schedules, n.s)) AS p(i)
			WHERE ($3 OR l.instance = $4) AND l.kinds[p.i] = ` + fmt.Sprint(logDay) + ` AND l.keys[p.i] >= $2
			ORDER BY l.instance, n.s, l.keys[p.i], l.id DESC)`
	}
	return `logged AS MATERIALIZED (SELECT DISTINCT ON (l.instance, u.s, u.key) l.instance, u.s, u.key, u.d
			FROM ` + s.t("stats_log") + ` l, unnest(l.schedules, l.kinds, l.keys, l.datas) AS u(s, k, key, d)
			WHERE ($3 OR l.instance = $4) AND u.k = ` + fmt.Sprint(logDay) + ` AND u.s IN (SELECT unnest($1::text[])) AND u.key >= $2
			ORDER BY l.instance, u.s, u.key, l.id DESC)`
}

// fewNames is the most schedules a read of days looks up one by one in
// each log row (see loggedDays).
const fewNames = 16

func (s *Store) loadDays(ctx context.Context, schedule string, from time.Time, all bool) ([]store.Day, error) {
	days, err := s.loadDaysOf(ctx, []string{schedule}, from, all)
	if err != nil {
		return nil, s.wrap(fmt.Sprintf("load statistics of schedule %q", schedule), err)
	}
	return days, nil
}

// LoadClusterDaysOf is LoadClusterDays of several schedules in one query,
// by schedule.
func (s *Store) LoadClusterDaysOf(ctx context.Context, schedules []string, from time.Time) (map[string][]store.Day, error) {
	days, err := s.loadDaysOf(ctx, schedules, from, true)
	if err != nil {
		return nil, s.wrap(fmt.Sprintf("load statistics of %d schedules", len(schedules)), err)
	}
	out := map[string][]store.Day{}
	for _, d := range days {
		out[d.Schedule] = append(out[d.Schedule], d)
	}
	return out, nil
}

// loadDaysOf reads the days of schedules from from on, of every instance
// (all) or this store's: the log overlaid on stats_days.
func (s *Store) loadDaysOf(ctx context.Context, schedules []string, from time.Time, all bool) ([]store.Day, error) {
	table := `SELECT t.schedule, t.day - DATE '1970-01-01', t.data, t.instance FROM ` + s.t("stats_days") + ` t
		WHERE t.schedule = ANY($1) AND t.day >= DATE '1970-01-01' + $2::int AND ($3 OR t.instance = $4)`
	q := "WITH " + s.loggedDays(len(schedules) <= fewNames) + `
		SELECT s, key, d, instance FROM logged
		UNION ALL ` + table + `
			AND NOT EXISTS (SELECT 1 FROM logged WHERE logged.instance = t.instance AND logged.s = t.schedule AND logged.key = t.day - DATE '1970-01-01')`
	if !all && len(schedules) == 1 {
		// An App reads its own days of each schedule it registers: most
		// are not in its log.
		logged, unlock, err := s.ownLogged(ctx, schedules[0])
		if err != nil {
			return nil, err
		}
		defer unlock()
		if !logged {
			q = table
		}
	}
	rows, err := s.pool.Query(ctx, q+" ORDER BY 1, 2, 4", schedules, store.DayNumber(from), all, s.instanceID())
	if err != nil {
		return nil, err
	}
	var out []store.Day
	var sched, inst string
	var day int64
	var data []byte
	_, err = pgx.ForEachRow(rows, []any{&sched, &day, &data, &inst}, func() error {
		out = append(out, store.Day{Schedule: sched, Day: store.DayTime(day), Data: append([]byte(nil), data...), Instance: inst})
		return nil
	})
	return out, err
}

// pages is the history pages of schedule $1 of every instance ($2 empty)
// or of $2: the log overlaid on rounds, a slot's newest page winning. Its
// columns: instance, slot, first_seq, seq, start, data. Each log row's
// entries of $1 are looked up, not unnested (see loggedDays).
func (s *Store) pages() string {
	return `WITH logged AS MATERIALIZED (SELECT DISTINCT ON (l.instance, l.keys[p.i]) l.instance, l.keys[p.i]::int AS slot,
				l.firsts[p.i] AS f, l.seqs[p.i] AS q, l.starts[p.i] AS st, l.datas[p.i] AS d
			FROM ` + s.t("stats_log") + ` l, unnest(array_positions(l.schedules, $1::text)) AS p(i)
			WHERE ($2 = '' OR l.instance = $2) AND l.kinds[p.i] = ` + fmt.Sprint(logPage) + `
			ORDER BY l.instance, l.keys[p.i], l.id DESC),
		pages AS (SELECT instance, slot, f AS first_seq, q AS seq, st AS start, d AS data FROM logged
			UNION ALL
			SELECT r.instance, r.slot, r.first_seq, r.seq, r.start, r.data FROM ` + s.t("rounds") + ` r
			WHERE r.schedule = $1 AND ($2 = '' OR r.instance = $2)
				AND NOT EXISTS (SELECT 1 FROM logged WHERE logged.instance = r.instance AND logged.slot = r.slot)) `
}

// LoadRounds implements store.Store: every instance's rounds.
func (s *Store) LoadRounds(ctx context.Context, schedule string, limit int) ([]store.Round, error) {
	rows, err := s.pool.Query(ctx, s.pages()+"SELECT instance, slot, first_seq, seq, start, data FROM pages ORDER BY start DESC, seq DESC LIMIT $3", schedule, "", limit)
	if err != nil {
		return nil, s.wrap(fmt.Sprintf("load the run history of schedule %q", schedule), err)
	}
	var out []store.Round
	r := store.Round{Schedule: schedule}
	var start int64
	var slot int32
	_, err = pgx.ForEachRow(rows, []any{&r.Instance, &slot, &r.First, &r.Seq, &start, &r.Data}, func() error {
		r.Start, r.Slot = time.Unix(0, start).UTC(), int(slot)
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, s.wrap(fmt.Sprintf("load the run history of schedule %q", schedule), err)
	}
	return out, nil
}

// LoadRound implements store.Store.
func (s *Store) LoadRound(ctx context.Context, schedule, instance string, seq int64) (store.Round, bool, error) {
	if instance == "" {
		instance = s.instanceID()
	}
	r := store.Round{Schedule: schedule, Instance: instance}
	var start int64
	var slot int32
	// An instance without a name is this store's when it has none: read
	// with the filter on, where '' would mean every instance.
	q := s.pages() + "SELECT slot, first_seq, seq, start, data FROM pages WHERE instance = $2 AND first_seq <= $3 AND seq >= $3 ORDER BY seq DESC LIMIT 1"
	if instance == s.instanceID() {
		logged, unlock, err := s.ownLogged(ctx, schedule)
		if err != nil {
			return r, false, s.wrap(fmt.Sprintf("load round #%d of schedule %q", seq, schedule), err)
		}
		defer unlock()
		if !logged {
			q = "SELECT slot, first_seq, seq, start, data FROM " + s.t("rounds") + " WHERE schedule = $1 AND instance = $2 AND first_seq <= $3 AND seq >= $3 ORDER BY seq DESC LIMIT 1"
		}
	}
	err := s.pool.QueryRow(ctx, q, schedule, instance, seq).Scan(&slot, &r.First, &r.Seq, &start, &r.Data)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, s.wrap(fmt.Sprintf("load round #%d of schedule %q", seq, schedule), err)
	}
	r.Start, r.Slot = time.Unix(0, start).UTC(), int(slot)
	return r, true, nil
}

// LastRoundSeq implements store.Store: this store's instance's, in its
// log or its pages.
func (s *Store) LastRoundSeq(ctx context.Context, schedule string) (int64, error) {
	var seq *int64
	logged, unlock, err := s.ownLogged(ctx, schedule)
	if err != nil {
		return 0, s.wrap(fmt.Sprintf("load the run history of schedule %q", schedule), err)
	}
	defer unlock()
	if !logged { // an App reads it for each schedule it registers
		err = s.pool.QueryRow(ctx, "SELECT max(seq) FROM "+s.t("rounds")+" WHERE schedule = $1 AND instance = $2", schedule, s.instanceID()).Scan(&seq)
	} else {
		err = s.pool.QueryRow(ctx, `SELECT greatest(
			(SELECT max(seq) FROM `+s.t("rounds")+` WHERE schedule = $1 AND instance = $2),
			(SELECT max(l.seqs[p.i]) FROM `+s.t("stats_log")+` l, unnest(array_positions(l.schedules, $1::text)) AS p(i)
				WHERE l.instance = $2 AND l.kinds[p.i] = `+fmt.Sprint(logPage)+`))`,
			schedule, s.instanceID()).Scan(&seq)
	}
	if err != nil {
		return 0, s.wrap(fmt.Sprintf("load the run history of schedule %q", schedule), err)
	}
	if seq == nil {
		return 0, nil
	}
	return *seq, nil
}
