package pgcluster_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fom-go/fom/cluster/pgcluster"
	"github.com/fom-go/fom/internal/pgtest"
)

// TestFiresAnnouncedAreRecordedAheadAndGivenBackUnrun: 40 schedules
// announce a fire due 600 ms ahead; one statement records them before
// it, and Admit at the fire answers without one. Then 40 more fires are
// announced and recorded ahead, and the leases are given back before
// their time (the instance stops): their records are deleted, so the
// next owner is told the last fire that ran, not one that never did. A
// slot of too few fires is recorded when due.
func TestFiresAnnouncedAreRecordedAheadAndGivenBackUnrun(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	names := numbered(80) // a batch of 80: the lease check by one join (64 or more)
	a := coordinator(t, schema, "a", nil, pgcluster.Options{LeaseTTL: 6 * time.Second}, append(names, "lone")...)
	start(t, a)
	if a.Owned() != 81 {
		t.Fatalf("a holds %d leases, want 81", a.Owned())
	}
	first := time.Now().Add(600 * time.Millisecond).Truncate(100 * time.Millisecond).UTC()
	before := a.Counters()
	for _, n := range names {
		a.Announce(n, first)
	}
	a.Announce("lone", first.Add(time.Second))
	time.Sleep(time.Until(first))
	mid := a.Counters()
	if d := mid.FireStatements - before.FireStatements; d != 1 {
		t.Fatalf("%d fire-record statements before the fires were due, want 1", d)
	}
	for _, n := range names {
		if ok, err := a.Admit(ctx, n, first); !ok || err != nil {
			t.Fatalf("%s at its time: admitted %v, %v", n, ok, err)
		}
	}
	if after := a.Counters(); after.FireStatements != mid.FireStatements || after.Fires != mid.Fires {
		t.Fatalf("admitting fires recorded ahead sent statements: %+v then %+v", mid, after)
	}
	// The lone schedule's slot held one fire: recorded when due.
	time.Sleep(time.Until(first.Add(time.Second)))
	if ok, err := a.Admit(ctx, "lone", first.Add(time.Second)); !ok || err != nil {
		t.Fatalf("lone at its time: admitted %v, %v", ok, err)
	}
	if c := a.Counters(); c.Fires != mid.Fires+1 {
		t.Fatalf("the lone fire was not recorded when due: %+v", c)
	}
	// A fire admitted is not admitted again.
	if ok, err := a.Admit(ctx, names[0], first); ok || err != nil {
		t.Fatalf("%s admitted twice at %s: %v, %v", names[0], first, ok, err)
	}

	// Recorded ahead, then given back before their time.
	second := time.Now().Add(time.Second).Truncate(100 * time.Millisecond).UTC()
	for _, n := range names {
		a.Announce(n, second)
	}
	time.Sleep(time.Until(second.Add(-50 * time.Millisecond))) // recorded by now
	var recorded int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".fire_records WHERE planned = $1", second).Scan(&recorded); err != nil || recorded != 80 {
		t.Fatalf("%d fires recorded ahead (%v), want 80", recorded, err)
	}
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	last := map[string]time.Time{}
	b := coordinator(t, schema, "b", nil, pgcluster.Options{LeaseTTL: 6 * time.Second, Acquired: func(s string, at time.Time) {
		mu.Lock()
		last[s] = at
		mu.Unlock()
	}}, append(names, "lone")...)
	start(t, b)
	mu.Lock()
	defer mu.Unlock()
	for _, n := range names {
		if !last[n].Equal(first) {
			t.Errorf("%s taken over from %s, want %s: the fire recorded ahead and not run was kept", n, last[n], first)
		}
	}
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".fire_records WHERE planned = $1", second).Scan(&recorded); err != nil || recorded != 0 {
		t.Fatalf("%d records of fires given back unrun (%v), want 0", recorded, err)
	}
}
