package pgcluster_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fom-go/fom/cluster/pgcluster"
	"github.com/fom-go/fom/internal/pgtest"
)

// TestATakerReadsTheBatchBeingRecordedWhenItTakesTheLease: a batch of
// fires in flight when its lease expires (it checked the lease before the
// expiry, and commits after the taker's statements began) is read by the
// taker, which waits on the owner's row the batch holds: the plan resumes
// after that fire, not before it, where it would run it a second time.
func TestATakerReadsTheBatchBeingRecordedWhenItTakesTheLease(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	a := coordinator(t, schema, "a", nil, pgcluster.Options{LeaseTTL: time.Minute}, "s")
	start(t, a)
	fire := time.Now().Truncate(time.Second).UTC()
	// a's batch, as recordOnce sends it: the owner's row locked, then the
	// fire written; not committed yet.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+schema+".instances WHERE id = 'a' FOR KEY SHARE"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+schema+".fire_batches (owner, batch, schedules, planned) VALUES ('a', 1, '{s}', ARRAY[$1::timestamptz])", fire); err != nil {
		t.Fatal(err)
	}
	a.Abandon()
	if _, err := pool.Exec(ctx, "UPDATE "+schema+".instances SET leases_until = now() WHERE id = 'a'"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var told time.Time
	b := coordinator(t, schema, "b", nil, pgcluster.Options{LeaseTTL: time.Minute, Acquired: func(_ string, at time.Time) {
		mu.Lock()
		told = at
		mu.Unlock()
	}}, "s")
	started := make(chan error, 1)
	go func() { started <- b.Start(ctx) }()
	t.Cleanup(func() { b.Stop(context.Background()) })
	// b's acquisition waits on a's row: the batch is committed then.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var waiting int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND strpos(query, $1) > 0 AND strpos(query, 'instances') > 0", schema).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("b's acquisition never waited on a's batch")
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if b.Owned() != 1 {
		t.Fatalf("b holds %d leases, want 1", b.Owned())
	}
	mu.Lock()
	defer mu.Unlock()
	if !told.Equal(fire) {
		t.Fatalf("b resumes from %s, want a's fire recorded as b took the lease (%s)", told, fire)
	}
}

// TestARenewalFoldsTheFiresRunIntoTheLeases: a renewal folds the fires
// recorded since the last one into the leases' last fire, but not a batch
// of fires recorded ahead while one of them waits to run; given back at
// stop, the fires not run are taken out of that batch, and each lease
// keeps the last fire that ran: the next owner runs the others.
func TestARenewalFoldsTheFiresRunIntoTheLeases(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	names := numbered(32) // a slot of 32: recorded ahead (16 or more)
	a := coordinator(t, schema, "a", nil, pgcluster.Options{LeaseTTL: 30 * time.Second, RecordAhead: time.Second}, names...)
	start(t, a)
	first := time.Now().Truncate(time.Second).Add(-time.Second).UTC()
	admitTogether(a, first, names...)
	second := time.Now().Truncate(time.Second).Add(3 * time.Second).UTC()
	for _, n := range names {
		a.Announce(n, second)
	}
	// Recorded ahead, in one batch.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".fire_records WHERE planned = $1", second).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == len(names) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d fires recorded ahead", n, len(names))
		}
	}
	// Half of them run.
	ran, unrun := names[:16], names[16:]
	for _, n := range ran {
		if ok, err := a.Admit(ctx, n, second); !ok || err != nil {
			t.Fatalf("%s: admitted %v, %v", n, ok, err)
		}
	}
	// A renewal: the first fires' batch is folded in, the one recorded
	// ahead is not while half of it waits to run.
	renewAndWaitFolded(t, a, pool, schema, first)
	got := leaseLastFires(t, pool, schema)
	for _, n := range names {
		if !got[n].Equal(first) {
			t.Errorf("%s: last fire %s after the renewal, want %s", n, got[n], first)
		}
	}
	stopAndCheckLastFires(t, a, pool, schema, first, second, ran, unrun)
}

// TestAFireWithdrawnIsNotItsLeasesLast: fires admitted and then withdrawn
// (their schedule stopped before the round), recorded ahead or when due,
// are kept out of the renewal's fold and taken out of the records when
// the leases are given back: each lease's last fire is the one before,
// and the next owner runs them.
func TestAFireWithdrawnIsNotItsLeasesLast(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	names := numbered(32) // a slot of 32: recorded ahead (16 or more)
	a := coordinator(t, schema, "a", nil, pgcluster.Options{LeaseTTL: 30 * time.Second, RecordAhead: time.Second}, append(names, "due")...)
	start(t, a)
	first := time.Now().Truncate(time.Second).Add(-time.Second).UTC()
	admitTogether(a, first, append(names, "due")...)
	second := time.Now().Truncate(time.Second).Add(2 * time.Second).UTC()
	for _, n := range names {
		a.Announce(n, second)
	}
	time.Sleep(time.Until(second))
	for _, n := range append(names, "due") { // "due" was not announced: recorded now
		if ok, err := a.Admit(ctx, n, second); !ok || err != nil {
			t.Fatalf("%s: admitted %v, %v", n, ok, err)
		}
	}
	ran, withdrawn := names[:16], append(names[16:], "due")
	for _, n := range withdrawn {
		a.Withdraw(n, second)
	}
	// A renewal folds what ran in, not what was withdrawn.
	renewAndWaitFolded(t, a, pool, schema, first)
	stopAndCheckLastFires(t, a, pool, schema, first, second, ran, withdrawn)
}

// leaseLastFires reads every lease's last fire.
func leaseLastFires(t *testing.T, pool *pgxpool.Pool, schema string) map[string]time.Time {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT schedule, last_fire FROM "+schema+".leases")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Time{}
	var s string
	var p *time.Time
	if _, err := pgx.ForEachRow(rows, []any{&s, &p}, func() error {
		if p != nil {
			out[s] = *p
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// renewAndWaitFolded asks c for renewals (one in a few folds) until the
// fires at first are folded into the leases.
func renewAndWaitFolded(t *testing.T, c *pgcluster.Coordinator, pool *pgxpool.Pool, schema string, first time.Time) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c.Kick()
		var left int
		if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+schema+".fire_batches WHERE NOT compacted AND $1 = ANY(planned)", first).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no renewal folded the first fires in")
		}
	}
}

// stopAndCheckLastFires stops c and checks the leases it gave back: the
// last fire of those in ran is second, of those in unrun (whose fires at
// second did not run) first; only ran's fires at second stay recorded.
func stopAndCheckLastFires(t *testing.T, c *pgcluster.Coordinator, pool *pgxpool.Pool, schema string, first, second time.Time, ran, unrun []string) {
	t.Helper()
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	last := leaseLastFires(t, pool, schema)
	for _, n := range ran {
		if !last[n].Equal(second) {
			t.Errorf("%s ran at %s: last fire %s after the stop", n, second, last[n])
		}
	}
	for _, n := range unrun {
		if !last[n].Equal(first) {
			t.Errorf("%s did not run at %s: last fire %s after the stop, want %s", n, second, last[n], first)
		}
	}
	var recorded int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+schema+".fire_records WHERE planned = $1", second).Scan(&recorded); err != nil || recorded != len(ran) {
		t.Fatalf("%d records of the fires at %s (%v), want the %d that ran", recorded, second, err, len(ran))
	}
}

// TestAWithdrawnFireDoesNotHoldItsLeaseBack: a schedule whose fire was
// admitted and then withdrawn (stopped by an operator in between) and
// that this instance no longer wants gives its lease back at the next
// renewal: the withdrawn fire, past, is not one about to run.
func TestAWithdrawnFireDoesNotHoldItsLeaseBack(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	var stopped sync.Map
	wants := func(names []string) []string {
		var out []string
		for _, n := range names {
			if _, ok := stopped.Load(n); !ok {
				out = append(out, n)
			}
		}
		return out
	}
	a := coordinator(t, schema, "a", nil, pgcluster.Options{LeaseTTL: 30 * time.Second, Wants: wants}, "x")
	start(t, a)
	fire := time.Now().Truncate(time.Second).UTC()
	if ok, err := a.Admit(ctx, "x", fire); !ok || err != nil {
		t.Fatalf("admitted %v, %v", ok, err)
	}
	a.Withdraw("x", fire)
	stopped.Store("x", true)
	a.Kick()
	for deadline := time.Now().Add(3 * time.Second); a.Owned() > 0 || leaseOwners(t, pool, schema)["a"] > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the lease of a schedule no longer wanted is held for its withdrawn fire")
		}
	}
	// Never fired elsewhere, it resumes from the instant it was given back.
	if last := leaseLastFires(t, pool, schema)["x"]; !last.After(fire) {
		t.Fatalf("the lease given back says its last fire is %s, the withdrawn one's %s or before", last, fire)
	}
}

// numbered is n schedule names, s00, s01, ...
func numbered(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("s%02d", i)
	}
	return names
}
