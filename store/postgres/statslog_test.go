package postgres

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fom-go/fom/store"
)

// logStore opens a store on schema bound to instance.
func logStore(t testing.TB, schema, instance string) *Store {
	t.Helper()
	s, err := Open(context.Background(), testDSN(), WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.BindInstance(instance); err != nil {
		t.Fatal(err)
	}
	return s
}

// count is the result of a count(*) query.
func count(t *testing.T, admin *pgxpool.Pool, q string, args ...any) int {
	t.Helper()
	var n int
	if err := admin.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

var logDay0 = time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)

// flushOf is a flush of each schedule's day and page in slot, its data
// tag.
func flushOf(slot int, tag byte, schedules ...string) store.StatsBatch {
	var b store.StatsBatch
	for _, n := range schedules {
		b.Days = append(b.Days, store.Day{Schedule: n, Day: logDay0, Data: []byte{tag}})
		seq := int64(tag) * 5
		b.Rounds = append(b.Rounds, store.Round{Schedule: n, Slot: slot, First: seq - 4, Seq: seq, Start: logDay0.Add(time.Duration(tag) * time.Second), Data: []byte{tag}})
	}
	return b
}

// TestTheLogWritesToTheTablesOnlyWhatNoNewerFlushHolds: a flush's day and
// page reach their tables when the flush leaves the log and no newer
// flush holds their key, and reads find the newest all along.
func TestTheLogWritesToTheTablesOnlyWhatNoNewerFlushHolds(t *testing.T) {
	t.Parallel()
	admin := adminPool(t)
	schema := testSchema(t, admin)
	ctx := context.Background()
	s := logStore(t, schema, "i1")
	// Flush 1: a and b; then a alone, in slot 1, flush after flush.
	if err := s.SaveStats(ctx, flushOf(0, 1, "a", "b")); err != nil {
		t.Fatal(err)
	}
	for tag := byte(2); tag <= store.LogFlushes+1; tag++ {
		if err := s.SaveStats(ctx, flushOf(1, tag, "a")); err != nil {
			t.Fatal(err)
		}
		if n := count(t, admin, "SELECT count(*) FROM "+schema+".stats_days"); n != 0 && tag <= store.LogFlushes {
			t.Fatalf("flush %d: %d days in the table while every flush is in the log", tag, n)
		}
	}
	// Flush 1 left the log: b's day and page, and a's page in slot 0, are
	// the newest of their keys; a's day is not.
	if n := count(t, admin, "SELECT count(*) FROM "+schema+".stats_log WHERE instance = 'i1'"); n != store.LogFlushes {
		t.Fatalf("%d rows in the log, want %d", n, store.LogFlushes)
	}
	if n := count(t, admin, "SELECT count(*) FROM "+schema+".stats_days WHERE schedule = 'b' AND data = '\\x01'"); n != 1 {
		t.Fatalf("b's day in the table: %d rows", n)
	}
	if n := count(t, admin, "SELECT count(*) FROM "+schema+".stats_days WHERE schedule = 'a'"); n != 0 {
		t.Fatalf("a's day, replaced in the log, written to the table: %d rows", n)
	}
	if n := count(t, admin, "SELECT count(*) FROM "+schema+".rounds WHERE slot = 0 AND data = '\\x01'"); n != 2 {
		t.Fatalf("the pages of flush 1 in the table: %d rows, want a's and b's", n)
	}
	if n := count(t, admin, "SELECT count(*) FROM "+schema+".rounds WHERE slot = 1"); n != 0 {
		t.Fatalf("a's page in slot 1, replaced in the log, written to the table: %d rows", n)
	}
	newest := byte(store.LogFlushes + 1)
	days, err := s.LoadDays(ctx, "a", logDay0)
	if err != nil || len(days) != 1 || !bytes.Equal(days[0].Data, []byte{newest}) || !days[0].Day.Equal(logDay0) {
		t.Fatalf("a's days: %+v, %v; want one of %v, data %d", days, err, logDay0, newest)
	}
	rounds, err := s.LoadRounds(ctx, "a", 10)
	if err != nil || len(rounds) != 2 || rounds[0].Slot != 1 || rounds[0].Seq != int64(newest)*5 || rounds[1].Slot != 0 || rounds[1].Seq != 5 {
		t.Fatalf("a's pages: %+v, %v; want slot 1 (seq %d), then slot 0 (seq 5)", rounds, err, int(newest)*5)
	}
	if seq, err := s.LastRoundSeq(ctx, "a"); err != nil || seq != int64(newest)*5 {
		t.Fatalf("a's last round: %d, %v; want %d", seq, err, int(newest)*5)
	}
	if r, ok, err := s.LoadRound(ctx, "a", "", 3); err != nil || !ok || r.Slot != 0 {
		t.Fatalf("a's round 3: %+v, %v, %v; want the page in slot 0", r, ok, err)
	}
	// A page replaced in its slot by a newer lap hides the table's.
	if err := s.SaveStats(ctx, flushOf(0, 100, "a")); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.LoadRound(ctx, "a", "", 3); err != nil || ok {
		t.Fatalf("a's round 3, its slot rewritten in the log: found %v, %v", ok, err)
	}
}

// TestEveryInstanceReadsTheOthersLogs: what one instance flushed, another
// reads at once, with its own; a restart of the first goes on with its
// log.
func TestEveryInstanceReadsTheOthersLogs(t *testing.T) {
	t.Parallel()
	admin := adminPool(t)
	schema := testSchema(t, admin)
	ctx := context.Background()
	one, two := logStore(t, schema, "i1"), logStore(t, schema, "i2")
	if err := one.SaveStats(ctx, flushOf(0, 1, "a")); err != nil {
		t.Fatal(err)
	}
	if err := two.SaveStats(ctx, flushOf(0, 2, "a")); err != nil {
		t.Fatal(err)
	}
	byName, err := two.LoadClusterDaysOf(ctx, []string{"a", "b"}, logDay0)
	if err != nil || len(byName["a"]) != 2 || byName["a"][0].Instance != "i1" || byName["a"][1].Instance != "i2" {
		t.Fatalf("a's days of every instance: %+v, %v", byName, err)
	}
	if own, err := two.LoadDays(ctx, "a", logDay0); err != nil || len(own) != 1 || own[0].Data[0] != 2 {
		t.Fatalf("i2's own days of a: %+v, %v", own, err)
	}
	rounds, err := two.LoadRounds(ctx, "a", 10)
	if err != nil || len(rounds) != 2 || rounds[0].Instance != "i2" || rounds[1].Instance != "i1" {
		t.Fatalf("a's pages of every instance: %+v, %v", rounds, err)
	}
	if r, ok, err := two.LoadRound(ctx, "a", "i1", 3); err != nil || !ok || r.Data[0] != 1 {
		t.Fatalf("i1's round 3 of a, read by i2: %+v, %v, %v", r, ok, err)
	}
	// i1 again, in a new process: its first read folds the log it left
	// into the tables, and its log goes on from its last row.
	one.Close()
	again := logStore(t, schema, "i1")
	if days, err := again.LoadDays(ctx, "a", logDay0); err != nil || len(days) != 1 || days[0].Data[0] != 1 {
		t.Fatalf("i1's days of a at its restart: %+v, %v", days, err)
	}
	if n := count(t, admin, "SELECT count(*) FROM "+schema+".stats_log WHERE instance = 'i1'"); n != 0 {
		t.Fatalf("i1's log after its restart's first read: %d rows, want none (folded)", n)
	}
	if n := count(t, admin, "SELECT count(*) FROM "+schema+".stats_days WHERE instance = 'i1'"); n != 1 {
		t.Fatalf("i1's days in stats_days after its restart's first read: %d, want 1", n)
	}
	for tag := byte(3); tag < 3+store.LogFlushes; tag++ {
		if err := again.SaveStats(ctx, flushOf(0, tag, "a")); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, admin, "SELECT count(*) FROM "+schema+".stats_log WHERE instance = 'i1'"); n != store.LogFlushes {
		t.Fatalf("i1's log after its restart: %d rows, want %d", n, store.LogFlushes)
	}
	if days, err := again.LoadDays(ctx, "a", logDay0); err != nil || len(days) != 1 || days[0].Data[0] != 2+store.LogFlushes {
		t.Fatalf("i1's days of a after its restart: %+v, %v", days, err)
	}
}

// TestReadsOfFewAndManySchedulesAgree: a read of days looks a few
// schedules up in each log row and unnests the rows for many
// (loggedDays); both find, of every instance, each schedule's newest day
// in the log or the table, whichever names the read asks for.
func TestReadsOfFewAndManySchedulesAgree(t *testing.T) {
	t.Parallel()
	admin := adminPool(t)
	schema := testSchema(t, admin)
	ctx := context.Background()
	stores := []*Store{logStore(t, schema, "i1"), logStore(t, schema, "i2")}
	const n = fewNames + 4
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("s%02d", i)
	}
	// Flush f of instance k holds the schedules i with i%(f+2) == k, on
	// day f%3: a schedule's day is written again by some flushes, skipped
	// by others, and the first flushes leave the log for the table.
	want := map[[3]string]byte{} // instance, schedule, day: the newest tag
	flushes := store.LogFlushes + 4
	for f := range flushes {
		for k, st := range stores {
			var b store.StatsBatch
			day := logDay0.AddDate(0, 0, f%3)
			for i, name := range names {
				if i%(f+2) != k {
					continue
				}
				tag := byte(10*f + k + 1)
				b.Days = append(b.Days, store.Day{Schedule: name, Day: day, Data: []byte{tag}})
				want[[3]string{st.instanceID(), name, day.Format(time.DateOnly)}] = tag
			}
			if err := st.SaveStats(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	if tabled := count(t, admin, "SELECT count(*) FROM "+schema+".stats_days"); tabled == 0 {
		t.Fatal("no day reached stats_days: the test reads the log alone")
	}
	got := func(days []store.Day) map[[3]string]byte {
		out := map[[3]string]byte{}
		for _, d := range days {
			k := [3]string{d.Instance, d.Schedule, d.Day.Format(time.DateOnly)}
			if _, dup := out[k]; dup {
				t.Fatalf("day %v read twice", k)
			}
			out[k] = d.Data[0]
		}
		return out
	}
	many, err := stores[0].LoadClusterDaysOf(ctx, names, logDay0)
	if err != nil {
		t.Fatal(err)
	}
	all := map[[3]string]byte{}
	for _, name := range names {
		few, err := stores[1].LoadClusterDaysOf(ctx, []string{name}, logDay0)
		if err != nil {
			t.Fatal(err)
		}
		one, wantOne := got(few[name]), map[[3]string]byte{}
		for k, v := range want {
			if k[1] == name {
				wantOne[k] = v
			}
		}
		if fmt.Sprint(one) != fmt.Sprint(wantOne) {
			t.Errorf("days of %s read alone: %v, want %v", name, one, wantOne)
		}
		for k, v := range got(many[name]) {
			all[k] = v
		}
	}
	if fmt.Sprint(all) != fmt.Sprint(want) {
		t.Errorf("days of %d schedules read together:\n%v\nwant\n%v", n, all, want)
	}
}

// TestAFlushInSeveralBatchesIsOneFlushOfTheLog: the rows of one flush
// (StatsBatch.Flush) leave the log together, a flush later than
// store.LogFlushes others.
func TestAFlushInSeveralBatchesIsOneFlushOfTheLog(t *testing.T) {
	t.Parallel()
	admin := adminPool(t)
	schema := testSchema(t, admin)
	ctx := context.Background()
	s := logStore(t, schema, "i1")
	for f := uint64(1); f <= store.LogFlushes+1; f++ {
		for part := range 3 {
			b := flushOf(0, byte(f), fmt.Sprintf("s%d", part))
			b.Flush = f
			if err := s.SaveStats(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		want := 3 * min(int(f), store.LogFlushes)
		if n := count(t, admin, "SELECT count(*) FROM "+schema+".stats_log"); n != want {
			t.Fatalf("after flush %d: %d rows in the log, want %d", f, n, want)
		}
	}
}

// TestRetentionFoldsWhatItDeletesAndIdleLogs: a prune folds into the
// tables the log rows holding what it deletes, and those an hour old, then
// deletes from the tables: what it deletes does not come back from a log,
// and what it keeps reads the same.
func TestRetentionFoldsWhatItDeletesAndIdleLogs(t *testing.T) {
	t.Parallel()
	admin := adminPool(t)
	schema := testSchema(t, admin)
	ctx := context.Background()
	one, two := logStore(t, schema, "i1"), logStore(t, schema, "i2")
	old := store.StatsBatch{Days: []store.Day{{Schedule: "a", Day: logDay0.AddDate(0, 0, -40), Data: []byte{9}}}}
	if err := one.SaveStats(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := one.SaveStats(ctx, flushOf(0, 1, "a")); err != nil {
		t.Fatal(err)
	}
	if err := two.SaveStats(ctx, flushOf(0, 2, "a")); err != nil {
		t.Fatal(err)
	}
	rule := store.Retention{Schedule: "a", Before: logDay0.AddDate(0, 0, -30), KeepFailures: 10, KeepRounds: 50}
	if err := two.Prune(ctx, []store.Retention{rule}); err != nil {
		t.Fatal(err)
	}
	logRows := func() int {
		return count(t, admin, "SELECT count(*) FROM "+schema+".stats_log")
	}
	if n := logRows(); n != 2 {
		t.Fatalf("%d rows left in the log after a prune, want the two without an old day", n)
	}
	days := func() []store.Day {
		t.Helper()
		byName, err := one.LoadClusterDaysOf(ctx, []string{"a"}, logDay0.AddDate(0, 0, -60))
		if err != nil {
			t.Fatal(err)
		}
		return byName["a"]
	}
	if d := days(); len(d) != 2 || !d[0].Day.Equal(logDay0) || !d[1].Day.Equal(logDay0) {
		t.Fatalf("a's days after the prune: %+v; want today's of i1 and i2", d)
	}
	// i2 gone for an hour: the next prune folds its log.
	if _, err := admin.Exec(ctx, "UPDATE "+schema+".stats_log SET at = at - interval '2 hours' WHERE instance = 'i2'"); err != nil {
		t.Fatal(err)
	}
	if err := one.Prune(ctx, []store.Retention{rule}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, admin, "SELECT count(*) FROM "+schema+".stats_log WHERE instance = 'i2'"); n != 0 {
		t.Fatalf("%d rows of i2's idle log left after a prune", n)
	}
	if d := days(); len(d) != 2 || d[1].Instance != "i2" || d[1].Data[0] != 2 {
		t.Fatalf("a's days after i2's log was folded: %+v", d)
	}
	// i1 logs on: its push-outs find its folded row gone.
	for tag := byte(3); tag < 3+store.LogFlushes+2; tag++ {
		if err := one.SaveStats(ctx, flushOf(0, tag, "a")); err != nil {
			t.Fatal(err)
		}
	}
	if days, err := one.LoadDays(ctx, "a", logDay0); err != nil || len(days) != 1 || days[0].Data[0] != 4+store.LogFlushes {
		t.Fatalf("i1's days of a: %+v, %v", days, err)
	}
}

// TestAFlushThatFailsLeavesTheLogAsItWas: a flush whose transaction fails
// after its log row was written (a failure PostgreSQL refuses) leaves
// nothing of it, in the log or in what the store remembers of it: the
// flushes after it push out and read what was committed.
func TestAFlushThatFailsLeavesTheLogAsItWas(t *testing.T) {
	t.Parallel()
	admin := adminPool(t)
	schema := testSchema(t, admin)
	ctx := context.Background()
	s := logStore(t, schema, "i1")
	for tag := byte(1); tag <= store.LogFlushes; tag++ {
		if err := s.SaveStats(ctx, flushOf(int(tag)%3, tag, "a")); err != nil {
			t.Fatal(err)
		}
	}
	bad := flushOf(7, 99, "a", "z")
	bad.Failures = []store.Failure{{Schedule: "a", TaskID: "t\x00", At: logDay0}} // text cannot hold NUL
	if err := s.SaveStats(ctx, bad); err == nil {
		t.Fatal("a failure with a NUL in its task id was saved")
	}
	// Another key set at the ids the failed flush had taken.
	for tag := byte(20); tag < 20+store.LogFlushes; tag++ {
		if err := s.SaveStats(ctx, flushOf(0, tag, "b")); err != nil {
			t.Fatal(err)
		}
	}
	rounds, err := s.LoadRounds(ctx, "a", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rounds {
		if r.Slot == 7 || r.Data[0] == 99 {
			t.Fatalf("a's pages hold the failed flush's: %+v", rounds)
		}
	}
	if len(rounds) != 3 || rounds[0].Data[0] != store.LogFlushes {
		t.Fatalf("a's pages: %+v; want slots 0, 1, 2, the newest of flush %d", rounds, store.LogFlushes)
	}
	if n := count(t, admin, "SELECT count(*) FROM "+schema+".rounds WHERE schedule = 'a'"); n != 3 {
		t.Fatalf("a's pages pushed out to the table: %d rows, want 3", n)
	}
	if n := count(t, admin, "SELECT count(*) FROM "+schema+".stats_days WHERE schedule = 'z'") + count(t, admin, "SELECT count(*) FROM "+schema+".rounds WHERE schedule = 'z'"); n != 0 {
		t.Fatalf("the failed flush's schedule z in the tables: %d rows", n)
	}
}
