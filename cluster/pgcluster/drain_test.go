package pgcluster_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fom-go/fom/cluster/pgcluster"
	"github.com/fom-go/fom/internal/pgtest"
)

// TestADrainGivesBackTheLeasesOfImminentFires: a graceful stop gives every
// lease back at once, those whose fire is about to be recorded too. The
// instance stops its schedules next, so a lease kept for its imminent fire
// would have that fire run nowhere until the lease came back, late.
func TestADrainGivesBackTheLeasesOfImminentFires(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	names := numbered(20)
	a := coordinator(t, schema, "a", nil, pgcluster.Options{LeaseTTL: 30 * time.Second}, names...)
	start(t, a)
	if a.Owned() != len(names) {
		t.Fatalf("a holds %d leases, want %d", a.Owned(), len(names))
	}
	// Due within handoverLead: a lease given back to rebalance keeps these
	// until they ran.
	fire := time.Now().Add(150 * time.Millisecond).UTC()
	for _, s := range names {
		a.Announce(s, fire)
	}
	a.Drain(ctx)
	if held := leaseOwners(t, pool, schema)["a"]; held != 0 {
		t.Fatalf("after the drain, a still holds %d leases in the database", held)
	}
	if ok, err := a.Admit(ctx, names[0], fire); ok || err != nil {
		t.Fatalf("a fire of a lease given back at the drain was admitted: %v, %v", ok, err)
	}
}

// TestARebalanceKeepsTheLeasesOfFiresTooCloseToHandOver: an instance
// giving leases back to rebalance (another joined) keeps those whose next
// fire is too close for the other to take the lease and record the fire
// in time (half a second away here: twice RecordAhead would have given
// them), at a second release before that fire too, runs the fire, and
// gives them back right after it.
func TestARebalanceKeepsTheLeasesOfFiresTooCloseToHandOver(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	names := numbered(20)
	o := pgcluster.Options{Channel: "fom_keep_" + schema, Notified: func(string) {}, LeaseTTL: 30 * time.Second}
	a := coordinator(t, schema, "a", nil, o, names...)
	start(t, a)
	a.Ready()
	waitListening(t, a)
	fire := time.Now().Add(500 * time.Millisecond).UTC()
	for _, s := range names {
		a.Announce(s, fire)
	}
	b := coordinator(t, schema, "b", nil, o, names...)
	start(t, b)
	waitListening(t, b)
	b.Ready() // a rebalances at once
	// Another release before the fire (another instance ready, say)
	// keeps them again.
	time.Sleep(100 * time.Millisecond)
	a.Kick()
	time.Sleep(time.Until(fire.Add(-30 * time.Millisecond)))
	if held := leaseOwners(t, pool, schema)["a"]; held != len(names) {
		t.Fatalf("a holds %d of %d leases just before their fire: it gave back leases whose fire was too close to hand over", held, len(names))
	}
	time.Sleep(time.Until(fire))
	for _, s := range names {
		if ok, err := a.Admit(ctx, s, fire); !ok || err != nil {
			t.Fatalf("a's fire of %s, kept for it, was not admitted: %v, %v", s, ok, err)
		}
	}
	waitOwned(t, map[string]*pgcluster.Coordinator{"a": a, "b": b}, map[string]int{"a": 10, "b": 10})
}

// TestLeasesGivenBackAreTakenWithoutARenewal: an instance told of leases
// given back takes its share at once, by the live count and the
// acquisition alone: its own leases are not renewed for it (a renewal
// reads every lease it holds, and the fires of the leases moving would
// wait for it).
func TestLeasesGivenBackAreTakenWithoutARenewal(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	names := numbered(20)
	o := pgcluster.Options{Channel: "fom_free_" + schema, Notified: func(string) {}, LeaseTTL: 30 * time.Second}
	a := coordinator(t, schema, "a", nil, o, names...)
	start(t, a)
	a.Ready()
	waitListening(t, a)
	b := coordinator(t, schema, "b", nil, o, names...)
	start(t, b)
	waitListening(t, b)
	b.Ready()
	waitOwned(t, map[string]*pgcluster.Coordinator{"a": a, "b": b}, map[string]int{"a": 10, "b": 10})
	before := leaseExpiries(t, pool, schema, "b")
	a.Drain(ctx)
	waitOwned(t, map[string]*pgcluster.Coordinator{"a": a, "b": b}, map[string]int{"b": 20})
	after := leaseExpiries(t, pool, schema, "b")
	for s, at := range before {
		if !after[s].Equal(at) {
			t.Fatalf("b's lease on %s was renewed (expiring at %s, then %s) to take the leases a gave back", s, at, after[s])
		}
	}
}

// waitListening waits for c to hear notifications.
func waitListening(t *testing.T, c *pgcluster.Coordinator) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !c.Listening(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s is not listening after 10s", c.ID())
		}
	}
}

// waitOwned waits, up to 3 s, for each instance to hold the leases want
// says (none when it is not named).
func waitOwned(t *testing.T, cs map[string]*pgcluster.Coordinator, want map[string]int) {
	t.Helper()
	began := time.Now()
	for {
		got := map[string]int{}
		for id, c := range cs {
			if n := c.Owned(); n > 0 {
				got[id] = n
			}
		}
		if maps.Equal(got, want) {
			return
		}
		if time.Since(began) > 3*time.Second {
			t.Fatalf("after %s the instances hold %v leases, want %v", time.Since(began).Round(time.Millisecond), got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// leaseOwners counts the leases in the database by owner.
func leaseOwners(t *testing.T, pool *pgxpool.Pool, schema string) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT owner, count(*) FROM "+pgx.Identifier{schema}.Sanitize()+".leases GROUP BY owner")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	var owner string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&owner, &n}, func() error { out[owner] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// leaseExpiries is when each lease of owner expires (its owner's leases
// end), by schedule.
func leaseExpiries(t *testing.T, pool *pgxpool.Pool, schema, owner string) map[string]time.Time {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT l.schedule, i.leases_until FROM "+pgx.Identifier{schema}.Sanitize()+".leases l JOIN "+pgx.Identifier{schema}.Sanitize()+".instances i ON i.id = l.owner WHERE l.owner = $1", owner)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Time{}
	var s string
	var at time.Time
	if _, err := pgx.ForEachRow(rows, []any{&s, &at}, func() error { out[s] = at; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestATakeMakesUpForLeasesAnotherTookFirst: an instance taking its share
// of free leases while another takes from the same ones (a rebalance's
// takers, told at once, against one starting or renewing) takes its whole
// share where enough are free: the leases the other locked first are made
// up for from the rest, not left free until a renewal, past their fires.
func TestATakeMakesUpForLeasesAnotherTookFirst(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	names := numbered(40)
	o := pgcluster.Options{LeaseTTL: 30 * time.Second}
	a := coordinator(t, schema, "a", nil, o, names...)
	start(t, a) // live, holding none in the database once they are freed below
	leases := pgx.Identifier{schema, "leases"}.Sanitize()
	if _, err := pool.Exec(ctx, "UPDATE "+leases+" SET owner = ''"); err != nil {
		t.Fatal(err)
	}
	// Another taker holds half of them, locked, while b takes its share
	// (half: a and b live).
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, "SELECT schedule FROM "+leases+" ORDER BY schedule LIMIT 20 FOR UPDATE")
	if err != nil {
		t.Fatal(err)
	}
	locked, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	b := coordinator(t, schema, "b", nil, o, names...)
	start(t, b)
	if got := b.Owned(); got != len(names)-len(locked) {
		t.Fatalf("b took %d leases, want %d: the %d free and unlocked ones (its share)", got, len(names)-len(locked), len(names)-len(locked))
	}
	for _, s := range locked {
		if b.Holds(s) {
			t.Fatalf("b holds %s, locked by another taker", s)
		}
	}
}
