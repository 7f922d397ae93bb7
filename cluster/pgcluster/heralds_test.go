package pgcluster_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fom-go/fom/cluster/pgcluster"
	"github.com/fom-go/fom/internal/pgtest"
	"github.com/fom-go/fom/schedule"
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

// TestAScheduleGateReachesItsHeraldAndFollowsItsReplacement: fires
// announced and admitted through each schedule's own gate are recorded
// ahead by one statement and admitted without one; after a stop and a
// start (the heralds taken out with the leases), fires announced through
// the coordinator are found through the gates all the same, and a gate
// asked for another schedule answers for that one.
func TestAScheduleGateReachesItsHeraldAndFollowsItsReplacement(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	names := numbered(20) // a slot of 20: recorded ahead (16 or more)
	a := coordinator(t, schema, "a", nil, pgcluster.Options{LeaseTTL: 6 * time.Second}, names...)
	start(t, a)
	gates := map[string]schedule.Gate{}
	for _, n := range names {
		gates[n] = a.GateOf(n)
	}
	// announceAndAdmit announces a fire at each name through announce,
	// and admits it through each gate: one statement, before the fire.
	announceAndAdmit := func(what string, announce func(name string, at time.Time)) {
		t.Helper()
		at := time.Now().Add(600 * time.Millisecond).Truncate(100 * time.Millisecond).UTC()
		before := a.Counters()
		for _, n := range names {
			announce(n, at)
		}
		time.Sleep(time.Until(at))
		for _, n := range names {
			if ok, err := gates[n].Admit(ctx, n, at); !ok || err != nil {
				t.Fatalf("%s: %s at its time, through its gate: admitted %v, %v", what, n, ok, err)
			}
		}
		if after := a.Counters(); after.FireStatements-before.FireStatements != 1 || after.Fires != before.Fires {
			t.Fatalf("%s: %+v then %+v, want one statement for the slot, none when due", what, before, after)
		}
		if ok, err := gates[names[0]].Admit(ctx, names[0], at); ok || err != nil {
			t.Fatalf("%s: %s admitted twice through its gate: %v, %v", what, names[0], ok, err)
		}
	}
	announceAndAdmit("announced through the gates", func(n string, at time.Time) { gates[n].(schedule.Announcer).Announce(n, at) })
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	start(t, a)
	if a.Owned() != len(names) {
		t.Fatalf("a holds %d leases after its restart, want %d", a.Owned(), len(names))
	}
	announceAndAdmit("announced through the coordinator", a.Announce)
	// Asked for another schedule, a gate is the coordinator's.
	other := time.Now().Add(time.Second).Truncate(time.Second).UTC()
	if !gates[names[0]].(schedule.Holder).Holds(names[1]) {
		t.Fatalf("%s's gate says %s is not held", names[0], names[1])
	}
	time.Sleep(time.Until(other))
	if ok, err := gates[names[0]].Admit(ctx, names[1], other); !ok || err != nil {
		t.Fatalf("%s's gate asked for %s: admitted %v, %v", names[0], names[1], ok, err)
	}
}
