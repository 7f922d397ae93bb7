package schedule

import (
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fom-go/fom/config"
)

// ids counts the registry's entries, idle ones included.
func (r *Conflicts) ids() int {
	n := 0
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		n += len(s.ids)
		s.mu.Unlock()
	}
	return n
}

func TestConflictsKeepARecurringID(t *testing.T) {
	r := NewConflicts()
	first := r.acquire("import", false)
	r.release(first)
	for i := range 10_000 {
		h := r.acquire("import", false)
		if h != first {
			t.Fatalf("acquire %d made a new entry for a recurring id", i)
		}
		// Other ids come and go meanwhile, in the same shards.
		r.release(r.acquire(fmt.Sprintf("order-%d", i), false))
		r.release(h)
	}
	if r.Running("import") {
		t.Fatal("import still running after its last release")
	}
}

func TestConflictsSweepIdsThatDoNotRecur(t *testing.T) {
	r := NewConflicts()
	held := r.acquire("long", true)
	for i := range 200_000 {
		r.release(r.acquire(fmt.Sprintf("order-%d", i), i%2 == 0))
	}
	// Each shard holds less than twice the ids used between two sweeps
	// (at least sweepMin), never all 200 000.
	if n := r.ids(); n > conflictShards*4*sweepMin {
		t.Fatalf("%d ids kept after 200 000 one-off ids", n)
	}
	if !r.Running("long") {
		t.Fatal("a running id was swept")
	}
	if r.acquire("long", true) != nil {
		t.Fatal("an exclusive acquire of a running id succeeded after sweeps")
	}
	r.release(held)
	if r.Running("long") {
		t.Fatal("long still running after release")
	}
	if h := r.acquire("long", true); h == nil {
		t.Fatal("long cannot be acquired after release")
	}
}

// countingClaims records claims and refuses ids named in refuse.
type countingClaims struct {
	refuse    map[string]bool
	claimed   map[string]int
	unclaimed map[string]int
}

func (c *countingClaims) Claim(id string) bool {
	if c.refuse[id] {
		return false
	}
	c.claimed[id]++
	return true
}

func (c *countingClaims) Unclaim(id string) { c.unclaimed[id]++ }

func TestConflictsClaimOnceForTheLastHolder(t *testing.T) {
	r := NewConflicts()
	cl := &countingClaims{refuse: map[string]bool{"elsewhere": true}, claimed: map[string]int{}, unclaimed: map[string]int{}}
	r.SetClaims(cl)
	if r.acquire("elsewhere", true) != nil || r.Running("elsewhere") {
		t.Fatal("an id claimed elsewhere was acquired")
	}
	a := r.acquire("sync", true)        // claims
	b := r.acquire("sync", false)       // a schedule without enableTaskConflict: no claim
	if r.acquire("sync", true) != nil { // running here
		t.Fatal("second exclusive acquire succeeded")
	}
	r.release(a)
	if cl.unclaimed["sync"] != 0 {
		t.Fatal("unclaimed while another holder still runs the id")
	}
	r.release(b)
	if cl.claimed["sync"] != 1 || cl.unclaimed["sync"] != 1 {
		t.Fatalf("claims %v, unclaims %v", cl.claimed, cl.unclaimed)
	}
	r.release(r.acquire("sync", false)) // no claim was made: none is given back
	if cl.unclaimed["sync"] != 1 {
		t.Fatalf("unclaims %v", cl.unclaimed)
	}
}

// A schedule keeps the entry its task got last time and finds it there
// next time; once its shard swept the idle id, the entry is looked up and
// put back, and conflicts are still seen through it.
func TestConflictsLastEntryIsLookedUpAgainOnceSwept(t *testing.T) {
	r := NewConflicts()
	var last atomic.Pointer[heldID]
	h := r.acquireFrom(&last, "recurring", true)
	r.release(h)
	if again := r.acquireFrom(&last, "recurring", true); again != h || !r.Running("recurring") {
		t.Fatal("the kept entry was not used again")
	} else {
		r.release(again)
	}
	s := r.shard("recurring")
	inShard := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.ids["recurring"] != nil
	}
	for i := 0; inShard(); i++ { // one-off ids of the same shard, until it sweeps "recurring"
		if id := fmt.Sprintf("order-%d", i); r.shard(id) == s {
			r.release(r.acquire(id, false))
		}
	}
	h2 := r.acquireFrom(&last, "recurring", true)
	if h2 != h || h.swept || !r.Running("recurring") || last.Load() != h2 || !inShard() {
		t.Fatalf("after the sweep: %p (swept %p), running %v, in its shard %v", h2, h, r.Running("recurring"), inShard())
	}
	if r.acquireFrom(&last, "recurring", true) != nil || r.acquire("recurring", true) != nil {
		t.Fatal("a second exclusive run of the id was let through")
	}
	r.release(h2)
	if r.Running("recurring") {
		t.Fatal("still running after its release")
	}
}

// Thousands of schedules with a task id of their own, each firing once a
// period: sweeps set off by the ids still coming in during the first
// period drop ids that have not fired yet; each comes back, put back by
// its hint, and moves its shard's next sweep further, so that from the
// third period on no id is swept between two of its fires (before, an id
// was made anew at nearly every fire, its shard sweeping all the time).
func TestConflictsKeepRecurringIdsOfManySchedules(t *testing.T) {
	for _, n := range []int{10_000, 100_000} {
		r := NewConflicts()
		ids := make([]string, n)
		last := make([]atomic.Pointer[heldID], n)
		for i := range ids {
			ids[i] = fmt.Sprintf("job-%d.run", i)
		}
		for period := range 5 {
			swept := 0
			for i, id := range ids {
				if h := last[i].Load(); h != nil && h.swept {
					swept++
				}
				r.release(r.acquireFrom(&last[i], id, true))
			}
			if period >= 2 && swept > 0 {
				t.Fatalf("%d ids: %d were swept between two of their fires in period %d", n, swept, period+1)
			}
		}
		if got := r.ids(); got != n {
			t.Fatalf("%d recurring ids, %d in the registry", n, got)
		}
	}
}

// The task settings a Context keeps in one word come back as set, a
// taskOverTime past the word's range as the longest it holds.
func TestTaskSettingsPacked(t *testing.T) {
	t.Parallel()
	for _, s := range []config.Settings{
		{},
		{TaskOverTime: time.Millisecond, DetectTimeoutOnEachTask: true},
		{TaskOverTime: 90 * time.Minute, EnableTaskConflict: true},
		{TaskOverTime: math.MaxInt64, DetectTimeoutOnEachTask: true, EnableTaskConflict: true},
	} {
		var c Context
		c.tasks.Store(packTaskSettings(&s))
		got := c.taskSettings()
		want := taskSettings{overTime: min(s.TaskOverTime, maxPackedOver), eachTask: s.DetectTimeoutOnEachTask, conflicts: s.EnableTaskConflict}
		if got != want {
			t.Fatalf("%+v packed: %+v, want %+v", s, got, want)
		}
	}
}

// TestConflictsPrepare: a prepared id has its entry, idle, in the hint,
// where the first acquire finds it; preparing one that runs changes
// nothing of its run; a prepared entry no acquire used is swept at the
// second sweep, as one acquired once is.
func TestConflictsPrepare(t *testing.T) {
	r := NewConflicts()
	var last atomic.Pointer[heldID]
	r.prepare(&last, "p")
	e := last.Load()
	if e == nil || e.id != "p" || r.Running("p") {
		t.Fatalf("prepared: entry %+v, running %v; want p's, idle", e, r.Running("p"))
	}
	h := r.acquireFrom(&last, "p", true)
	if h != e || !r.Running("p") {
		t.Fatalf("acquired: %p, running %v; want the prepared entry %p, running", h, r.Running("p"), e)
	}
	r.prepare(&last, "p")
	if !r.Running("p") || r.acquire("p", true) != nil {
		t.Fatal("preparing a running id changed its run")
	}
	r.release(h)

	var other atomic.Pointer[heldID]
	r.prepare(&other, "q")
	s := other.Load().shard
	s.mu.Lock()
	s.sweep()
	_, kept := s.ids["q"]
	s.sweep()
	_, again := s.ids["q"]
	s.mu.Unlock()
	if !kept || again {
		t.Fatalf("prepared and never acquired: kept by the first sweep %v, by the second %v; want true, false", kept, again)
	}
}
