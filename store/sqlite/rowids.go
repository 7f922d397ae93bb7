package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"sync"

	"github.com/fom-go/fom/store"
)

// A schedule's row of the day and the slots of its run history are
// written when the statistics log pushes them out to the tables, when the
// store opens and folds the log, and at every flush of a store without a
// log (log.go): mostly rows that exist already. Written
// by key, SQLite first searches the primary key's index (schedule, key)
// for the row, then the table for its rowid; the index search, with its
// string comparisons, was a third of a flush's instructions. The store
// therefore remembers the rowid of each schedule's row of its latest day
// and of each history slot it wrote, and writes those rows by rowid,
// found in the table's own b-tree. A row the store has no rowid for gets
// a fresh one, past every rowid of the table: a new row (a schedule's
// first page in a slot, its first row of a day) goes there, and is
// remembered. The rows a schedule has from before the store opened are
// learned from the reads an app makes when it registers the schedule
// (LoadDays: its newest day; LastRoundSeq: every history slot, from the
// primary key's index alone when the log told it the newest number at
// open), so that its first flush after a restart rewrites them by rowid
// too; a store keeps nothing for a schedule that has no rows yet.
//
// A rowid is a hint, never trusted: the statement that writes by rowid
// updates the row only if it holds the same schedule and key, and inserts
// one only where neither that rowid nor that key is taken (INSERT OR
// IGNORE). Rows it did not write show in the count of changed rows, and
// the statement's rows are then written again by key, which returns their
// rowids (RETURNING). That is the path of a row the store did not know
// of (written before it opened, for a schedule whose rows nobody read);
// a hint whose row retention deleted inserts the row again where it was;
// and a hint naming another row (a file edited behind the store's back)
// leaves that row alone. Rowids are kept once their transaction committed, and fresh
// ones are counted by the store, never handed out twice while it is open.
//
// No schema change: these are the tables' implicit rowids, and rows keep
// them (an upsert that updates keeps the row's rowid), so a history slot's
// rows stay where their first lap put them: clustered by flush, a flush
// touches few pages.

// rowIDs is the store's memory of where rows are.
type rowIDs struct {
	mu   sync.Mutex
	of   map[string]scheduleRowIDs
	next map[string]int64 // by table: the next fresh rowid, 0 before the first
}

// scheduleRowIDs is where one schedule's rows are: a few hundred bytes
// per schedule (bench -only memory counts them).
type scheduleRowIDs struct {
	day   string  // dayKey of dayID: a flush writes mostly today
	dayID int64   // 0: not known
	slots []int64 // rowid<<slotBits | slot, for each slot known, by slot
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
		slots := r.of[x.Schedule].slots
		if j, ok := slotIndex(slots, x.Slot); ok {
			ids[i] = slots[j] >> slotBits
		}
	}
	return ids
}

// slotIndex is where slot is in slots (rowid<<slotBits | slot, by slot),
// or where it would go, and whether it is there. Searched rather than
// scanned: a schedule keeps up to 10 000 slots, and learning each of them
// by a scan was quadratic.
func slotIndex(slots []int64, slot int) (int, bool) {
	return slices.BinarySearchFunc(slots, slot, func(p int64, slot int) int { return cmp.Compare(int(p&maxSlot), slot) })
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
			if i, ok := slotIndex(s.slots, x.slot); ok {
				s.slots[i] = p
			} else {
				s.slots = slices.Insert(s.slots, i, p) // at the end, mostly: slots are learned in their order
			}
		}
		r.of[x.schedule] = s
	}
}

// hintedTable is how one table's rows are written by rowid and by key.
type hintedTable[T any] struct {
	table       string
	byID, byKey rowsStatement // byID takes the rowid first; byKey returns rowid and key of each row
	appendRow   func(args []any, row T) []any
	key         func(row T, id int64) learned
	scan        func(rows *sql.Rows) (learned, error)
}

// writeHinted writes rows by rowid: a remembered one where hints has it,
// else a fresh one past every rowid of the table, where a new row goes (a
// schedule's first page in a slot, its first row of a day). A row that
// exists under another rowid (written before the store was opened, or
// its hint went stale) is left alone by that statement, and the
// statement's rows are written again by key. It returns the rowids
// learned: the fresh ones used and those the writes by key returned.
func writeHinted[T any](ctx context.Context, s *Store, tx *sql.Tx, rows []T, hints []int64, t hintedTable[T]) ([]learned, error) {
	ids := slices.Clone(hints)
	fresh := false
	for i := range ids {
		if ids[i] == 0 {
			id, err := s.freshRowID(ctx, tx, t.table)
			if err != nil {
				return nil, err
			}
			ids[i], fresh = id, true
		}
	}
	var got []learned
	var byKey []T
	err := eachStatement(ctx, t.byID, rows, func(ctx context.Context, q string, args []any, from int, part []T) error {
		written, err := s.execPreparedCount(ctx, tx, q, args...)
		switch {
		case err != nil:
			return err
		case written != int64(len(part)): // a row exists elsewhere: these rows again, by key
			byKey = append(byKey, part...)
		case fresh:
			for i, row := range part {
				if hints[from+i] == 0 {
					got = append(got, t.key(row, ids[from+i]))
				}
			}
		}
		return nil
	}, func(args []any, i int, row T) []any { return t.appendRow(append(args, ids[i]), row) })
	if err != nil {
		return nil, err
	}
	err = eachStatement(ctx, t.byKey, byKey, func(ctx context.Context, q string, args []any, _ int, _ []T) error {
		var err error
		got, err = s.queryPreparedLearn(ctx, tx, q, t.scan, got, args...)
		return err
	}, func(args []any, _ int, row T) []any { return t.appendRow(args, row) })
	for _, x := range got {
		s.ids.seen(t.table, x.id)
	}
	return got, err
}

// freshRowID returns a rowid past every rowid of table, read once from
// the table (a statement, counted) and counted on from there, so that a
// rowid is never handed out twice while the store is open. Called inside
// a write transaction.
func (s *Store) freshRowID(ctx context.Context, tx *sql.Tx, table string) (int64, error) {
	r := &s.ids
	r.mu.Lock()
	next := r.next[table]
	r.mu.Unlock()
	if next == 0 {
		var top sql.NullInt64
		s.statements.Add(1)
		if err := tx.QueryRowContext(ctx, "SELECT max(rowid) FROM "+table).Scan(&top); err != nil {
			return 0, err
		}
		next = top.Int64 + 1
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next == nil {
		r.next = make(map[string]int64)
	}
	r.next[table] = max(r.next[table], next) + 1
	return r.next[table] - 1, nil
}

// seen keeps the fresh rowids of table past id, a rowid SQLite gave.
func (r *rowIDs) seen(table string, id int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next != nil && r.next[table] <= id {
		r.next[table] = id + 1
	}
}

// execPreparedCount is execPrepared that returns how many rows the
// statement inserted or updated.
func (s *Store) execPreparedCount(ctx context.Context, tx *sql.Tx, q string, args ...any) (int64, error) {
	st, err := s.stmt(ctx, tx, q)
	if err != nil {
		return 0, err
	}
	res, err := st.ExecContext(ctx, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// queryPreparedLearn runs a write that returns its rows' rowids and keys,
// appending them to got.
func (s *Store) queryPreparedLearn(ctx context.Context, tx *sql.Tx, q string, scan func(*sql.Rows) (learned, error), got []learned, args ...any) ([]learned, error) {
	st, err := s.stmt(ctx, tx, q)
	if err != nil {
		return got, err
	}
	rows, err := st.QueryContext(ctx, args...)
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
