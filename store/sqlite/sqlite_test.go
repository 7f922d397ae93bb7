package sqlite

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fom-go/fom/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openTables is open with the statistics log off: a flush writes the
// tables' rows, as it does when the log pushes entries out (log.go). The
// tests of rowids and statements below test that path.
func openTables(t *testing.T, dir string) *Store {
	t.Helper()
	s := open(t, dir)
	s.log.keep = 0
	return s
}

func TestConfigRoundTripAndReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	if err := s.SaveConfig(ctx, "cleanup", map[string]string{"threadMax": "4", "cron": ""}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveConfig(ctx, "cleanup", map[string]string{"threadMax": "8"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSetting(ctx, "cleanup", "logLevel", "debug"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2 := open(t, dir)
	got, err := s2.LoadConfig(ctx, "cleanup")
	if err != nil || len(got) != 1 || got["threadMax"] != "8" {
		t.Fatalf("got %v %v: the second save must replace the first as a whole", got, err)
	}
	if v, ok, err := s2.GetSetting(ctx, "cleanup", "logLevel"); v != "debug" || !ok || err != nil {
		t.Fatalf("setting %q %v %v", v, ok, err)
	}
	if _, ok, _ := s2.GetSetting(ctx, "other", "logLevel"); ok {
		t.Fatal("setting of another schedule")
	}
}

func TestCorruptFileIsRefusedAndUntouched(t *testing.T) {
	t.Parallel()
	for name, content := range map[string][]byte{
		"garbage":          []byte("this is not a database at all, just some text that is long enough"),
		"damaged database": nil, // filled below
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, FileName)
			if content == nil {
				s := open(t, dir)
				if err := s.SaveConfig(context.Background(), "a", map[string]string{"k": "v"}); err != nil {
					t.Fatal(err)
				}
				s.Close()
				b, _ := os.ReadFile(path)
				for i := 100; i < len(b); i += 7 { // keep the header, scramble the pages
					b[i] ^= 0x5a
				}
				content = b
			}
			if err := os.WriteFile(path, content, 0o644); err != nil {
				t.Fatal(err)
			}
			os.Remove(path + "-wal")
			os.Remove(path + "-shm")
			_, err := Open(context.Background(), dir)
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
			after, _ := os.ReadFile(path)
			if !bytes.Equal(after, content) {
				t.Fatal("the corrupt file was modified")
			}
		})
	}
}

func TestNewerSchemaIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	if _, err := s.db.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	before, _ := os.ReadFile(filepath.Join(dir, FileName))
	_, err := Open(context.Background(), dir)
	if !errors.Is(err, store.ErrNewerSchema) {
		t.Fatalf("got %v", err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, FileName))
	if !bytes.Equal(before, after) {
		t.Fatal("file modified")
	}
}

func TestMigratesFromVersionOne(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	// Build a version-1 store by hand, as an older fom would have.
	s := &Store{path: path}
	var err error
	s, err = func() (*Store, error) {
		st, err := OpenFile(context.Background(), path)
		if err != nil {
			return nil, err
		}
		// Every table a later migration made goes.
		rows, err := st.db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT IN ('config_edits', 'settings') AND name NOT LIKE 'sqlite_%'`)
		if err != nil {
			return st, err
		}
		var drop []string
		for rows.Next() {
			var n string
			rows.Scan(&n)
			drop = append(drop, "DROP TABLE "+n+";")
		}
		rows.Close()
		_, err = st.db.Exec(strings.Join(drop, " ") + ` PRAGMA user_version = 1;`)
		return st, err
	}()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SaveConfig(context.Background(), "a", map[string]string{"threadMax": "2"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2 := open(t, dir)
	var v int
	s2.db.QueryRow("PRAGMA user_version").Scan(&v)
	if v != SchemaVersion() {
		t.Fatalf("version %d", v)
	}
	if got, _ := s2.LoadConfig(context.Background(), "a"); got["threadMax"] != "2" {
		t.Fatalf("data lost in migration: %v", got)
	}
	if err := s2.SaveStats(context.Background(), store.StatsBatch{Days: []store.Day{{Schedule: "a", Day: time.Now(), Data: []byte("x")}}}); err != nil {
		t.Fatal(err)
	}
}

func TestStatsAndPrune(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	d1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d2 := d1.AddDate(0, 0, 1)
	err := s.SaveStats(ctx, store.StatsBatch{
		Days:     []store.Day{{Schedule: "a", Day: d1, Data: []byte("one")}, {Schedule: "a", Day: d2, Data: []byte("two")}},
		Failures: []store.Failure{{Schedule: "a", At: d1.Add(time.Hour), TaskID: "t", Status: "failed", Error: "e1"}, {Schedule: "a", At: d2.Add(time.Hour), TaskID: "t", Status: "timeout", Error: "e2", Cost: time.Second}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.SaveStats(ctx, store.StatsBatch{Days: []store.Day{{Schedule: "a", Day: d2, Data: []byte("two'")}}})
	days, _ := s.LoadDays(ctx, "a", d1)
	if len(days) != 2 || string(days[1].Data) != "two'" {
		t.Fatalf("days %+v", days)
	}
	fs, _ := s.LoadFailures(ctx, "a", 10)
	if len(fs) != 2 || fs[0].Error != "e2" || fs[0].Cost != time.Second {
		t.Fatalf("failures %+v", fs)
	}
	if err := s.Prune(ctx, []store.Retention{{Schedule: "a", Before: d2, KeepFailures: 10}}); err != nil {
		t.Fatal(err)
	}
	days, _ = s.LoadDays(ctx, "a", d1)
	fs, _ = s.LoadFailures(ctx, "a", 10)
	if len(days) != 1 || len(fs) != 1 {
		t.Fatalf("after prune: %d days, %d failures", len(days), len(fs))
	}
}

func TestConcurrentSaves(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.SaveConfig(context.Background(), "a", map[string]string{"k": string(rune('a' + i)), "other": "x"}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, _ := s.LoadConfig(context.Background(), "a")
	if len(got) != 2 || got["other"] != "x" {
		t.Fatalf("got %v", got)
	}
}

// TestFlushStatements writes a batch of two full statements and a
// remainder per table: every row is stored, the statements are as few as
// the sizes say, and none of a flush's or a registration's statements is
// parsed anew (each has its prepared form).
func TestFlushStatements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTables(t, t.TempDir())
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var b store.StatsBatch
	const n = 2*roundsPerStatement + 5
	for i := range n {
		name := fmt.Sprintf("s%03d", i)
		b.Days = append(b.Days, store.Day{Schedule: name, Day: day, Data: []byte{byte(i)}})
		b.Rounds = append(b.Rounds, store.Round{Schedule: name, Slot: 3, First: 1, Seq: 4, Start: day.Add(time.Duration(i) * time.Second), Data: []byte{byte(i)}})
	}
	for i := range 2*failuresPerStatement + 3 {
		b.Failures = append(b.Failures, store.Failure{Schedule: "s000", At: day.Add(time.Duration(i) * time.Second), TaskID: fmt.Sprint(i), Status: "failed", Error: "boom", Round: 4})
	}
	// The first flush writes by key and learns the rows' rowids; the
	// second rewrites the same rows by rowid (rowids.go), in as many
	// statements.
	for flush := range 2 {
		for i := range n {
			b.Days[i].Data = []byte{byte(i), byte(flush)}
			b.Rounds[i].Data = []byte{byte(i), byte(flush)}
		}
		if flush == 1 {
			b.Failures = nil
		}
		before := s.Counters()
		if err := s.SaveStats(ctx, b); err != nil {
			t.Fatal(err)
		}
		c := s.Counters()
		wantStatements := int64(2+5) + int64(2+5) // rounds, days: full statements and one-row remainders
		if flush == 0 {
			wantStatements += 2 + 3 // failures
			wantStatements += 2     // the largest rowid of each table, read once
		}
		if c.Transactions-before.Transactions != 1 || c.Statements-before.Statements != wantStatements {
			t.Fatalf("flush %d: %d transactions, %d statements; want 1, %d", flush, c.Transactions-before.Transactions, c.Statements-before.Statements, wantStatements)
		}
	}
	if known := len(s.ids.of); known != n {
		t.Fatalf("rowids of %d schedules known, want %d", known, n)
	}
	for i := range n {
		name := fmt.Sprintf("s%03d", i)
		days, err := s.LoadDays(ctx, name, day)
		if err != nil || len(days) != 1 || !bytes.Equal(days[0].Data, []byte{byte(i), 1}) {
			t.Fatalf("%s: days %+v, %v", name, days, err)
		}
		rs, err := s.LoadRounds(ctx, name, 10)
		if err != nil || len(rs) != 1 || !bytes.Equal(rs[0].Data, []byte{byte(i), 1}) || rs[0].Slot != 3 {
			t.Fatalf("%s: rounds %+v, %v", name, rs, err)
		}
		if _, err := s.LastRoundSeq(ctx, name); err != nil {
			t.Fatal(err)
		}
		if _, err := s.LoadConfig(ctx, name); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.GetSetting(ctx, name, "paused"); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := s.LoadFailures(ctx, "s000", 100)
	if err != nil || len(fs) != 2*failuresPerStatement+3 {
		t.Fatalf("failures: %d, %v", len(fs), err)
	}
	if u := s.unprepared.Load(); u != 0 {
		t.Fatalf("%d statements of a flush or a load were parsed anew", u)
	}
}

// TestStaleRowIDsWriteNoWrongRow: the rowids the store remembers are
// checked by every write. A schedule's rows deleted by retention are
// written again where they were; a remembered rowid that holds another
// schedule's row (made so here, as a file edited behind the store's back
// would) leaves that row alone, and the schedule's own row is written by
// key.
func TestStaleRowIDsWriteNoWrongRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTables(t, t.TempDir())
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	batch := func(name string, v byte) store.StatsBatch {
		return store.StatsBatch{
			Days:   []store.Day{{Schedule: name, Day: day, Data: []byte{v}}},
			Rounds: []store.Round{{Schedule: name, Slot: 0, First: 1, Seq: 1, Start: day, Data: []byte{v}}},
		}
	}
	save := func(name string, v byte) {
		t.Helper()
		if err := s.SaveStats(ctx, batch(name, v)); err != nil {
			t.Fatal(err)
		}
	}
	check := func(name string, v byte) {
		t.Helper()
		days, err := s.LoadDays(ctx, name, day)
		if err != nil || len(days) != 1 || !bytes.Equal(days[0].Data, []byte{v}) {
			t.Fatalf("%s: days %+v, %v; want data %d", name, days, err, v)
		}
		rs, err := s.LoadRounds(ctx, name, 10)
		if err != nil || len(rs) != 1 || !bytes.Equal(rs[0].Data, []byte{v}) {
			t.Fatalf("%s: rounds %+v, %v; want data %d", name, rs, err, v)
		}
	}
	save("b", 1)
	save("a", 1)
	save("a", 2) // by rowid
	check("a", 2)
	if err := s.Prune(ctx, []store.Retention{{Schedule: "a", Before: day.Add(48 * time.Hour), KeepFailures: 1, KeepRounds: 10}}); err != nil {
		t.Fatal(err)
	}
	save("a", 3) // its rows are gone: written again at their rowids
	check("a", 3)
	save("c", 4)
	// a's remembered rowids now name c's rows.
	c := s.ids.of["c"]
	s.ids.learn([]learned{{schedule: "a", day: c.day, id: c.dayID}, {schedule: "a", slot: 0, id: c.slots[0] >> slotBits}})
	for _, v := range []byte{5, 6} { // the wrong rowids, then those learned anew
		save("a", v)
		check("a", v)
		check("b", 1)
		check("c", 4)
	}
}

// scheduleA is a flush of schedule "a": its row of day and these pages,
// each with data v.
func scheduleA(day time.Time, v byte, pages ...store.Round) store.StatsBatch {
	for i := range pages {
		pages[i].Schedule, pages[i].Data = "a", []byte{v}
	}
	return store.StatsBatch{Days: []store.Day{{Schedule: "a", Day: day, Data: []byte{v}}}, Rounds: pages}
}

// reopenedAfter writes b to a new store, closes it and returns the store
// opened again: rows written before it opened.
func reopenedAfter(t *testing.T, b store.StatsBatch) *Store {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	s.log.keep = 0
	if err := s.SaveStats(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	s.Close()
	return openTables(t, dir)
}

// TestRowsWrittenBeforeOpenAreRewritten: rows from before a restart that
// no read taught the store (an app's registration reads do:
// TestRegistrationReadsLearnRowIDs) are refused at a fresh rowid at the
// first flush and written by key, which learns their rowids; from then on
// they are rewritten by rowid. Never duplicated.
func TestRowsWrittenBeforeOpenAreRewritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	batch := func(v byte) store.StatsBatch {
		return scheduleA(day, v, store.Round{Slot: 2, First: 1, Seq: 1, Start: day})
	}
	s := reopenedAfter(t, batch(1))
	for _, v := range []byte{2, 3} {
		before := s.Counters().Statements
		if err := s.SaveStats(ctx, batch(v)); err != nil {
			t.Fatal(err)
		}
		want := int64(2) // a row of each table, by rowid
		if v == 2 {
			// Each table's largest rowid, read once; then its row, refused
			// at a fresh rowid, again by key.
			want += 2 + 2
		}
		if n := s.Counters().Statements - before; n != want {
			t.Fatalf("flush %d after the restart: %d statements, want %d", v-1, n, want)
		}
		days, err := s.LoadDays(ctx, "a", day)
		if err != nil || len(days) != 1 || !bytes.Equal(days[0].Data, []byte{v}) {
			t.Fatalf("days %+v, %v; want one with data %d", days, err, v)
		}
		rs, err := s.LoadRounds(ctx, "a", 10)
		if err != nil || len(rs) != 1 || !bytes.Equal(rs[0].Data, []byte{v}) {
			t.Fatalf("rounds %+v, %v; want one with data %d", rs, err, v)
		}
	}
	if c := s.ids.of["a"]; c.dayID == 0 || len(c.slots) != 1 {
		t.Fatalf("rowids not learned: %+v", c)
	}
}

// TestRegistrationReadsLearnRowIDs: an app reads a schedule's days and
// last round when it registers it; those reads learn where its rows are,
// so the first flush after a restart rewrites them by rowid and reads
// nothing more. LastRoundSeq is the highest sequence over every slot.
func TestRegistrationReadsLearnRowIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	batch := func(v byte) store.StatsBatch {
		return scheduleA(day, v,
			store.Round{Slot: 2, First: 1, Seq: 7, Start: day},
			store.Round{Slot: 4, First: 8, Seq: 9, Start: day.Add(time.Second)})
	}
	s := reopenedAfter(t, batch(1))
	if _, err := s.LoadDays(ctx, "a", day); err != nil {
		t.Fatal(err)
	}
	if seq, err := s.LastRoundSeq(ctx, "a"); err != nil || seq != 9 {
		t.Fatalf("LastRoundSeq = %d, %v; want 9", seq, err)
	}
	before := s.Counters().Statements
	if err := s.SaveStats(ctx, batch(2)); err != nil {
		t.Fatal(err)
	}
	// By rowid, a statement per row (fewer rows than a full statement
	// holds go one by one), and no read.
	if n := s.Counters().Statements - before; n != 3 {
		t.Fatalf("first flush after the restart: %d statements, want 3", n)
	}
	rs, err := s.LoadRounds(ctx, "a", 10)
	if err != nil || len(rs) != 2 {
		t.Fatalf("rounds %+v, %v; want two", rs, err)
	}
	for _, r := range rs {
		if !bytes.Equal(r.Data, []byte{2}) {
			t.Fatalf("slot %d not rewritten: %+v", r.Slot, r)
		}
	}
	if seq, err := s.LastRoundSeq(ctx, "none"); err != nil || seq != 0 {
		t.Fatalf("LastRoundSeq of a schedule without rounds = %d, %v; want 0", seq, err)
	}
}

// TestStatementJournalInMemory: the statement journals of a flush's
// upserts are kept in memory (temp_store = MEMORY, 2), not written to a
// temporary file page by page.
func TestStatementJournalInMemory(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	var mode int
	if err := s.db.QueryRow("PRAGMA temp_store").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != 2 {
		t.Fatalf("temp_store = %d, want 2 (MEMORY)", mode)
	}
}

// endsAfter is a context whose Err turns to context.DeadlineExceeded at
// its n-th call: a flush that passes its deadline between two statements.
type endsAfter struct {
	context.Context
	n atomic.Int32
}

func (c *endsAfter) Err() error {
	if c.n.Add(-1) < 0 {
		return context.DeadlineExceeded
	}
	return nil
}

// TestFlushPastItsDeadlineWritesNothing: the statements of a flush run
// without the driver's per-statement watcher (eachStatement), so the flush
// itself stops at its deadline between statements, and the transaction
// leaves nothing of the batch behind.
func TestFlushPastItsDeadlineWritesNothing(t *testing.T) {
	t.Parallel()
	s := openTables(t, t.TempDir())
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var b store.StatsBatch
	for i := range 3 * roundsPerStatement {
		name := fmt.Sprintf("s%03d", i)
		b.Days = append(b.Days, store.Day{Schedule: name, Day: day, Data: []byte{byte(i)}})
		b.Rounds = append(b.Rounds, store.Round{Schedule: name, Slot: 1, First: 1, Seq: 1, Start: day, Data: []byte{byte(i)}})
	}
	ctx := &endsAfter{Context: context.Background()}
	ctx.n.Store(2) // past its deadline at the third statement
	before := s.Counters()
	err := s.SaveStats(ctx, b)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SaveStats past its deadline: %v, want context.DeadlineExceeded", err)
	}
	// The whole batch takes eight statements (a table's first rowid and
	// three writes, per table) and a commit; it stopped part-way.
	if c := s.Counters(); c.Statements-before.Statements >= 8 || c.Transactions != before.Transactions {
		t.Fatalf("%d statements and %d commits before the deadline ended the flush, want fewer than 8 and none", c.Statements-before.Statements, c.Transactions-before.Transactions)
	}
	for _, name := range []string{"s000", "s050"} {
		days, err := s.LoadDays(context.Background(), name, day)
		if err != nil {
			t.Fatal(err)
		}
		rounds, err := s.LoadRounds(context.Background(), name, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(days) != 0 || len(rounds) != 0 {
			t.Fatalf("%s: %d days and %d rounds written by a flush that failed", name, len(days), len(rounds))
		}
	}
}

// TestRowIDsBySlot: a schedule's slots are remembered in slot order,
// whatever order they are learned in, and found again; a slot past the
// highest a history can have, or a rowid too large to keep beside a slot,
// is not remembered (its row is written by key).
func TestRowIDsBySlot(t *testing.T) {
	t.Parallel()
	var r rowIDs
	r.learn([]learned{{schedule: "a", slot: 3, id: 7}, {schedule: "a", slot: 1, id: 5}, {schedule: "a", slot: 9, id: 2},
		{schedule: "a", slot: maxSlot + 1, id: 9}, {schedule: "a", slot: 4, id: maxRowID + 1}})
	hints := r.roundsHints([]store.Round{{Schedule: "a", Slot: 1}, {Schedule: "a", Slot: 2}, {Schedule: "a", Slot: 3}, {Schedule: "a", Slot: 9},
		{Schedule: "a", Slot: 4}, {Schedule: "a", Slot: maxSlot + 1}, {Schedule: "b", Slot: 1}})
	if want := []int64{5, 0, 7, 2, 0, 0, 0}; !slices.Equal(hints, want) {
		t.Fatalf("hints %v, want %v", hints, want)
	}
	slots := r.of["a"].slots
	if len(slots) != 3 || !slices.IsSortedFunc(slots, func(p, q int64) int { return cmp.Compare(p&maxSlot, q&maxSlot) }) {
		t.Fatalf("a's slots %v: want three, by slot", slots)
	}
	r.learn([]learned{{schedule: "a", slot: 3, id: 8}, {schedule: "a", slot: 2, id: 6}})
	if got := r.roundsHints([]store.Round{{Schedule: "a", Slot: 2}, {Schedule: "a", Slot: 3}}); !slices.Equal(got, []int64{6, 8}) {
		t.Fatalf("slots 2 and 3 learned again: hints %v, want [6 8]", got)
	}
}
