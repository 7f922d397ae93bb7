// Package sqlite is fom's embedded store: one SQLite file (pure Go, no cgo),
// its schema versioned by PRAGMA user_version and migrated at open.
//
// Open never creates tables in, rewrites or truncates a file it cannot
// read as a fom store of this or an older version: a corrupt file, or one
// written by a newer fom, is reported and left as it is.
//
// Statistics reach their tables through a log of the newest flushes
// (log.go), and a row of a table is written by its remembered rowid
// (rowids.go).
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/fom-go/fom/store"
)

// FileName is the store's file in the data directory.
const FileName = "fom.db"

// migrations are applied in order; index i brings the schema to version i+1.
// Append only: never edit a released migration.
func migrations() []string {
	return []string{
		`CREATE TABLE config_edits (
			schedule TEXT NOT NULL,
			key      TEXT NOT NULL,
			value    TEXT NOT NULL,
			PRIMARY KEY (schedule, key)
		);
		CREATE TABLE settings (
			schedule TEXT NOT NULL,
			key      TEXT NOT NULL,
			value    TEXT NOT NULL,
			PRIMARY KEY (schedule, key)
		);`,
		`CREATE TABLE stats_days (
			schedule TEXT NOT NULL,
			day      TEXT NOT NULL,
			data     BLOB NOT NULL,
			PRIMARY KEY (schedule, day)
		);
		CREATE TABLE failures (
			id       INTEGER PRIMARY KEY AUTOINCREMENT,
			schedule TEXT NOT NULL,
			at       INTEGER NOT NULL,
			task_id  TEXT NOT NULL,
			status   TEXT NOT NULL,
			error    TEXT NOT NULL,
			stack    TEXT NOT NULL,
			cost_ns  INTEGER NOT NULL
		);
		CREATE INDEX failures_by_schedule ON failures (schedule, at);`,
		// Pruning failures by count walks a schedule's newest ids.
		`CREATE INDEX failures_by_schedule_id ON failures (schedule, id);`,
		`CREATE TABLE audit (
			id        INTEGER PRIMARY KEY AUTOINCREMENT,
			schedule  TEXT NOT NULL,
			at        INTEGER NOT NULL,
			action    TEXT NOT NULL,
			principal TEXT NOT NULL,
			detail    TEXT NOT NULL,
			outcome   TEXT NOT NULL
		);
		CREATE INDEX audit_by_schedule ON audit (schedule, id);`,
		`ALTER TABLE failures ADD COLUMN round INTEGER NOT NULL DEFAULT 0;`,
		// The run history: a page of rounds per flush and schedule, in a
		// slot overwritten a lap later; by start for pruning by age.
		`CREATE TABLE rounds (
			schedule  TEXT NOT NULL,
			slot      INTEGER NOT NULL,
			first_seq INTEGER NOT NULL,
			seq       INTEGER NOT NULL,
			start     INTEGER NOT NULL,
			data      BLOB NOT NULL,
			PRIMARY KEY (schedule, slot)
		);
		CREATE INDEX rounds_by_start ON rounds (start);`,
		// Pruning by age names the schedules, so the primary key finds
		// their pages; the index by start cost every page written a
		// quarter more.
		`DROP INDEX rounds_by_start;`,
		// The statistics log (log.go): a flush's days and pages as one
		// row, the newest flushes' rows kept.
		`CREATE TABLE stats_log (
			id   INTEGER PRIMARY KEY,
			data BLOB NOT NULL
		);`,
		// The data format of the rows (store.DataFormat): a build that
		// knows an older one refuses the store rather than skip and then
		// overwrite what it cannot read. This migration itself makes the
		// builds from before it refuse a store written since.
		`CREATE TABLE meta (
			key   TEXT PRIMARY KEY,
			value TEXT NOT NULL
		);
		INSERT INTO meta (key, value) VALUES ('data_format', '1');`,
		// Durable timers (timers.go): definitions, their fires (one per
		// timer and planned time) and each fire's attempts.
		`CREATE TABLE timers (
			id           TEXT PRIMARY KEY,
			namespace    TEXT NOT NULL,
			name         TEXT NOT NULL,
			kind         TEXT NOT NULL,
			at           INTEGER NOT NULL,
			cron         TEXT NOT NULL,
			payload      BLOB NOT NULL,
			enabled      INTEGER NOT NULL,
			version      INTEGER NOT NULL,
			max_attempts INTEGER NOT NULL,
			min_backoff  INTEGER NOT NULL,
			max_backoff  INTEGER NOT NULL,
			timeout      INTEGER NOT NULL,
			misfire      TEXT NOT NULL,
			next_at      INTEGER NOT NULL,
			created      INTEGER NOT NULL,
			updated      INTEGER NOT NULL,
			UNIQUE (namespace, name)
		);
		CREATE INDEX timers_due ON timers (next_at) WHERE enabled = 1 AND next_at > 0;
		CREATE TABLE timer_fires (
			timer_id    TEXT NOT NULL,
			planned     INTEGER NOT NULL,
			namespace   TEXT NOT NULL,
			state       TEXT NOT NULL,
			attempt     INTEGER NOT NULL,
			base        INTEGER NOT NULL,
			due_at      INTEGER NOT NULL,
			owner       TEXT NOT NULL,
			lease_until INTEGER NOT NULL,
			last_error  TEXT NOT NULL,
			started     INTEGER NOT NULL DEFAULT 0,
			finished    INTEGER NOT NULL,
			status_code INTEGER NOT NULL DEFAULT 0,
			PRIMARY KEY (timer_id, planned)
		);
		CREATE INDEX timer_fires_due ON timer_fires (due_at) WHERE state IN ('pending', 'retry', 'running');
		CREATE INDEX timer_fires_finished ON timer_fires (state, finished) WHERE state IN ('succeeded', 'dead');
		CREATE TABLE timer_attempts (
			timer_id    TEXT NOT NULL,
			planned     INTEGER NOT NULL,
			attempt     INTEGER NOT NULL,
			started     INTEGER NOT NULL,
			finished    INTEGER NOT NULL,
			error       TEXT NOT NULL,
			status_code INTEGER NOT NULL,
			PRIMARY KEY (timer_id, planned, attempt)
		);`,
		// 11: the timer service's namespaces (fomd).
		`CREATE TABLE namespaces (
			name        TEXT PRIMARY KEY,
			token_hash  TEXT NOT NULL UNIQUE,
			secrets     TEXT NOT NULL,
			rate        REAL NOT NULL,
			burst       INTEGER NOT NULL,
			concurrency INTEGER NOT NULL,
			max_timers  INTEGER NOT NULL,
			created     INTEGER NOT NULL,
			updated     INTEGER NOT NULL
		);`,
		// 12: claims look for unclaimed fires and for leases that ran out
		// in an index each, not past the fires claimed already.
		`DROP INDEX timer_fires_due;
		CREATE INDEX timer_fires_unclaimed ON timer_fires (due_at) WHERE owner = '' AND state IN ('pending', 'retry', 'running');
		CREATE INDEX timer_fires_leased ON timer_fires (lease_until) WHERE owner <> '' AND state IN ('pending', 'retry', 'running');`,
		// 13: a poll's claims go on in (due, timer, planned) order, each
		// after the last fire the one before it took (store.FireKey): not
		// a sort of every fire due at one instant for each chunk.
		`DROP INDEX timer_fires_unclaimed;
		CREATE INDEX timer_fires_unclaimed ON timer_fires (due_at, timer_id, planned) WHERE owner = '' AND state IN ('pending', 'retry', 'running');`,
	}
}

// SchemaVersion is the schema version this build writes.
func SchemaVersion() int { return len(migrations()) }

// Store is a SQLite-backed store.Store.
type Store struct {
	db   *sql.DB
	path string
	lock *os.File    // held while open: one process per store file
	file os.FileInfo // the file as opened, to notice its removal

	commits, statements atomic.Int64

	rounds     hintedTable[store.Round] // a flush's statements
	days       hintedTable[dayRow]
	failures   rowsStatement
	ids        rowIDs               // where the rows a flush rewrites are (rowids.go)
	log        statsLog             // the newest flushes' days and pages (log.go)
	stmts      map[string]*sql.Stmt // prepared at open, by their text; read-only after
	unprepared atomic.Int64         // hot-path statements that found no prepared form
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if missing) the store at dir/fom.db.
func Open(ctx context.Context, dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("fom: sqlite store: empty data directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("fom: create data directory %q: %w", dir, err)
	}
	return OpenFile(ctx, filepath.Join(dir, FileName))
}

// OpenFile opens (creating if missing) the store file at path. It holds
// an exclusive lock (path + ".lock") while open: a second process on the
// same file gets store.ErrInUse naming the holder.
func OpenFile(ctx context.Context, path string) (*Store, error) {
	lock, err := lockFile(path + ".lock")
	if err != nil {
		return nil, err
	}
	s, err := openLocked(ctx, path)
	if err != nil {
		lock.Close()
		return nil, err
	}
	s.lock = lock
	return s, nil
}

func openLocked(ctx context.Context, path string) (*Store, error) {
	if err := checkHeader(path); err != nil {
		return nil, err
	}
	// Create the file here, so that a missing or read-only directory is
	// reported as such rather than as the driver's "out of memory".
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("fom: open store: %w", err)
	}
	info, err := f.Stat()
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("fom: open store: %w", err)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "foreign_keys(1)")
	// An acknowledged edit survives a power cut: the WAL is synced at
	// every commit.
	q.Add("_pragma", "synchronous(FULL)")
	// A flush's multi-row upserts may fail part-way, so SQLite keeps a
	// statement journal for each: in memory, not in a temporary file it
	// would write a copy of every page the statement changes to (a
	// fifth of a flush's instructions, and a write call per page).
	q.Add("_pragma", "temp_store(MEMORY)")
	// The pages stay SQLite's 4 KiB: larger ones commit a dense flush's
	// row in fewer writes, but cost every row a sparse flush touches a
	// whole page (BenchmarkSaveStatsSparse).
	q.Add("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+escapePath(path)+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("fom: open store %q: %w", path, err)
	}
	// One connection: SQLite has one writer anyway, and this avoids
	// SQLITE_BUSY between our own connections.
	db.SetMaxOpenConns(1)
	s := &Store{db: db, path: path, file: info,
		rounds:   roundsTable(),
		days:     daysTable(),
		failures: newRowsStatement(failuresPerStatement, insertFailures),
	}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.enableWAL(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("fom: store %q: enable WAL: %w", path, err)
	}
	if err := s.prepare(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("fom: store %q: %w", path, err)
	}
	if err := s.foldLog(ctx); err != nil {
		s.Close()
		return nil, err
	}
	s.log.keep = logKeep
	return s, nil
}

// enableWAL switches the file to write-ahead logging, once for good (the
// mode is kept in the file). Switching needs the file to itself and does
// not wait on the busy timeout, so a concurrent opener retries briefly.
func (s *Store) enableWAL(ctx context.Context) error {
	for try := 0; ; try++ {
		var mode string
		err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode)
		if err == nil && strings.EqualFold(mode, "wal") {
			return nil
		}
		if try == 100 || (err != nil && !strings.Contains(err.Error(), "SQLITE_BUSY")) {
			if err == nil {
				err = fmt.Errorf("journal mode is %s", mode)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// escapePath makes a file path safe inside a SQLite URI, where '?' starts
// the query, '#' a fragment, and '%' an escape.
func escapePath(p string) string {
	return strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(p)
}

// checkHeader refuses a non-empty file that is not SQLite before the driver
// touches it.
func checkHeader(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("fom: open store %q: %w", path, err)
	}
	defer f.Close()
	head := make([]byte, 16)
	n, _ := f.Read(head)
	if n == 0 {
		return nil
	}
	if n < 16 || string(head) != "SQLite format 3\x00" {
		return fmt.Errorf("%w: %s does not start with the SQLite header; it was left untouched (move it away to start afresh)", store.ErrCorrupt, path)
	}
	return nil
}

// migrate brings the schema up to date, one migration per transaction. The
// version is read inside each write transaction (BEGIN IMMEDIATE), so two
// openers of one file never both apply the same migration.
func (s *Store) migrate(ctx context.Context) error {
	if err := s.quickCheck(ctx); err != nil {
		return err
	}
	ms := migrations()
	for {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return s.readErr(err)
		}
		var v int
		if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
			tx.Rollback()
			return s.readErr(err)
		}
		if v > len(ms) {
			tx.Rollback()
			return fmt.Errorf("%w: %s has schema version %d, this build knows up to %d; it was left untouched", store.ErrNewerSchema, s.path, v, len(ms))
		}
		if v == len(ms) {
			return s.checkFormat(ctx, tx)
		}
		if _, err := tx.ExecContext(ctx, ms[v]); err != nil {
			tx.Rollback()
			return fmt.Errorf("fom: store %q: migrate to schema version %d: %w", s.path, v+1, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v+1)); err != nil {
			tx.Rollback()
			return fmt.Errorf("fom: store %q: set schema version %d: %w", s.path, v+1, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("fom: store %q: migrate to schema version %d: %w", s.path, v+1, err)
		}
	}
}

// checkFormat refuses a store written in a data format newer than this
// build's and records this build's when it is newer; it ends tx.
func (s *Store) checkFormat(ctx context.Context, tx *sql.Tx) error {
	defer tx.Rollback()
	var v string
	if err := tx.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = 'data_format'").Scan(&v); err != nil {
		return s.readErr(err)
	}
	n, err := strconv.Atoi(v)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s records data format %q; it was left untouched", store.ErrCorrupt, s.path, v)
	case n > store.DataFormat:
		return fmt.Errorf("%w: %s holds rows in data format %d, this build reads up to %d; it was left untouched", store.ErrNewerSchema, s.path, n, store.DataFormat)
	case n == store.DataFormat:
		return nil
	}
	if _, err := tx.ExecContext(ctx, "UPDATE meta SET value = ? WHERE key = 'data_format'", strconv.Itoa(store.DataFormat)); err != nil {
		return fmt.Errorf("fom: store %q: record data format %d: %w", s.path, store.DataFormat, err)
	}
	return tx.Commit()
}

func (s *Store) quickCheck(ctx context.Context) error {
	var res string
	if err := s.db.QueryRowContext(ctx, "PRAGMA quick_check").Scan(&res); err != nil {
		return s.readErr(err)
	}
	if res != "ok" {
		return fmt.Errorf("%w: %s failed its integrity check (%s); it was left untouched", store.ErrCorrupt, s.path, res)
	}
	return nil
}

func (s *Store) readErr(err error) error {
	msg := err.Error()
	if strings.Contains(msg, "not a database") || strings.Contains(msg, "malformed") || strings.Contains(msg, "corrupt") {
		return fmt.Errorf("%w: %s: %v; it was left untouched", store.ErrCorrupt, s.path, err)
	}
	return fmt.Errorf("fom: store %q: %w", s.path, err)
}

// Path returns the store file's path.
func (s *Store) Path() string { return s.path }

// Close closes the database and releases the lock.
func (s *Store) Close() error {
	for _, st := range s.stmts {
		st.Close()
	}
	err := s.db.Close()
	if s.lock != nil {
		s.lock.Close()
		s.lock = nil
	}
	return err
}

// LoadConfig implements store.Store.
func (s *Store) LoadConfig(ctx context.Context, schedule string) (map[string]string, error) {
	rows, err := s.query(ctx, loadConfigSQL, schedule)
	if err != nil {
		return nil, fmt.Errorf("load config of schedule %q: %w", schedule, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("load config of schedule %q: %w", schedule, err)
		}
		out[k] = v
	}
	return out, rows.Err()
}

// SaveConfig implements store.Store: the whole set is replaced in one
// transaction.
func (s *Store) SaveConfig(ctx context.Context, schedule string, edits map[string]string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if err := s.exec(ctx, tx, "DELETE FROM config_edits WHERE schedule = ?", schedule); err != nil {
			return err
		}
		for k, v := range edits {
			if err := s.exec(ctx, tx, "INSERT INTO config_edits (schedule, key, value) VALUES (?, ?, ?)", schedule, k, v); err != nil {
				return err
			}
		}
		return nil
	})
}

// GetSetting implements store.Store.
func (s *Store) GetSetting(ctx context.Context, schedule, key string) (string, bool, error) {
	var v string
	err := s.queryRow(ctx, getSettingSQL, schedule, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("load setting %q of schedule %q: %w", key, schedule, err)
	}
	return v, true, nil
}

// PutSetting implements store.Store.
func (s *Store) PutSetting(ctx context.Context, schedule, key, value string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		return s.exec(ctx, tx, `INSERT INTO settings (schedule, key, value) VALUES (?, ?, ?)
			ON CONFLICT (schedule, key) DO UPDATE SET value = excluded.value`, schedule, key, value)
	})
}

// Rows per multi-row statement. The statements are prepared once (see
// prepared): a flush binds and runs them, it does not parse SQL. A
// flush's remainder of fewer rows than a statement takes is written by the
// one-row form of the same statement, so a flush uses two shapes per table.
// `go test -run '^$' -bench SaveStats ./store/sqlite` (a day row and a page
// per schedule) chose the sizes.
const (
	daysPerStatement     = 32
	failuresPerStatement = 16
	roundsPerStatement   = 32
	namesPerStatement    = 200
)

// rowsStatement is a statement of a flush, its text for per rows and for
// one, built once when the store opens.
type rowsStatement struct {
	per       int
	full, one string
}

func newRowsStatement(per int, text func(rows int) string) rowsStatement {
	return rowsStatement{per: per, full: text(per), one: text(1)}
}

// The statements of a flush, by the number of rows they write: by rowid
// (rowids.go), and by key, returning the rowids. The first two columns
// are the key.
func roundsTable() hintedTable[store.Round] {
	return newHintedTable("rounds", []string{"schedule", "slot", "first_seq", "seq", "start", "data"}, roundsPerStatement,
		func(args []any, r store.Round) []any {
			return append(args, r.Schedule, r.Slot, r.First, r.Seq, r.Start.UnixNano(), r.Data)
		},
		func(r store.Round, id int64) learned { return learned{schedule: r.Schedule, slot: r.Slot, id: id} },
		func(rows *sql.Rows) (x learned, err error) { return x, rows.Scan(&x.id, &x.schedule, &x.slot) })
}

// dayRow is a store.Day with its key as stored.
type dayRow struct {
	schedule, day string
	data          []byte
}

func daysTable() hintedTable[dayRow] {
	return newHintedTable("stats_days", []string{"schedule", "day", "data"}, daysPerStatement,
		func(args []any, d dayRow) []any { return append(args, d.schedule, d.day, d.data) },
		func(d dayRow, id int64) learned { return learned{schedule: d.schedule, day: d.day, id: id} },
		func(rows *sql.Rows) (x learned, err error) { return x, rows.Scan(&x.id, &x.schedule, &x.day) })
}

// newHintedTable builds a table's two statements from its columns, the
// first two of which are its key.
func newHintedTable[T any](table string, cols []string, per int, appendRow func([]any, T) []any, key func(T, int64) learned, scan func(*sql.Rows) (learned, error)) hintedTable[T] {
	k1, k2 := cols[0], cols[1]
	set := make([]string, 0, len(cols)-2)
	for _, c := range cols[2:] {
		set = append(set, c+" = excluded."+c)
	}
	update := " DO UPDATE SET " + strings.Join(set, ", ")
	list := strings.Join(cols, ", ")
	return hintedTable[T]{
		table: table,
		byID: newRowsStatement(per, func(n int) string {
			return "INSERT OR IGNORE INTO " + table + " (rowid, " + list + ") VALUES " + rows(n, len(cols)+1) +
				" ON CONFLICT (rowid)" + update +
				" WHERE " + table + "." + k1 + " = excluded." + k1 + " AND " + table + "." + k2 + " = excluded." + k2
		}),
		byKey: newRowsStatement(per, func(n int) string {
			return "INSERT INTO " + table + " (" + list + ") VALUES " + rows(n, len(cols)) +
				" ON CONFLICT (" + k1 + ", " + k2 + ")" + update + " RETURNING rowid, " + k1 + ", " + k2
		}),
		appendRow: appendRow,
		key:       key,
		scan:      scan,
	}
}

func insertFailures(n int) string {
	return "INSERT INTO failures (schedule, at, task_id, status, error, stack, cost_ns, round) VALUES " + rows(n, 8)
}

// SaveStats implements store.Store: every row of the batch in one
// transaction, the days and pages through the log (log.go).
func (s *Store) SaveStats(ctx context.Context, b store.StatsBatch) error {
	if len(b.Days) == 0 && len(b.Failures) == 0 && len(b.Rounds) == 0 {
		return nil
	}
	if s.log.keep > 0 {
		// Pages of one slot twice in a batch go to the log as they are:
		// the later one is the newest of its key there (remember, foldLog),
		// as LastPerSlot would keep it, without a map of every page.
		return s.saveLogged(ctx, b.Flush, b.Days, b.Rounds, b.Failures)
	}
	s.log.mu.Lock()
	s.log.opened = nil // written to the tables, past what the log held at open
	s.log.mu.Unlock()
	rounds := store.LastPerSlot(b.Rounds)
	var got []learned
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		if got, err = s.writeTables(ctx, tx, b.Days, rounds); err != nil {
			return err
		}
		return s.writeFailures(ctx, tx, b.Failures)
	})
	if err != nil {
		return err
	}
	s.ids.learn(got)
	return nil
}

// writeTables writes days and pages to their tables' rows, returning the
// rowids it learned.
func (s *Store) writeTables(ctx context.Context, tx *sql.Tx, days []store.Day, rounds []store.Round) ([]learned, error) {
	rows := make([]dayRow, len(days))
	var last time.Time
	var key string
	for i, d := range days {
		if key == "" || !d.Day.Equal(last) { // a flush's days are mostly one day
			last, key = d.Day, dayKey(d.Day)
		}
		rows[i] = dayRow{schedule: d.Schedule, day: key, data: d.Data}
	}
	r, err := writeHinted(ctx, s, tx, rounds, s.ids.roundsHints(rounds), s.rounds)
	if err != nil {
		return nil, err
	}
	d, err := writeHinted(ctx, s, tx, rows, s.ids.daysHints(rows), s.days)
	if err != nil {
		return nil, err
	}
	return append(r, d...), nil
}

// writeFailures appends failures.
func (s *Store) writeFailures(ctx context.Context, tx *sql.Tx, failures []store.Failure) error {
	return writeRows(ctx, s, tx, failures, s.failures, func(args []any, f store.Failure) []any {
		return append(args, f.Schedule, f.At.UnixNano(), f.TaskID, f.Status, f.Error, f.Stack, int64(f.Cost), f.Round)
	})
}

// writeRows writes items st.per at a time, and what remains one at a
// time; appendRow appends an item's arguments.
func writeRows[T any](ctx context.Context, s *Store, tx *sql.Tx, items []T, st rowsStatement, appendRow func([]any, T) []any) error {
	return eachStatement(ctx, st, items, func(ctx context.Context, q string, args []any, _ int, _ []T) error {
		return s.execPrepared(ctx, tx, q, args...)
	}, func(args []any, _ int, it T) []any { return appendRow(args, it) })
}

// eachStatement runs run once per statement's worth of items, st.per at a time and
// what remains one at a time, with the statement's text and the
// arguments appendRow made of them (given each item's index), and the
// index of the first. run gets the context its statement runs under:
// ctx without its cancellation, which eachStatement checks itself before
// each statement. That context cannot be canceled, so the driver starts
// no goroutine per statement to interrupt it (one per statement, ended by
// waking another thread: at 10 000 schedules, hundreds of context switches
// in every flush); database/sql rolls the transaction back once ctx is
// done, so a flush past its deadline still stops after the statement it
// is in, and writes nothing.
func eachStatement[T any](ctx context.Context, st rowsStatement, items []T, run func(ctx context.Context, q string, args []any, from int, part []T) error, appendRow func(args []any, i int, it T) []any) error {
	quiet := context.WithoutCancel(ctx)
	full := len(items) - len(items)%st.per
	var args []any
	for i := 0; i < len(items); {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, q := st.per, st.full
		if i >= full {
			n, q = 1, st.one
		}
		args = args[:0]
		for j := i; j < i+n; j++ {
			args = appendRow(args, j, items[j])
		}
		if err := run(quiet, q, args, i, items[i:i+n]); err != nil {
			return err
		}
		i += n
	}
	return nil
}

// rows returns n groups of k placeholders: (?, ?), (?, ?), ...
func rows(n, k int) string {
	one := "(" + strings.Repeat("?, ", k-1) + "?)"
	var b strings.Builder
	b.Grow(n * (len(one) + 2))
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(one)
	}
	return b.String()
}

// exec runs one statement of a transaction and counts it.
func (s *Store) exec(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
	s.statements.Add(1)
	_, err := tx.ExecContext(ctx, q, args...)
	return err
}

// execPrepared is exec of a statement prepared at open.
func (s *Store) execPrepared(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
	_, err := s.execPreparedCount(ctx, tx, q, args...)
	return err
}

// stmt returns q as a statement of tx, counted: its form prepared at open,
// or, counted as unprepared too, parsed now (closed with tx).
func (s *Store) stmt(ctx context.Context, tx *sql.Tx, q string) (*sql.Stmt, error) {
	s.statements.Add(1)
	if st := s.prepared(q); st != nil {
		return tx.StmtContext(ctx, st), nil
	}
	s.unprepared.Add(1)
	return tx.PrepareContext(ctx, q)
}

// The reads an app makes for each schedule it registers.
const (
	loadConfigSQL   = "SELECT key, value FROM config_edits WHERE schedule = ?"
	getSettingSQL   = "SELECT value FROM settings WHERE schedule = ? AND key = ?"
	loadDaysSQL     = "SELECT rowid, day, data FROM stats_days WHERE schedule = ? AND day >= ? ORDER BY day"
	loadFailuresSQL = "SELECT at, task_id, status, error, stack, cost_ns, round FROM failures WHERE schedule = ? ORDER BY at DESC, id DESC LIMIT ?"
	lastRoundSeqSQL = "SELECT rowid, slot, seq FROM rounds WHERE schedule = ?"
	// The slots alone, from the primary key's index (which holds the
	// rowid): no seek in the table for each row, as seq costs.
	slotRowIDsSQL = "SELECT rowid, slot FROM rounds WHERE schedule = ?"
)

// query and queryRow run a read, prepared at open where q is among those.
func (s *Store) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := s.prepared(q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	s.unprepared.Add(1)
	return s.db.QueryContext(ctx, q, args...)
}

func (s *Store) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	if st := s.prepared(q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	s.unprepared.Add(1)
	return s.db.QueryRowContext(ctx, q, args...)
}

// prepared returns the store's prepared statement of q, or nil when q is
// not among those prepared at open.
func (s *Store) prepared(q string) *sql.Stmt { return s.stmts[q] }

// preparedTexts are the statements prepared when the store opens: those a
// flush runs, and the reads an app makes for each schedule it registers.
// The driver keeps a prepared statement's compiled program, so they are
// parsed once; prepared at open because the store's one connection is
// taken by the transaction that would run them. Fixed texts only.
func (s *Store) preparedTexts() []string {
	return []string{
		s.rounds.byID.full, s.rounds.byID.one, s.rounds.byKey.full, s.rounds.byKey.one,
		s.days.byID.full, s.days.byID.one, s.days.byKey.full, s.days.byKey.one,
		s.failures.full, s.failures.one,
		loadDaysSQL, loadFailuresSQL, getSettingSQL, lastRoundSeqSQL, slotRowIDsSQL, loadConfigSQL,
	}
}

func (s *Store) prepare(ctx context.Context) error {
	s.stmts = make(map[string]*sql.Stmt)
	for _, q := range s.preparedTexts() {
		st, err := s.db.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", q, err)
		}
		s.stmts[q] = st
	}
	return nil
}

// Counters are what the store has done since it was opened.
type Counters struct {
	Transactions int64 // write transactions committed
	Statements   int64 // statements run inside them
}

// Counters returns the store's counters.
func (s *Store) Counters() Counters {
	return Counters{Transactions: s.commits.Load(), Statements: s.statements.Load()}
}

// LoadDays implements store.Store: the rows, overlaid by the log.
func (s *Store) LoadDays(ctx context.Context, schedule string, from time.Time) ([]store.Day, error) {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	out, err := s.loadDayRows(ctx, schedule, from)
	if err != nil {
		return nil, err
	}
	fromDay := store.DayNumber(from)
	es, err := s.logged(ctx, schedule, func(r logRef) bool { return r.isDay() && dayRefKey(fromDay) >= r.key })
	if err != nil {
		return nil, fmt.Errorf("load statistics of schedule %q: %w", schedule, err)
	}
	if len(es) == 0 {
		return out, nil
	}
	for _, e := range es {
		t := store.DayTime(e.day)
		i := slices.IndexFunc(out, func(d store.Day) bool { return d.Day.Equal(t) })
		if i < 0 {
			out = append(out, store.Day{Schedule: schedule, Day: t})
			i = len(out) - 1
		}
		out[i].Data = e.data
	}
	slices.SortFunc(out, func(a, b store.Day) int { return a.Day.Compare(b.Day) })
	return out, nil
}

// loadDayRows reads schedule's day rows from `from` on.
func (s *Store) loadDayRows(ctx context.Context, schedule string, from time.Time) ([]store.Day, error) {
	rows, err := s.query(ctx, loadDaysSQL, schedule, dayKey(from))
	if err != nil {
		return nil, fmt.Errorf("load statistics of schedule %q: %w", schedule, err)
	}
	defer rows.Close()
	var out []store.Day
	var newest learned // where the next flush writes the newest day (rowids.go)
	for rows.Next() {
		var id int64
		var day string
		var data []byte
		if err := rows.Scan(&id, &day, &data); err != nil {
			return nil, err
		}
		t, err := time.Parse(time.DateOnly, day)
		if err != nil {
			return nil, fmt.Errorf("load statistics of schedule %q: bad day %q: %w", schedule, day, err)
		}
		out = append(out, store.Day{Schedule: schedule, Day: t, Data: data})
		newest = learned{schedule: schedule, day: day, id: id}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if newest.id != 0 {
		s.ids.learn([]learned{newest})
	}
	return out, nil
}

// LoadFailures implements store.Store.
func (s *Store) LoadFailures(ctx context.Context, schedule string, limit int) ([]store.Failure, error) {
	rows, err := s.query(ctx, loadFailuresSQL, schedule, limit)
	if err != nil {
		return nil, fmt.Errorf("load failures of schedule %q: %w", schedule, err)
	}
	defer rows.Close()
	var out []store.Failure
	for rows.Next() {
		var f store.Failure
		var at, cost int64
		if err := rows.Scan(&at, &f.TaskID, &f.Status, &f.Error, &f.Stack, &cost, &f.Round); err != nil {
			return nil, err
		}
		f.Schedule, f.At, f.Cost = schedule, time.Unix(0, at).UTC(), time.Duration(cost)
		out = append(out, f)
	}
	return out, rows.Err()
}

// LoadRounds implements store.Store: the rows, overlaid by the log.
func (s *Store) LoadRounds(ctx context.Context, schedule string, limit int) ([]store.Round, error) {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	es, err := s.logged(ctx, schedule, func(r logRef) bool { return !r.isDay() })
	if err != nil {
		return nil, fmt.Errorf("load the run history of schedule %q: %w", schedule, err)
	}
	// A row whose slot a logged page holds is replaced by it: read as many
	// more rows as there are logged pages. (A negative limit is none.)
	rowLimit := limit
	if limit >= 0 {
		rowLimit += len(es)
	}
	rows, err := s.db.QueryContext(ctx, "SELECT slot, first_seq, seq, start, data FROM rounds WHERE schedule = ? ORDER BY start DESC, seq DESC LIMIT ?", schedule, rowLimit)
	if err != nil {
		return nil, fmt.Errorf("load the run history of schedule %q: %w", schedule, err)
	}
	defer rows.Close()
	var out []store.Round
	for rows.Next() {
		r := store.Round{Schedule: schedule}
		var start int64
		if err := rows.Scan(&r.Slot, &r.First, &r.Seq, &start, &r.Data); err != nil {
			return nil, err
		}
		if slices.ContainsFunc(es, func(e logEntry) bool { return e.slot == r.Slot }) {
			continue
		}
		r.Start = time.Unix(0, start).UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, e := range es {
		out = append(out, e.round())
	}
	slices.SortStableFunc(out, func(a, b store.Round) int {
		if c := b.Start.Compare(a.Start); c != 0 {
			return c
		}
		return cmp.Compare(b.Seq, a.Seq)
	})
	if limit >= 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// LoadRound implements store.Store; an embedded store has one instance.
func (s *Store) LoadRound(ctx context.Context, schedule, instance string, seq int64) (store.Round, bool, error) {
	r := store.Round{Schedule: schedule}
	if instance != "" {
		return r, false, nil
	}
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	// The logged page holding seq is the one with the lowest last round
	// at or past it; a row holds it only in a slot no logged page holds.
	var best *logRef
	var slots []int
	for i, ref := range s.log.of[schedule] {
		if ref.isDay() {
			continue
		}
		slots = append(slots, int(ref.key))
		if ref.seq >= seq && (best == nil || ref.seq < best.seq) {
			best = &s.log.of[schedule][i]
		}
	}
	if best != nil {
		want := *best
		es, err := s.logged(ctx, schedule, func(r logRef) bool { return r == want })
		if err != nil {
			return r, false, fmt.Errorf("load round #%d of schedule %q: %w", seq, schedule, err)
		}
		if len(es) == 1 && es[0].first <= seq {
			return es[0].round(), true, nil
		}
	}
	var start int64
	err := s.db.QueryRowContext(ctx, "SELECT slot, first_seq, seq, start, data FROM rounds WHERE schedule = ? AND first_seq <= ? AND seq >= ? ORDER BY seq DESC LIMIT 1", schedule, seq, seq).Scan(&r.Slot, &r.First, &r.Seq, &start, &r.Data)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && slices.Contains(slots, r.Slot)) {
		return store.Round{Schedule: schedule}, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("load round #%d of schedule %q: %w", seq, schedule, err)
	}
	r.Start = time.Unix(0, start).UTC()
	return r, true, nil
}

// LastRoundSeq implements store.Store.
//
// It reads every history slot of the schedule, not only the highest
// sequence number: an app asks when it registers the schedule, and the
// store keeps where the slots are, so that its flushes rewrite them by
// rowid from the first (rowids.go).
func (s *Store) LastRoundSeq(ctx context.Context, schedule string) (int64, error) {
	s.log.mu.Lock()
	var last int64
	for _, ref := range s.log.of[schedule] {
		if !ref.isDay() {
			last = max(last, ref.seq)
		}
	}
	opened, fromLog := s.log.opened[schedule]
	delete(s.log.opened, schedule)
	s.log.mu.Unlock()
	q := lastRoundSeqSQL
	if fromLog {
		// The log held the schedule's newest page at open: its number is
		// the highest. The slots' rowids still come from the index.
		last, q = max(last, opened), slotRowIDsSQL
	}
	rows, err := s.query(ctx, q, schedule)
	if err != nil {
		return 0, fmt.Errorf("load the run history of schedule %q: %w", schedule, err)
	}
	defer rows.Close()
	var slots []learned
	for rows.Next() {
		x := learned{schedule: schedule}
		var seq int64
		var err error
		if fromLog {
			err = rows.Scan(&x.id, &x.slot)
		} else {
			err = rows.Scan(&x.id, &x.slot, &seq)
		}
		if err != nil {
			return 0, fmt.Errorf("load the run history of schedule %q: %w", schedule, err)
		}
		last = max(last, seq)
		slots = append(slots, x)
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("load the run history of schedule %q: %w", schedule, err)
	}
	s.ids.learn(slots)
	return last, nil
}

// AppendAudit implements store.Store.
func (s *Store) AppendAudit(ctx context.Context, e store.AuditEntry) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		return s.exec(ctx, tx, "INSERT INTO audit (schedule, at, action, principal, detail, outcome) VALUES (?, ?, ?, ?, ?, ?)",
			e.Schedule, e.At.UnixNano(), e.Action, e.Principal, e.Detail, e.Outcome)
	})
}

// LoadAudit implements store.Store.
func (s *Store) LoadAudit(ctx context.Context, schedule string, limit int) ([]store.AuditEntry, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT at, action, principal, detail, outcome FROM audit WHERE schedule = ? ORDER BY id DESC LIMIT ?", schedule, limit)
	if err != nil {
		return nil, fmt.Errorf("load audit of schedule %q: %w", schedule, err)
	}
	defer rows.Close()
	var out []store.AuditEntry
	for rows.Next() {
		e := store.AuditEntry{Schedule: schedule}
		var at int64
		if err := rows.Scan(&at, &e.Action, &e.Principal, &e.Detail, &e.Outcome); err != nil {
			return nil, err
		}
		e.At = time.Unix(0, at).UTC()
		out = append(out, e)
	}
	return out, rows.Err()
}

// Prune implements store.Store: days and failures before each rule's
// time, and failures beyond its count, newest kept. Schedules with the
// same rule share statements.
func (s *Store) Prune(ctx context.Context, rules []store.Retention) error {
	if len(rules) == 0 {
		return nil
	}
	groups := store.GroupRetention(rules)
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	s.log.opened = nil // pages may go: the query knows what is left
	err := s.tx(ctx, func(tx *sql.Tx) error {
		for _, g := range groups {
			for chunk := range slices.Chunk(g.Schedules, namesPerStatement) {
				names := make([]any, len(chunk))
				for i, n := range chunk {
					names[i] = n
				}
				in := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(names)), ", ") + ")"
				if !g.Before.IsZero() {
					if err := s.exec(ctx, tx, "DELETE FROM stats_days WHERE day < ? AND schedule IN "+in, append([]any{dayKey(g.Before)}, names...)...); err != nil {
						return err
					}
					if err := s.exec(ctx, tx, "DELETE FROM failures WHERE at < ? AND schedule IN "+in, append([]any{g.Before.UnixNano()}, names...)...); err != nil {
						return err
					}
					if err := s.exec(ctx, tx, "DELETE FROM rounds WHERE start < ? AND schedule IN "+in, append([]any{g.Before.UnixNano()}, names...)...); err != nil {
						return err
					}
				}
				if !g.Before.IsZero() {
					if err := s.exec(ctx, tx, "DELETE FROM audit WHERE at < ? AND schedule IN "+in, append([]any{g.Before.UnixNano()}, names...)...); err != nil {
						return err
					}
					q := `DELETE FROM audit WHERE id IN (SELECT id FROM (
						SELECT id, row_number() OVER (PARTITION BY schedule ORDER BY id DESC) AS n
						FROM audit WHERE schedule IN ` + in + `) WHERE n > ?)`
					if err := s.exec(ctx, tx, q, append(names, store.MaxAudit)...); err != nil {
						return err
					}
				}
				if g.KeepRounds > 0 { // slots past the history's size: it shrank
					if err := s.exec(ctx, tx, "DELETE FROM rounds WHERE slot >= ? AND schedule IN "+in, append([]any{g.KeepRounds}, names...)...); err != nil {
						return err
					}
				}
				q := `DELETE FROM failures WHERE id IN (SELECT id FROM (
					SELECT id, row_number() OVER (PARTITION BY schedule ORDER BY id DESC) AS n
					FROM failures WHERE schedule IN ` + in + `) WHERE n > ?)`
				if err := s.exec(ctx, tx, q, append(names, g.KeepFailures)...); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// What the statements deleted from the tables, the log no longer
	// shows either (log.go).
	for _, g := range groups {
		before, day := g.Before.UnixNano(), dayRefKey(store.DayNumber(g.Before))
		for _, name := range g.Schedules {
			s.log.drop(name, func(r logRef) bool {
				if r.isDay() {
					return !g.Before.IsZero() && r.key > day
				}
				return (!g.Before.IsZero() && r.start < before) || (g.KeepRounds > 0 && int(r.key) >= g.KeepRounds)
			})
		}
	}
	return nil
}

// tx runs fn in a write transaction and commits it only while the store's
// file is still the one opened: a write to a removed file would be
// acknowledged and lost.
func (s *Store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("fom: store %q: begin: %w", s.path, err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return fmt.Errorf("fom: store %q: %w", s.path, err)
	}
	if err := s.checkFile(); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("fom: store %q: commit: %w", s.path, err)
	}
	s.commits.Add(1)
	return nil
}

func (s *Store) checkFile() error {
	if s.file == nil {
		return nil
	}
	now, err := os.Stat(s.path)
	if err != nil || !os.SameFile(now, s.file) {
		return fmt.Errorf("%w: %s (nothing was saved; restart fom to create it afresh)", store.ErrGone, s.path)
	}
	return nil
}

func dayKey(t time.Time) string { return t.UTC().Format(time.DateOnly) }
