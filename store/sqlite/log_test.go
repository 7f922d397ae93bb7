package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/fom-go/fom/store"
)

var logDay0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// flushOf is a flush of the named schedules: each a day and a page in
// slot seq%slots, its data naming schedule and flush.
func flushOf(flush, slots int, names ...string) store.StatsBatch {
	var b store.StatsBatch
	for _, name := range names {
		v := []byte(fmt.Sprintf("%s@%d", name, flush))
		seq := int64(flush)
		b.Days = append(b.Days, store.Day{Schedule: name, Day: logDay0, Data: v})
		b.Rounds = append(b.Rounds, store.Round{Schedule: name, Slot: int(seq % int64(slots)), First: seq, Seq: seq, Start: logDay0.Add(time.Duration(seq) * time.Second), Data: v})
	}
	return b
}

// tableRows reads what the tables themselves hold of schedule (not the
// log): its day's data and its pages' data by slot.
func tableRows(t *testing.T, s *Store, schedule string) (day string, pages map[int]string) {
	t.Helper()
	var b []byte
	err := s.db.QueryRow("SELECT data FROM stats_days WHERE schedule = ?", schedule).Scan(&b)
	if err != nil && !strings.Contains(err.Error(), "no rows") {
		t.Fatal(err)
	}
	rows, err := s.db.Query("SELECT slot, data FROM rounds WHERE schedule = ?", schedule)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	pages = map[int]string{}
	for rows.Next() {
		var slot int
		var d []byte
		if err := rows.Scan(&slot, &d); err != nil {
			t.Fatal(err)
		}
		pages[slot] = string(d)
	}
	return string(b), pages
}

// readBack checks what the store answers for schedule: its day's data,
// and its newest pages' data, newest first.
func readBack(t *testing.T, s *Store, schedule, day string, pages ...string) {
	t.Helper()
	ctx := context.Background()
	ds, err := s.LoadDays(ctx, schedule, logDay0)
	if err != nil || len(ds) != 1 || string(ds[0].Data) != day {
		t.Fatalf("%s: days %+v, %v; want %q", schedule, ds, err, day)
	}
	rs, err := s.LoadRounds(ctx, schedule, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, string(r.Data))
	}
	if fmt.Sprint(got) != fmt.Sprint(pages) {
		t.Fatalf("%s: pages %v, want %v", schedule, got, pages)
	}
}

// openLog opens a store whose log keeps keep flushes, and flushes first.
func openLog(t *testing.T, keep int, first store.StatsBatch) *Store {
	t.Helper()
	s := open(t, t.TempDir())
	s.log.keep = keep
	if err := s.SaveStats(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTheLogPushesOutOnlyTheNewest: with a log of three flushes and a
// history of two slots, a schedule written at every flush has its day and
// pages replaced in the log, and the tables never receive them; one
// written once has its day and page written to the tables when its row
// leaves the log. Reads answer the newest throughout, and a flush that
// pushes out only replaced entries runs two statements.
func TestTheLogPushesOutOnlyTheNewest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openLog(t, 3, flushOf(1, 2, "fast", "slow"))
	for flush := 2; flush <= 6; flush++ {
		before := s.Counters()
		if err := s.SaveStats(ctx, flushOf(flush, 2, "fast")); err != nil {
			t.Fatal(err)
		}
		n := s.Counters().Statements - before.Statements
		readBack(t, s, "fast", fmt.Sprintf("fast@%d", flush), fmt.Sprintf("fast@%d", flush), fmt.Sprintf("fast@%d", flush-1))
		readBack(t, s, "slow", "slow@1", "slow@1")
		day, pages := tableRows(t, s, "slow")
		switch flush {
		case 2, 3: // flush 1's row is still in the log
			if day != "" || len(pages) != 0 || n != 1 {
				t.Fatalf("flush %d: slow's rows %q %v, %d statements; want none in the tables, one statement", flush, day, pages, n)
			}
		case 4: // flush 1's row left: slow's entries are the newest of theirs, fast's were replaced
			if day != "slow@1" || pages[1] != "slow@1" || len(pages) != 1 || n < 4 {
				t.Fatalf("flush 4: slow's rows %q %v, %d statements; want its day and page written", day, pages, n)
			}
		default:
			if n != 2 { // the row, and the removal of the one it pushed out
				t.Fatalf("flush %d: %d statements, want 2", flush, n)
			}
		}
		if day, pages := tableRows(t, s, "fast"); day != "" || len(pages) != 0 {
			t.Fatalf("flush %d: fast's rows %q %v reached the tables; every one was replaced in the log", flush, day, pages)
		}
	}
	if r, ok, err := s.LoadRound(ctx, "fast", "", 5); err != nil || !ok || string(r.Data) != "fast@5" {
		t.Fatalf("round 5 of fast: %+v %v %v", r, ok, err)
	}
	if _, ok, err := s.LoadRound(ctx, "fast", "", 4); err != nil || ok {
		t.Fatalf("round 4 of fast was replaced by round 6 in its slot; found %v (%v)", ok, err)
	}
	if seq, err := s.LastRoundSeq(ctx, "fast"); err != nil || seq != 6 {
		t.Fatalf("last round of fast %d, %v; want 6", seq, err)
	}
	if r, ok, err := s.LoadRound(ctx, "slow", "", 1); err != nil || !ok || string(r.Data) != "slow@1" {
		t.Fatalf("round 1 of slow: %+v %v %v", r, ok, err)
	}
}

// TestAPushedOutEntryReplacedByTheFlushIsNotWritten: entries still the
// newest of their keys when their row leaves the log, but replaced by the
// flush that pushes the row out, reach no table; a live one of another
// schedule in the same row does.
func TestAPushedOutEntryReplacedByTheFlushIsNotWritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openLog(t, 2, flushOf(1, 2, "a", "c"))
	if err := s.SaveStats(ctx, flushOf(2, 2, "b")); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveStats(ctx, flushOf(3, 2, "a")); err != nil { // pushes flush 1's row out; a's day and slot 1 again
		t.Fatal(err)
	}
	if day, pages := tableRows(t, s, "a"); day != "" || len(pages) != 0 {
		t.Fatalf("a's rows %q %v reached the tables; flush 3 replaced them", day, pages)
	}
	if day, pages := tableRows(t, s, "c"); day != "c@1" || len(pages) != 1 || pages[1] != "c@1" {
		t.Fatalf("c's rows %q %v; want its day and page of flush 1 written", day, pages)
	}
	readBack(t, s, "a", "a@3", "a@3")
	readBack(t, s, "c", "c@1", "c@1")
}

// TestAFlushInSeveralBatchesKeepsItsLap: an app writes a flush of many
// schedules in several batches of one flush number. The log then keeps
// as many flushes as it would of one batch each, each batch pushing out
// the batch of the same schedules a lap earlier: schedules written at
// every flush, with a lap of two slots in a log of two flushes, never
// reach the tables, whichever batch they are in.
func TestAFlushInSeveralBatchesKeepsItsLap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	of := func(flush int, name string) store.StatsBatch {
		b := flushOf(flush, 2, name)
		b.Flush = uint64(flush)
		return b
	}
	s := openLog(t, 2, of(1, "a"))
	for flush := 1; flush <= 6; flush++ {
		for _, name := range []string{"a", "b"} {
			if flush == 1 && name == "a" {
				continue // openLog wrote it
			}
			if err := s.SaveStats(ctx, of(flush, name)); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range []string{"a", "b"} {
			if day, pages := tableRows(t, s, name); day != "" || len(pages) != 0 {
				t.Fatalf("flush %d: %s's rows %q %v reached the tables; every one was replaced in the log", flush, name, day, pages)
			}
			v := fmt.Sprintf("%s@%d", name, flush)
			if flush == 1 {
				readBack(t, s, name, v, v)
			} else {
				readBack(t, s, name, v, v, fmt.Sprintf("%s@%d", name, flush-1))
			}
		}
	}
	if n := len(s.log.rows); n != 4 {
		t.Fatalf("the log holds %d rows, want 4 (two flushes of two batches)", n)
	}
}

// flushedIn opens a store in dir and writes batches to it; the caller
// closes it, to open the store again.
func flushedIn(t *testing.T, dir string, batches ...store.StatsBatch) *Store {
	t.Helper()
	s, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if err := s.SaveStats(context.Background(), b); err != nil {
			s.Close()
			t.Fatal(err)
		}
	}
	return s
}

// TestTheLogIsFoldedWhenTheStoreOpens: a store opened after flushes finds
// the newest of every key in the tables and an empty log, and answers as
// the store before it did.
func TestTheLogIsFoldedWhenTheStoreOpens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	var flushes []store.StatsBatch
	for flush := 1; flush <= 5; flush++ {
		names := []string{"a", "b"}
		if flush > 2 {
			names = names[:1]
		}
		flushes = append(flushes, flushOf(flush, 3, names...))
	}
	s := flushedIn(t, dir, flushes...)
	readBack(t, s, "a", "a@5", "a@5", "a@4", "a@3")
	s.Close()
	s = open(t, dir)
	var logged int
	if err := s.db.QueryRow("SELECT count(*) FROM stats_log").Scan(&logged); err != nil || logged != 0 {
		t.Fatalf("%d log rows after the open (%v), want 0", logged, err)
	}
	if day, pages := tableRows(t, s, "a"); day != "a@5" || fmt.Sprint(pages) != "map[0:a@3 1:a@4 2:a@5]" {
		t.Fatalf("a's rows after the open: %q %v", day, pages)
	}
	readBack(t, s, "a", "a@5", "a@5", "a@4", "a@3")
	readBack(t, s, "b", "b@2", "b@2", "b@1")
	if seq, err := s.LastRoundSeq(ctx, "a"); err != nil || seq != 5 {
		t.Fatalf("last round of a %d, %v; want 5", seq, err)
	}
	// The next flushes go on from there.
	if err := s.SaveStats(ctx, flushOf(6, 3, "a")); err != nil {
		t.Fatal(err)
	}
	readBack(t, s, "a", "a@6", "a@6", "a@5", "a@4")
}

// TestOneSlotTwiceInABatch: a batch with two pages of one slot keeps the
// later, as the tables would: read through the log, after its row leaves
// the log, and after the store folds the log at an open.
func TestOneSlotTwiceInABatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b := flushOf(1, 3, "a")
	later := flushOf(4, 3, "a") // slot 4%3, as flush 1's
	b.Rounds = append(b.Rounds, later.Rounds...)
	s := flushedIn(t, dir, b)
	readBack(t, s, "a", "a@1", "a@4")
	s.Close()
	s = open(t, dir)
	if day, pages := tableRows(t, s, "a"); day != "a@1" || fmt.Sprint(pages) != "map[1:a@4]" {
		t.Fatalf("after the open: %q %v", day, pages)
	}
	readBack(t, s, "a", "a@1", "a@4")

	// Pushed out of a log of one flush by the next, for another schedule.
	s.log.keep = 1
	if err := s.SaveStats(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveStats(ctx, flushOf(5, 3, "other")); err != nil {
		t.Fatal(err)
	}
	if day, pages := tableRows(t, s, "a"); day != "a@1" || fmt.Sprint(pages) != "map[1:a@4]" {
		t.Fatalf("pushed out: %q %v", day, pages)
	}
	readBack(t, s, "a", "a@1", "a@4")
}

// TestAnUnreadableLogRowRefusesTheOpen: a log row fom cannot read fails
// the open with ErrCorrupt, naming the row and how to go on without it,
// and is left as it was.
func TestAnUnreadableLogRowRefusesTheOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := flushedIn(t, dir, flushOf(1, 3, "a"))
	if _, err := s.db.Exec("INSERT INTO stats_log (id, data) VALUES (7, x'01020361')"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(ctx, dir)
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "log row 7") || !strings.Contains(err.Error(), "DELETE FROM stats_log WHERE id = 7") {
		t.Fatalf("open with an unreadable log row: %v", err)
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows int
	if err := db.QueryRow("SELECT count(*) FROM stats_log").Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("%d log rows left (%v), want both", rows, err)
	}
	// Without the row, the store opens, with the other row's statistics.
	if _, err := db.Exec("DELETE FROM stats_log WHERE id = 7"); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	readBack(t, s, "a", "a@1", "a@1")
}

// TestAFailedLoggedFlushChangesNothing: a flush whose transaction fails
// (its deadline passed) leaves the log and the store's memory of it as
// they were, and the next flush writes the same batch.
func TestAFailedLoggedFlushChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openLog(t, 1, flushOf(1, 3, "a", "b"))
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.SaveStats(done, flushOf(2, 3, "a")); err == nil {
		t.Fatal("a flush past its deadline succeeded")
	}
	readBack(t, s, "a", "a@1", "a@1")
	readBack(t, s, "b", "b@1", "b@1")
	if err := s.SaveStats(ctx, flushOf(2, 3, "a")); err != nil {
		t.Fatal(err)
	}
	readBack(t, s, "a", "a@2", "a@2", "a@1")
	readBack(t, s, "b", "b@1", "b@1")
	if day, _ := tableRows(t, s, "b"); day != "b@1" {
		t.Fatalf("b's day in the table: %q, want b@1 (pushed out by the second flush)", day)
	}
}

// TestRetentionDropsLoggedEntries: what Prune deletes is gone from the
// answers while it is still in the log.
func TestRetentionDropsLoggedEntries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openLog(t, logKeep, flushOf(1, 8, "a"))
	if err := s.SaveStats(ctx, flushOf(6, 8, "a")); err != nil {
		t.Fatal(err)
	}
	// A history made smaller: slots from 4 on go.
	if err := s.Prune(ctx, []store.Retention{{Schedule: "a", KeepFailures: 10, KeepRounds: 4}}); err != nil {
		t.Fatal(err)
	}
	readBack(t, s, "a", "a@6", "a@1")
	// Everything before the next day goes.
	if err := s.Prune(ctx, []store.Retention{{Schedule: "a", Before: logDay0.Add(24 * time.Hour), KeepFailures: 10}}); err != nil {
		t.Fatal(err)
	}
	if ds, err := s.LoadDays(ctx, "a", logDay0); err != nil || len(ds) != 0 {
		t.Fatalf("days after retention: %+v %v", ds, err)
	}
	if rs, err := s.LoadRounds(ctx, "a", 10); err != nil || len(rs) != 0 {
		t.Fatalf("pages after retention: %+v %v", rs, err)
	}
	if seq, err := s.LastRoundSeq(ctx, "a"); err != nil || seq != 0 {
		t.Fatalf("last round after retention: %d %v", seq, err)
	}
}

// TestLogEntriesDecodeOrFailCleanly: every prefix of a log row, and every
// row with one byte changed, decodes to the entries written or to an
// error; never a panic.
func TestLogEntriesDecodeOrFailCleanly(t *testing.T) {
	b := flushOf(3, 4, "a", "ünïcode")
	blob, es := encodeLog(nil, b.Days, b.Rounds)
	// Buffers an earlier, larger flush left give the same row and
	// entries, nothing of that flush's in them.
	big := flushOf(9, 9, "bigger", "flush")
	was, wasEs := encodeLog(nil, big.Days, big.Rounds)
	again, againEs := encodeLog(&logBufs{b: was[:0], es: wasEs[:0]}, b.Days, b.Rounds)
	if !bytes.Equal(again, blob) || !slices.EqualFunc(againEs, es, func(x, y logEntry) bool {
		return x.off == y.off && x.n == y.n && x.id() == y.id() && x.data == nil && y.data == nil
	}) || &again[0] != &was[0] {
		t.Fatalf("row built in used buffers: %q %+v\nwant %q %+v", again, againEs, blob, es)
	}
	got, err := readLog(blob)
	if err != nil || len(got) != len(es) {
		t.Fatalf("%d entries, %v; want %d", len(got), err, len(es))
	}
	for i, e := range got {
		if e.off != es[i].off || e.n != es[i].n || e.schedule != es[i].schedule || e.key() != es[i].key() {
			t.Fatalf("entry %d: %+v, want %+v", i, e, es[i])
		}
	}
	if r := got[3].round(); r.Schedule != "ünïcode" || r.Slot != 3 || r.First != 3 || r.Seq != 3 || !r.Start.Equal(logDay0.Add(3*time.Second)) || !bytes.Equal(r.Data, []byte("ünïcode@3")) {
		t.Fatalf("page: %+v", r)
	}
	for n := range len(blob) {
		if _, err := readLog(blob[:n]); err == nil && n != 1 && n != es[1].off && n != es[2].off && n != es[3].off {
			t.Fatalf("a row cut at byte %d of %d read without error", n, len(blob))
		}
	}
	for i := range blob {
		for _, v := range []byte{0, 0x7f, 0x80, 0xff} {
			c := bytes.Clone(blob)
			c[i] = v
			readLog(c) // must not panic
		}
	}
}

// TestAFlushAfterACommitThatTookPlaceAnyway: a commit may report an error
// and still have taken place (an I/O error after the WAL write). The
// store's memory then lags the file: a row of the next id exists, and a
// row to push out is gone. The next flushes write on.
func TestAFlushAfterACommitThatTookPlaceAnyway(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openLog(t, 1, flushOf(1, 3, "a", "b"))
	// As the failed-but-committed flush 2 of a alone left the file.
	if _, err := s.db.Exec("DELETE FROM stats_log WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec("INSERT INTO stats_days (schedule, day, data) VALUES ('b', ?, 'b@1')", dayKey(logDay0)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec("INSERT INTO stats_log (id, data) VALUES (2, x'01')"); err != nil {
		t.Fatal(err)
	}
	// Its batch again, with what came since.
	if err := s.SaveStats(ctx, flushOf(2, 3, "a")); err != nil {
		t.Fatal(err)
	}
	readBack(t, s, "a", "a@2", "a@2")
	if err := s.SaveStats(ctx, flushOf(3, 3, "a")); err != nil {
		t.Fatal(err)
	}
	readBack(t, s, "a", "a@3", "a@3", "a@2")
	if ds, err := s.LoadDays(ctx, "b", logDay0); err != nil || len(ds) != 1 || string(ds[0].Data) != "b@1" {
		t.Fatalf("b's day: %+v %v", ds, err)
	}
}

// TestAFlushBuildsItsRowInTheLastOnesBuffers: a flush builds its log row
// in the buffers the last flush left, while they are in use elsewhere or
// no collection ran; a collection with no flush using them frees them.
func TestAFlushBuildsItsRowInTheLastOnesBuffers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := flushedIn(t, t.TempDir())
	defer s.Close()
	var held *logBufs
	for i := 0; held == nil; i++ { // a collection may come between two statements
		if i == 100 {
			t.Fatal("no buffers kept after 100 flushes")
		}
		if err := s.SaveStats(ctx, flushOf(i+101, 3, "a", "b")); err != nil {
			t.Fatal(err)
		}
		held = s.log.bufs.Value()
	}
	array := unsafe.SliceData(held.b)
	if err := s.SaveStats(ctx, flushOf(300, 3, "a", "b")); err != nil { // a row of the same size
		t.Fatal(err)
	}
	if s.log.bufs.Value() != held || unsafe.SliceData(held.b) != array || len(held.b) != 0 || len(held.es) != 0 || cap(held.es) < 4 {
		t.Fatalf("the next flush did not build its row in the buffers: %p %p, %d bytes, %d entries", s.log.bufs.Value(), held, len(held.b), len(held.es))
	}
	if ds, err := s.LoadDays(ctx, "b", logDay0); err != nil || len(ds) != 1 || string(ds[0].Data) != "b@300" {
		t.Fatalf("days of b: %+v %v", ds, err)
	}
	held = nil
	runtime.GC()
	if s.log.bufs.Value() != nil {
		t.Fatal("the buffers outlived a collection")
	}
}

// TestLastRoundSeqAtOpenReadsTheLog: the pages the log held at open tell
// LastRoundSeq a schedule's newest number, and it reads only the slots'
// rowids from the index: every slot still learned, those only in the
// tables too. A schedule whose pages had all left the log is read from
// the tables. The first flush drops what no registration took.
func TestLastRoundSeqAtOpenReadsTheLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	s.log.keep = 3
	if err := s.SaveStats(ctx, flushOf(1, 4, "old", "fast")); err != nil {
		t.Fatal(err)
	}
	for flush := 2; flush <= 6; flush++ { // old's row leaves the log at flush 4
		if err := s.SaveStats(ctx, flushOf(flush, 4, "fast")); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	s = open(t, dir)
	s.log.mu.Lock()
	opened := maps.Clone(s.log.opened)
	s.log.mu.Unlock()
	if len(opened) != 1 || opened["fast"] != 6 {
		t.Fatalf("newest pages the log held at open: %v, want fast's 6 only", opened)
	}
	if seq, err := s.LastRoundSeq(ctx, "fast"); err != nil || seq != 6 {
		t.Fatalf("last round of fast %d, %v; want 6", seq, err)
	}
	if seq, err := s.LastRoundSeq(ctx, "old"); err != nil || seq != 1 {
		t.Fatalf("last round of old %d, %v; want 1, from the tables", seq, err)
	}
	s.ids.mu.Lock()
	fast, old := len(s.ids.of["fast"].slots), len(s.ids.of["old"].slots)
	s.ids.mu.Unlock()
	if fast != 4 || old != 1 {
		t.Fatalf("slots learned: fast %d, old %d; want 4 (one of them only in the tables) and 1", fast, old)
	}
	s.log.mu.Lock()
	_, left := s.log.opened["fast"]
	s.log.mu.Unlock()
	if left {
		t.Fatal("fast's number is still kept after its registration read it")
	}
	if seq, err := s.LastRoundSeq(ctx, "fast"); err != nil || seq != 6 {
		t.Fatalf("last round of fast, read again from the tables: %d, %v; want 6", seq, err)
	}
	if err := s.SaveStats(ctx, flushOf(7, 4, "fast")); err != nil {
		t.Fatal(err)
	}
	s.log.mu.Lock()
	dropped := s.log.opened == nil
	s.log.mu.Unlock()
	if !dropped {
		t.Fatal("the numbers read at open are kept past the first flush")
	}
	if seq, err := s.LastRoundSeq(ctx, "fast"); err != nil || seq != 7 {
		t.Fatalf("last round of fast after a flush %d, %v; want 7", seq, err)
	}
}

// TestSlotRowIDsReadTheIndexOnly: the read of a schedule's slots is
// answered by the primary key's index, with no seek in the table per row.
func TestSlotRowIDsReadTheIndexOnly(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	rows, err := s.db.Query("EXPLAIN QUERY PLAN "+slotRowIDsSQL, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if len(plan) != 1 || !strings.Contains(plan[0], "COVERING INDEX") {
		t.Fatalf("plan of %q: %q, want a covering index", slotRowIDsSQL, plan)
	}
}
