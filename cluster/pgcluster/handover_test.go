package pgcluster_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fom-go/fom/cluster/pgcluster"
	"github.com/fom-go/fom/internal/pgtest"
)

// told collects what an instance's Acquired was told: each schedule taken
// and the last fire it resumes from.
type told struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (t *told) acquired(s string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == nil {
		t.last = map[string]time.Time{}
	}
	t.last[s] = at
}

// get is what s was told it resumes from, waiting up to 5 s for it: a
// lease counts as held before its schedule is told (Acquired is called
// once the coordinator's lock is released).
func (t *told) get(s string) (time.Time, bool) {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		t.mu.Lock()
		at, ok := t.last[s]
		t.mu.Unlock()
		if ok || time.Now().After(deadline) {
			return at, ok
		}
	}
}

// declare records that c runs each of names.
func declare(t *testing.T, c *pgcluster.Coordinator, names ...string) {
	t.Helper()
	d := map[string]map[string]string{}
	for _, n := range names {
		d[n] = map[string]string{"cron": "* * * * * *"}
	}
	if err := c.Declare(context.Background(), d, true); err != nil {
		t.Fatal(err)
	}
}

// admitAll has c admit a fire of each of names, a minute ago, and
// returns its instant.
func admitAll(t *testing.T, c *pgcluster.Coordinator, names []string) time.Time {
	t.Helper()
	last := time.Now().Truncate(time.Second).Add(-time.Minute).UTC()
	for _, s := range names {
		if ok, err := c.Admit(context.Background(), s, last); !ok || err != nil {
			t.Fatalf("%s: admitted %v, %v", s, ok, err)
		}
	}
	return last
}

// leaseRows reads each lease's owner and term, by schedule.
func leaseRows(t *testing.T, pool *pgxpool.Pool, schema string) map[string]struct {
	owner string
	term  int64
} {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT schedule, owner, term FROM "+pgx.Identifier{schema}.Sanitize()+".leases")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]struct {
		owner string
		term  int64
	}{}
	var s, owner string
	var term int64
	if _, err := pgx.ForEachRow(rows, []any{&s, &owner, &term}, func() error {
		out[s] = struct {
			owner string
			term  int64
		}{owner, term}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAGracefulStopHandsEachLeaseToAnInstanceThatDeclaredIt: a drain
// hands each lease, in its own transaction, to a live instance that runs
// the schedule, spread between them, in a new term; a schedule no other
// instance declared is left free. The takers, told, resume each schedule
// from the last fire run by the instance that stopped.
func TestAGracefulStopHandsEachLeaseToAnInstanceThatDeclaredIt(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	names := numbered(24)
	onlyB := names[20:] // c does not run these
	all := append(append([]string(nil), names...), "only-a")
	// Renewals 10 s apart: the leases move by the drain alone.
	o := func(tl *told) pgcluster.Options {
		return pgcluster.Options{Channel: "fom_hand_" + schema, Notified: func(string) {}, LeaseTTL: 30 * time.Second, Acquired: tl.acquired}
	}
	var ta, tb, tc told
	a := coordinator(t, schema, "a", nil, o(&ta), all...)
	declare(t, a, all...)
	start(t, a)
	if a.Owned() != len(all) {
		t.Fatalf("a holds %d leases, want %d", a.Owned(), len(all))
	}
	last := admitAll(t, a, all)
	// b and c join (their heartbeats make them live) without asking for
	// their share: a holds every lease at the drain.
	b := coordinator(t, schema, "b", nil, o(&tb), names...)
	declare(t, b, names...)
	start(t, b)
	waitListening(t, b)
	c := coordinator(t, schema, "c", nil, o(&tc), names[:20]...)
	declare(t, c, names[:20]...)
	start(t, c)
	waitListening(t, c)
	before := leaseRows(t, pool, schema)

	a.Drain(ctx)
	// Handed in a's transaction: no taker's statement is needed for the
	// database to name the new owners.
	after := leaseRows(t, pool, schema)
	count := map[string]int{}
	for _, s := range all {
		l := after[s]
		count[l.owner]++
		switch {
		case s == "only-a":
			if l.owner != "" {
				t.Errorf("%s, which only a declared, went to %q; want it left free", s, l.owner)
			}
		case l.owner != "b" && l.owner != "c":
			t.Errorf("%s is held by %q after the drain, want b or c", s, l.owner)
		case l.term != before[s].term+1:
			t.Errorf("%s handed in term %d, want %d", s, l.term, before[s].term+1)
		}
	}
	for _, s := range onlyB {
		if after[s].owner != "b" {
			t.Errorf("%s, which c does not run, went to %q", s, after[s].owner)
		}
	}
	// 20 run by both, 4 by b alone: b gets 14, c 10.
	if count["b"] != 14 || count["c"] != 10 {
		t.Errorf("handed: b %d, c %d; want 14 and 10", count["b"], count["c"])
	}
	waitOwned(t, map[string]*pgcluster.Coordinator{"a": a, "b": b, "c": c}, map[string]int{"b": count["b"], "c": count["c"]})
	for _, s := range names {
		tl := &tb
		if after[s].owner == "c" {
			tl = &tc
		}
		if at, ok := tl.get(s); !ok || !at.Equal(last) {
			t.Errorf("%s's taker %s was told it resumes from %v (told: %v), want %s", s, after[s].owner, at, ok, last)
		}
	}
	// A fire of the new term is recorded by its new owner.
	next := last.Add(time.Second)
	if ok, err := b.Admit(ctx, onlyB[0], next); !ok || err != nil {
		t.Fatalf("b's fire of %s, handed to it, was not admitted: %v, %v", onlyB[0], ok, err)
	}
}

// TestLeasesHandedUnheardAreTakenAtTheRenewal: an instance that did not
// hear of leases handed to it (it listens to nothing here) finds them at
// its next renewal, and resumes their schedules from their last fires
// then, as when told.
func TestLeasesHandedUnheardAreTakenAtTheRenewal(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	names := numbered(6)
	var ta, tb told
	a := coordinator(t, schema, "a", nil, pgcluster.Options{LeaseTTL: 30 * time.Second, Acquired: ta.acquired}, names...)
	declare(t, a, names...)
	start(t, a)
	last := admitAll(t, a, names)
	// b renews every 500 ms.
	b := coordinator(t, schema, "b", nil, pgcluster.Options{Acquired: tb.acquired}, names...)
	declare(t, b, names...)
	start(t, b)
	a.Drain(ctx)
	if held := leaseOwners(t, pool, schema)["b"]; held != len(names) {
		t.Fatalf("b holds %d leases in the database after a's drain, want %d", held, len(names))
	}
	waitOwned(t, map[string]*pgcluster.Coordinator{"a": a, "b": b}, map[string]int{"b": len(names)})
	for _, s := range names {
		if at, ok := tb.get(s); !ok || !at.Equal(last) {
			t.Errorf("b was told %s resumes from %v (told: %v), want %s", s, at, ok, last)
		}
	}
}
