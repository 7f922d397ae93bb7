package sqlite

import (
	"context"
	"database/sql"
	"slices"
	"sync"

	"github.com/fom-go/fom/store"
)

// A flush rewrites, for every schedule, its row of the day and one slot of
// its run history: rows that exist already, in the steady state. Written
// by key, SQLite first searches the primary key's index (schedule, key)
// for the row, then the table for its rowid; the index search, with its
// string comparisons, was half of a flush's CPU. The store therefore
// remembers the rowid of each schedule's row of its latest day and of each
// slot it wrote or read, and rewrites those rows by rowid, found in the
// table's own b-tree.
//
// A remembered rowid is a hint, never trusted: the statement that writes
// by rowid updates the row only if it still holds the same schedule and
// key, and inserts one only where neither that rowid nor that key is
// taken (INSERT OR IGNORE). Rows it did not write show in the count of
// changed rows, and the whole statement's rows are then written again by
// key. So a hint that went stale (retention deleted the row, and SQLite
// gave its rowid to another) costs the slower path once, never a wrong
// row, and retention needs no bookkeeping here. Rowids are learned from
// the writes by key (RETURNING) and kept only once their transaction
// committed: a rolled-back insert's rowid may be handed out again.
//
// No schema change: these are the tables' implicit rowids, and rows keep
// them (an upsert that updates keeps the row's rowid), so a history slot's
// rows stay where their first lap put them: clustered by flush, a flush
// touches few pages.

// rowIDs is the store's memory of where rows are.
type rowIDs struct {
	mu sync.Mutex
	of map[string]scheduleRowIDs
}

// scheduleRowIDs is where one schedule's rows are: a few hundred bytes
// per schedule (bench -only memory counts them).
type scheduleRowIDs struct {
	day   string  // dayKey of dayID: a flush writes mostly today
	dayID int64   // 0: not known
	slots []int64 // rowid<<slotBits | slot, for each slot known
}

// slotBits holds a history slot (the statistics keep at most 10 000
// rounds, so as many slots); a rowid too large to pack with one is not
// remembered, and its row is written by key.
const (
	slotBits = 14
	maxSlot  = 1<<slotBits - 1
	maxRowID = 1<<(63-slotBits) - 1
)

// learned is a row's rowid, learned by a write by key.
type learned struct {
	schedule string
	slot     int    // rounds
	day      string // stats_days
	id       int64
}

// daysHints and roundsHints return each row's remembered rowid, 0 where
// none is.
func (r *rowIDs) daysHints(days []dayRow) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]int64, len(days))
	for i, d := range days {
		if s, ok := r.of[d.schedule]; ok && s.day == d.day {
			ids[i] = s.dayID
		}
	}
	return ids
}

func (r *rowIDs) roundsHints(rounds []store.Round) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]int64, len(rounds))
	for i, x := range rounds {
		for _, p := range r.of[x.Schedule].slots {
			if int(p&maxSlot) == x.Slot {
				ids[i] = p >> slotBits
				break
			}
		}
	}
	return ids
}

// learn keeps rowids of a committed transaction.
func (r *rowIDs) learn(rows []learned) {
	if len(rows) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.of == nil {
		r.of = make(map[string]scheduleRowIDs)
	}
	for _, x := range rows {
		s := r.of[x.schedule]
		switch {
		case x.day != "":
			if x.day >= s.day { // the newest day a flush wrote
				s.day, s.dayID = x.day, x.id
			}
		case x.slot >= 0 && x.slot <= maxSlot && x.id > 0 && x.id <= maxRowID:
			p := x.id<<slotBits | int64(x.slot)
			i := slices.IndexFunc(s.slots, func(q int64) bool { return int(q&maxSlot) == x.slot })
			if i < 0 {
				s.slots = append(s.slots, p)
			} else {
				s.slots[i] = p
			}
		}
		r.of[x.schedule] = s
	}
}

// hintedTable is how one table's rows are written by rowid and by key.
type hintedTable[T any] struct {
	byID, byKey rowsStatement // byKey returns rowid and key of each row
	appendByID  func(args []any, id int64, row T) []any
	appendByKey func(args []any, row T) []any
	scan        func(rows *sql.Rows) (learned, error)
}

// writeHinted writes rows: by rowid where hints has one, by key the rest
// and any a hint did not fit. It returns the rowids the writes by key
// learned.
func writeHinted[T any](ctx context.Context, s *Store, tx *sql.Tx, rows []T, hints []int64, t hintedTable[T]) ([]learned, error) {
	var hinted, byKey []T
	var ids []int64
	for i, row := range rows {
		if hints[i] != 0 {
			hinted, ids = append(hinted, row), append(ids, hints[i])
		} else {
			byKey = append(byKey, row)
		}
	}
	err := eachStatement(t.byID, hinted, func(q string, args []any, part []T) error {
		written, err := s.execPreparedCount(ctx, tx, q, args...)
		if err == nil && written != int64(len(part)) { // a stale hint: these rows again, by key
			byKey = append(byKey, part...)
		}
		return err
	}, func(args []any, i int, row T) []any { return t.appendByID(args, ids[i], row) })
	if err != nil {
		return nil, err
	}
	var got []learned
	err = eachStatement(t.byKey, byKey, func(q string, args []any, _ []T) error {
		var err error
		got, err = s.queryPreparedLearn(ctx, tx, q, t.scan, got, args...)
		return err
	}, func(args []any, _ int, row T) []any { return t.appendByKey(args, row) })
	return got, err
}

// execPreparedCount is execPrepared that returns how many rows the
// statement inserted or updated.
func (s *Store) execPreparedCount(ctx context.Context, tx *sql.Tx, q string, args ...any) (int64, error) {
	s.statements.Add(1)
	var res sql.Result
	var err error
	if st := s.prepared(q); st != nil {
		res, err = tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	} else {
		s.unprepared.Add(1)
		res, err = tx.ExecContext(ctx, q, args...)
	}
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// queryPreparedLearn runs a write that returns its rows' rowids and keys,
// appending them to got.
func (s *Store) queryPreparedLearn(ctx context.Context, tx *sql.Tx, q string, scan func(*sql.Rows) (learned, error), got []learned, args ...any) ([]learned, error) {
	s.statements.Add(1)
	var rows *sql.Rows
	var err error
	if st := s.prepared(q); st != nil {
		rows, err = tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	} else {
		s.unprepared.Add(1)
		rows, err = tx.QueryContext(ctx, q, args...)
	}
	if err != nil {
		return got, err
	}
	defer rows.Close()
	for rows.Next() {
		x, err := scan(rows)
		if err != nil {
			return got, err
		}
		got = append(got, x)
	}
	return got, rows.Err()
}
