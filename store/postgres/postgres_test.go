package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/fom-go/fom/internal/pgtest"
	"github.com/fom-go/fom/store"
	"github.com/fom-go/fom/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testDSN() string { return pgtest.DSN() }

func adminPool(t testing.TB) *pgxpool.Pool { return pgtest.Pool(t) }

func testSchema(t testing.TB, pool *pgxpool.Pool) string { return pgtest.Schema(t, pool) }

func TestStoreSuite(t *testing.T) {
	t.Parallel()
	admin := adminPool(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Open(context.Background(), testDSN(), WithSchema(testSchema(t, admin)))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestMigrationsRunOnceUnderConcurrentOpeners: instances starting at once
// migrate the schema once, under the advisory lock.
func TestMigrationsRunOnceUnderConcurrentOpeners(t *testing.T) {
	t.Parallel()
	admin := adminPool(t)
	schema := testSchema(t, admin)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(context.Background(), testDSN(), WithSchema(schema))
			if err != nil {
				errs <- err
				return
			}
			s.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var v int
	if err := admin.QueryRow(context.Background(), "SELECT version FROM "+schema+".schema_version").Scan(&v); err != nil || v != SchemaVersion() {
		t.Fatalf("version %d %v", v, err)
	}
}

func TestNewerSchemaIsRefused(t *testing.T) {
	t.Parallel()
	refusedAfter(t, "UPDATE {schema}.schema_version SET version = 99", "version 99")
}

// refusedAfter opens a schema, changes it with stmt ({schema} is its name)
// as a newer build would, and checks that opening it again is refused
// with ErrNewerSchema and want in the message.
func refusedAfter(t *testing.T, stmt, want string) {
	t.Helper()
	admin := adminPool(t)
	schema := testSchema(t, admin)
	s, err := Open(context.Background(), testDSN(), WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := admin.Exec(context.Background(), strings.ReplaceAll(stmt, "{schema}", schema)); err != nil {
		t.Fatal(err)
	}
	_, err = Open(context.Background(), testDSN(), WithSchema(schema))
	if !errors.Is(err, store.ErrNewerSchema) || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v", err)
	}
}

// TestUnreachableDatabaseIsAClearError: no hang, the host named.
func TestUnreachableDatabaseIsAClearError(t *testing.T) {
	t.Parallel()
	start := time.Now()
	_, err := Open(context.Background(), "postgres://postgres@127.0.0.1:1/test?sslmode=disable", WithConnectTimeout(2*time.Second))
	if err == nil || !strings.Contains(err.Error(), "cannot reach the database at 127.0.0.1:1/test") {
		t.Fatalf("got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
	if _, err := Open(context.Background(), "postgres://%zz", WithSchema("x")); err == nil || !strings.Contains(err.Error(), "bad database URL") {
		t.Fatalf("bad URL: %v", err)
	}
}

// TestNewUsesAGivenPoolAndLeavesItOpen.
func TestNewUsesAGivenPoolAndLeavesItOpen(t *testing.T) {
	t.Parallel()
	admin := adminPool(t)
	s, err := New(context.Background(), admin, WithSchema(testSchema(t, admin)))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := admin.Ping(context.Background()); err != nil {
		t.Fatalf("the given pool was closed: %v", err)
	}
	if _, err := New(context.Background(), nil); !errors.Is(err, ErrNilPool) {
		t.Fatalf("nil pool: %v", err)
	}
}

// A schema whose rows are in a newer data format than this build's is
// refused with both formats named.
func TestNewerDataFormatIsRefused(t *testing.T) {
	t.Parallel()
	refusedAfter(t, "UPDATE {schema}.meta SET value = '3' WHERE key = 'data_format'", "data format 3, this build reads up to 2")
}

// TestTheFireRecordsOfAnEarlierSchemaLeaveEachScheduleItsLastFire: a
// schema of version 15 (a fire record a row) migrated to the batches'
// keeps each schedule's last recorded fire in its lease, where the next
// owner of the lease continues the plan from.
func TestTheFireRecordsOfAnEarlierSchemaLeaveEachScheduleItsLastFire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, schema, tx := schemaAt(t, 15)
	last := time.Date(2026, 11, 28, 10, 0, 3, 0, time.UTC)
	if _, err := tx.Exec(ctx, "INSERT INTO "+schema+".leases (schedule, owner, term, expires_at) VALUES ('a', 'i1', 2, now()), ('b', '', 1, now()), ('never', '', 0, '-infinity')"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+schema+".fires (schedule, planned, term, owner) VALUES ('a', $1::timestamptz - interval '2 seconds', 1, 'i0'), ('a', $1, 2, 'i1'), ('b', $1::timestamptz - interval '1 hour', 1, 'i1')", last); err != nil {
		t.Fatal(err)
	}
	migrateFrom(t, tx, schema)
	got := leaseLasts(t, admin, schema)
	if !got["a"].Equal(last) || !got["b"].Equal(last.Add(-time.Hour)) || !got["never"].IsZero() {
		t.Fatalf("last fires after the migration: a %v, b %v, never %v; want %s, %s, none", got["a"], got["b"], got["never"], last, last.Add(-time.Hour))
	}
}

// migrateFrom commits tx (a schema made by schemaAt, with its rows) and
// migrates the schema as Open does.
func migrateFrom(t *testing.T, tx pgx.Tx, schema string) {
	t.Helper()
	ctx := context.Background()
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, testDSN(), WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// schemaAt begins a transaction that makes a schema of its own as the
// first version migrations left it, and returns the pool, the schema and
// the transaction; the caller adds rows, then migrateFrom.
func schemaAt(t *testing.T, version int) (*pgxpool.Pool, string, pgx.Tx) {
	t.Helper()
	ctx := context.Background()
	admin := adminPool(t)
	schema := testSchema(t, admin)
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	for _, q := range []string{"CREATE SCHEMA " + schema, "CREATE TABLE " + schema + ".schema_version (version INT NOT NULL)", fmt.Sprintf("INSERT INTO %s.schema_version VALUES (%d)", schema, version)} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range ms[:version] {
		if _, err := tx.Exec(ctx, strings.ReplaceAll(m, "{{schema}}", schema)); err != nil {
			t.Fatal(err)
		}
	}
	return admin, schema, tx
}

// TestLeasesOfAnEarlierSchemaEndWithTheirOwnersRow: a schema of version
// 17 (each lease its own expiry) migrated to leases that live by their
// owner's row: an instance of the earlier release, which cannot renew in
// the new form, has its leases end at once (or when they ended), a lease
// given back keeps the instant it was given back as its last fire, and
// one never owned has none.
func TestLeasesOfAnEarlierSchemaEndWithTheirOwnersRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, schema, tx := schemaAt(t, 17)
	given := time.Date(2026, 11, 28, 10, 0, 3, 0, time.UTC)
	ended := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	for _, q := range []string{
		"INSERT INTO " + schema + ".instances (id, host, version, started_at, heartbeat_at) VALUES ('live', 'h', '1', now(), now()), ('dead', 'h', '1', now(), now())",
		"INSERT INTO " + schema + ".leases (schedule, owner, term, expires_at) VALUES ('a', 'live', 2, now() + interval '1 hour'), ('d', 'dead', 1, '" + ended.Format(time.RFC3339) + "'), ('b', '', 3, '" + given.Format(time.RFC3339) + "'), ('never', '', 0, '-infinity')",
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	migrateFrom(t, tx, schema)
	until := map[string]time.Time{}
	rows, err := admin.Query(ctx, "SELECT id, leases_until FROM "+schema+".instances WHERE leases_until <= now()")
	if err != nil {
		t.Fatal(err)
	}
	var id string
	var at time.Time
	if _, err := pgx.ForEachRow(rows, []any{&id, &at}, func() error { until[id] = at; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, ok := until["live"]; !ok || !until["dead"].Equal(ended) {
		t.Fatalf("instances whose leases ended after the migration: %v; want live (at the migration) and dead at %s", until, ended)
	}
	last := leaseLasts(t, admin, schema)
	if !last["b"].Equal(given) || !last["never"].IsZero() || !last["a"].IsZero() {
		t.Fatalf("last fires after the migration: %v; want b's at %s, none for never and a", last, given)
	}
}

// leaseLasts is each lease's last fire (the zero time for none).
func leaseLasts(t *testing.T, admin *pgxpool.Pool, schema string) map[string]time.Time {
	t.Helper()
	rows, err := admin.Query(context.Background(), "SELECT schedule, last_fire FROM "+schema+".leases")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Time{}
	var name string
	var at *time.Time
	if _, err := pgx.ForEachRow(rows, []any{&name, &at}, func() error {
		if at != nil {
			out[name] = *at
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPruneSharedPrunesOnceForTheInstancesWithTheSameSchedules: of the
// stores sharing a schema, the first to prune by age does it for those
// with the same schedules until the interval passes; another set of
// schedules claims its own.
func TestPruneSharedPrunesOnceForTheInstancesWithTheSameSchedules(t *testing.T) {
	t.Parallel()
	admin := adminPool(t)
	schema := testSchema(t, admin)
	ctx := context.Background()
	open := func() *Store {
		s, err := Open(ctx, testDSN(), WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	today := time.Now().UTC().Truncate(24 * time.Hour)
	old := today.AddDate(0, 0, -40)
	rules := func(names ...string) []store.Retention {
		var out []store.Retention
		for _, n := range names {
			out = append(out, store.Retention{Schedule: n, Before: today.AddDate(0, 0, -30), KeepFailures: 10})
		}
		return out
	}
	// An old day of each schedule, to be pruned.
	plant := func(names ...string) {
		t.Helper()
		var days []store.Day
		for _, n := range names {
			days = append(days, store.Day{Schedule: n, Day: old, Data: []byte{1}})
		}
		if err := a.SaveStats(ctx, store.StatsBatch{Days: days}); err != nil {
			t.Fatal(err)
		}
	}
	left := func(name string) bool {
		t.Helper()
		days, err := a.LoadDays(ctx, name, old)
		if err != nil {
			t.Fatal(err)
		}
		return len(days) > 0
	}
	prune := func(s *Store, names ...string) bool {
		t.Helper()
		pruned, err := s.PruneShared(ctx, rules(names...), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return pruned
	}
	plant("x", "y", "z")
	if !prune(a, "x", "y") || left("x") || left("y") || !left("z") {
		t.Fatalf("the first prune of x and y: x %v y %v z %v left", left("x"), left("y"), left("z"))
	}
	plant("x")
	if prune(b, "y", "x") || !left("x") {
		t.Fatal("the second instance with the same schedules pruned within the interval")
	}
	if !prune(b, "x", "y", "z") || left("x") || left("z") {
		t.Fatal("another set of schedules did not claim its own prune")
	}
	// The interval over, the next instance to ask prunes.
	if _, err := admin.Exec(ctx, "UPDATE "+schema+".meta SET value = (extract(epoch FROM now()) - 3601)::text WHERE key LIKE 'retention pruned %'"); err != nil {
		t.Fatal(err)
	}
	plant("y")
	if !prune(b, "x", "y") || left("y") {
		t.Fatal("no prune once the interval passed")
	}
	// A prune that fails leaves the claim to the next instance.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := admin.Exec(ctx, "UPDATE "+schema+".meta SET value = (extract(epoch FROM now()) - 3601)::text WHERE key LIKE 'retention pruned %'"); err != nil {
		t.Fatal(err)
	}
	if pruned, err := a.PruneShared(cctx, rules("x", "y"), time.Hour); err == nil || pruned {
		t.Fatalf("a prune on a cancelled context: %v %v", pruned, err)
	}
	plant("x")
	if !prune(b, "x", "y") || left("x") {
		t.Fatal("a failed prune kept the claim")
	}
	// A claim a day old, of a set no instance has now, goes at the next
	// prune.
	if _, err := admin.Exec(ctx, "UPDATE "+schema+".meta SET value = (extract(epoch FROM now()) - 90000)::text WHERE key LIKE 'retention pruned %'"); err != nil {
		t.Fatal(err)
	}
	if !prune(a, "x", "y") {
		t.Fatal("no prune a day after the last")
	}
	var claims int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM "+schema+".meta WHERE key LIKE 'retention pruned %'").Scan(&claims); err != nil || claims != 1 {
		t.Fatalf("%d claims left (%v), want the one just taken", claims, err)
	}
}

// TestAPageOfRoundsRewrittenInItsSlotIsWrittenBesideTheOld: a slot
// written again a lap later changes no indexed column, so PostgreSQL
// writes the new version on the old one's page without index entries (a
// HOT update): every page a flush writes used to add an entry to an index
// by start.
func TestAPageOfRoundsRewrittenInItsSlotIsWrittenBesideTheOld(t *testing.T) {
	t.Parallel()
	admin := adminPool(t)
	schema := testSchema(t, admin)
	ctx := context.Background()
	s, err := Open(ctx, testDSN(), WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	const n = 50
	for lap := range 3 {
		var rs []store.Round
		for i := range n {
			seq := int64(lap*5 + 5)
			rs = append(rs, store.Round{Schedule: fmt.Sprintf("s%02d", i), Slot: 0, First: seq - 4, Seq: seq, Start: start.Add(time.Duration(lap) * time.Minute), Data: []byte{byte(lap)}})
		}
		if err := s.SaveStats(ctx, store.StatsBatch{Rounds: rs}); err != nil {
			t.Fatal(err)
		}
		// Into the table, as a page leaving the log is.
		if err := s.tx(ctx, "fold", func(tx pgx.Tx) error {
			s.logMu.Lock()
			defer s.logMu.Unlock()
			return s.fold(ctx, tx, "", s.log.flushes)
		}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close() // its connections report their statistics as they end
	var indexes []string
	rows, err := admin.Query(ctx, "SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND tablename = 'rounds' ORDER BY 1", schema)
	if err != nil {
		t.Fatal(err)
	}
	if indexes, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	var upd, hot int64
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := admin.QueryRow(ctx, "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'rounds'", schema).Scan(&upd, &hot); err != nil {
			t.Fatal(err)
		}
		if upd >= 2*n || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The room a page keeps (fillfactor 70) takes a rewrite of 3 rows
	// in 7 without pruning the old versions; the rest of the rewrites are
	// HOT once the page is pruned, which a snapshot of another test's
	// transaction may hold back. An index by start made none HOT.
	if upd < 2*n || hot*3 < upd {
		t.Fatalf("rounds: %d of %d rewrites were HOT (indexes %v), want at least a third", hot, upd, indexes)
	}
}
