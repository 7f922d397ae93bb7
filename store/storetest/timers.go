package storetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/fom-go/fom/store"
)

// The timer cases run on every store that keeps durable timers.

func timerCases() []struct {
	name string
	fn   func(t *testing.T, s store.TimerStore)
} {
	return []struct {
		name string
		fn   func(t *testing.T, s store.TimerStore)
	}{
		{"TimersInsertedAllOrNone", timersInsertedAllOrNone},
		{"TimersOfAMixedBatchKeepEveryField", timersOfAMixedBatch},
		{"TimerClaimsGoOnFromTheirKey", claimsGoOnFromTheirKey},
		{"TimerFiresClaimedOnceAndTakenOverAfterTheLease", timerFiresClaimedOnce},
		{"TimerAttemptsFencedAndKept", timerAttemptsFenced},
		{"TimerDisableDropsFiresNotBegun", timerDisableDropsFires},
	}
}

func runTimers(t *testing.T, s store.Store, fn func(*testing.T, store.TimerStore)) {
	ts, ok := s.(store.TimerStore)
	if !ok {
		t.Skipf("%T keeps no durable timers", s)
	}
	fn(t, ts)
}

func oneShot(id, name string, at int64) store.Timer {
	return store.Timer{ID: id, Namespace: "ns", Name: name, Kind: "k", At: at, Payload: []byte(`{}`), Enabled: true, Version: 1, NextAt: at, Created: 1, Updated: 1}
}

func timersInsertedAllOrNone(t *testing.T, s store.TimerStore) {
	ctx := context.Background()
	if err := s.InsertTimers(ctx, []store.Timer{oneShot("a1", "a", 1000), oneShot("b1", "b", 2000)}); err != nil {
		t.Fatal(err)
	}
	err := s.InsertTimers(ctx, []store.Timer{oneShot("c1", "c", 1000), oneShot("a2", "a", 1000)})
	if !errors.Is(err, store.ErrDuplicateTimer) {
		t.Fatalf("duplicate name: %v", err)
	}
	if _, ok, _ := s.GetTimer(ctx, "c1"); ok {
		t.Fatal("a batch with a duplicate stored part of itself")
	}
	got, err := s.ListTimers(ctx, store.TimerFilter{Namespace: "ns", Limit: 10})
	if err != nil || len(got) != 2 || got[0].ID != "a1" || got[1].ID != "b1" || got[0].Live {
		t.Fatalf("list %+v %v", got, err)
	}
	page, _ := s.ListTimers(ctx, store.TimerFilter{Namespace: "ns", After: "a1", Limit: 10})
	if len(page) != 1 || page[0].ID != "b1" {
		t.Fatalf("after the cursor: %+v", page)
	}
	if n, _ := s.CountTimers(ctx, "ns"); n != 2 {
		t.Fatalf("count %d", n)
	}
}

// timersOfAMixedBatch stores a batch whose rows share some fields and
// not others (a store may send a field common to the batch once), and a
// batch of one, and reads every field back.
func timersOfAMixedBatch(t *testing.T, s store.TimerStore) {
	ctx := context.Background()
	a := oneShot("m1", "one", 5000)
	a.Payload, a.First, a.NextAt, a.Owner, a.LeaseUntil = []byte(`{"path":"C:\\x","s":"\u00e9"}`), 5000, 0, "me", 9000
	b := store.Timer{ID: "m2", Namespace: "other", Name: "two", Kind: "k2", Cron: "*/5 * * * * *", Payload: []byte(`[1,2]`),
		Enabled: false, Version: 3, MaxAttempts: 7, MinBackoff: 10, MaxBackoff: 20, Timeout: 30, Misfire: "skip", NextAt: 6000, Created: 2, Updated: 4}
	c := oneShot("m3", "three", 7000)
	c.Payload = []byte(`{"path":"C:\\x","s":"\u00e9"}`)
	if err := s.InsertTimers(ctx, []store.Timer{a, b, c}); err != nil {
		t.Fatal(err)
	}
	d := oneShot("m4", "four", 8000)
	d.First, d.NextAt = 8000, 0
	if err := s.InsertTimers(ctx, []store.Timer{d}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []store.Timer{a, b, c, d} {
		got, ok, err := s.GetTimer(ctx, want.ID)
		if err != nil || !ok {
			t.Fatalf("timer %s: %v %v", want.ID, ok, err)
		}
		w := want
		w.First, w.Owner, w.LeaseUntil, w.Live = 0, "", 0, want.First != 0
		if got.ID != w.ID || got.Namespace != w.Namespace || got.Name != w.Name || got.Kind != w.Kind || got.At != w.At ||
			got.Cron != w.Cron || string(got.Payload) != string(w.Payload) || got.Enabled != w.Enabled || got.Version != w.Version ||
			got.MaxAttempts != w.MaxAttempts || got.MinBackoff != w.MinBackoff || got.MaxBackoff != w.MaxBackoff ||
			got.Timeout != w.Timeout || got.Misfire != w.Misfire || got.NextAt != w.NextAt || got.Created != w.Created ||
			got.Updated != w.Updated || got.Live != w.Live {
			t.Errorf("timer %s read back\n%+v\nwant\n%+v", want.ID, got, w)
		}
	}
	// The fires made with their timers: a's claimed by "me", d's unclaimed.
	for _, want := range []struct {
		id    string
		due   int64
		owner string
	}{{"m1", 5000, "me"}, {"m4", 8000, ""}} {
		fs, err := s.Fires(ctx, want.id, 10)
		if err != nil || len(fs) != 1 || fs[0].Planned != want.due || fs[0].DueAt != want.due || fs[0].Owner != want.owner || fs[0].State != store.FirePending {
			t.Errorf("fires of %s: %+v %v", want.id, fs, err)
		}
	}
	if fs, _ := s.Fires(ctx, "m3", 10); len(fs) != 0 {
		t.Errorf("m3 has no first fire; got %+v", fs)
	}
}

// claim claims from the first unclaimed fire.
func claim(ctx context.Context, s store.TimerStore, owner string, before, now, lease int64, limit int) ([]store.Claimed, error) {
	cs, _, err := s.ClaimFires(ctx, owner, store.FireKey{}, before, now, lease, limit)
	return cs, err
}

// claimsGoOnFromTheirKey: fires due at one instant claimed in chunks, each
// from the key the one before it ended on, take every fire once, in key
// order; a fire whose lease ran out is taken whatever the key; and a
// claim from the first fire again finds one a chunk passed over.
func claimsGoOnFromTheirKey(t *testing.T, s store.TimerStore) {
	ctx := context.Background()
	var ts []store.Timer
	for _, id := range []string{"k5", "k1", "k4", "k2", "k3"} {
		o := oneShot(id, id, 1000)
		o.First, o.NextAt = 1000, 0
		ts = append(ts, o)
	}
	early := oneShot("k0", "k0", 900)
	early.First, early.NextAt, early.Owner, early.LeaseUntil = 900, 0, "gone", 950
	ts = append(ts, early)
	if err := s.InsertTimers(ctx, ts); err != nil {
		t.Fatal(err)
	}
	var got []string
	var key store.FireKey
	for i := range 3 {
		cs, next, err := s.ClaimFires(ctx, "A", key, 2000, 1000, 100, 2)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string // a chunk in any order
		for _, c := range cs {
			ids = append(ids, c.TimerID)
		}
		slices.Sort(ids)
		got = append(got, ids...)
		if i == 0 && (len(cs) != 3 || next != (store.FireKey{DueAt: 1000, FireRef: store.FireRef{TimerID: "k2", Planned: 1000}})) {
			t.Fatalf("first chunk %+v, next %+v: want k1, k2 and the expired k0, next k2", cs, next)
		}
		key = next
	}
	if strings.Join(got, " ") != "k0 k1 k2 k3 k4 k5" {
		t.Fatalf("claimed %v by chunk, want k0 k1 k2, k3 k4, k5", got)
	}
	if cs, next, _ := s.ClaimFires(ctx, "A", key, 2000, 1000, 100, 2); len(cs) != 0 || next != key {
		t.Fatalf("past the last: %+v, next %+v (want none, %+v)", cs, next, key)
	}
	// A chunk passed over k3 (another instance's claim, given back since).
	if err := s.ReleaseFires(ctx, "A"); err != nil {
		t.Fatal(err)
	}
	if cs, _, _ := s.ClaimFires(ctx, "B", store.FireKey{DueAt: 1000, FireRef: store.FireRef{TimerID: "k3", Planned: 1000}}, 2000, 1000, 100, 10); len(cs) != 2 || cs[0].TimerID == "k3" || cs[1].TimerID == "k3" {
		t.Fatalf("after k3: %+v, want k4 and k5", cs)
	}
	if cs, _ := claim(ctx, s, "B", 2000, 1000, 100, 10); len(cs) != 4 {
		t.Fatalf("from the first: %+v, want the four left", cs)
	}
}

// due makes a's fire due at 1000 through AdvanceTimers, twice (the second
// finds the timer moved and adds nothing).
func due(t *testing.T, s store.TimerStore, ids ...string) {
	t.Helper()
	ctx := context.Background()
	for range 2 {
		var as []store.Advance
		for _, id := range ids {
			as = append(as, store.Advance{TimerID: id, From: 1000, Next: 0, Fires: []int64{1000}})
		}
		if err := s.AdvanceTimers(ctx, as); err != nil {
			t.Fatal(err)
		}
	}
}

func timerFiresClaimedOnce(t *testing.T, s store.TimerStore) {
	ctx := context.Background()
	s.InsertTimers(ctx, []store.Timer{oneShot("x1", "x", 1000), oneShot("y1", "y", 1000)})
	due(t, s, "x1", "y1")
	a, err := claim(ctx, s, "A", 2000, 500, 100, 10)
	if err != nil || len(a) != 2 {
		t.Fatalf("A claimed %+v %v", a, err)
	}
	if b, _ := claim(ctx, s, "B", 2000, 600, 100, 10); len(b) != 0 {
		t.Fatalf("B claimed fires A holds: %+v", b)
	}
	// A's lease ends at due+lease = 1100: B takes them after.
	b, _ := claim(ctx, s, "B", 2000, 1200, 100, 10)
	if len(b) != 2 {
		t.Fatalf("B after A's lease: %+v", b)
	}
	// A begins nothing it no longer holds.
	if st, _ := s.StartFires(ctx, "A", []store.FireRef{{TimerID: "x1", Planned: 1000}}, 1200, 50, 10); len(st) != 0 {
		t.Fatalf("A began a fire B holds: %+v", st)
	}
	st, err := s.StartFires(ctx, "B", []store.FireRef{{TimerID: "x1", Planned: 1000}}, 1200, 50, 10)
	if err != nil || len(st) != 1 || st[0].Attempt != 1 || st[0].Timer.Name != "x" {
		t.Fatalf("B began %+v %v", st, err)
	}
	// B dies during the attempt: its lease (1200+50+10) ends, A takes the
	// fire over, and its attempt is the second.
	c, _ := claim(ctx, s, "A", 2000, 1350, 100, 10)
	if len(c) != 2 {
		t.Fatalf("A after B's leases: %+v", c)
	}
	st, _ = s.StartFires(ctx, "A", []store.FireRef{{TimerID: "x1", Planned: 1000}}, 1350, 50, 10)
	if len(st) != 1 || st[0].Attempt != 2 {
		t.Fatalf("taken over: %+v", st)
	}
	if err := s.ReleaseFires(ctx, "A"); err != nil {
		t.Fatal(err)
	}
	if d, _ := claim(ctx, s, "B", 2000, 1351, 100, 10); len(d) != 1 || d[0].TimerID != "y1" {
		t.Fatalf("after A gave back what it had not begun: %+v", d)
	}
}

func timerAttemptsFenced(t *testing.T, s store.TimerStore) {
	ctx := context.Background()
	s.InsertTimers(ctx, []store.Timer{oneShot("f1", "f", 1000)})
	due(t, s, "f1")
	ref := store.FireRef{TimerID: "f1", Planned: 1000}
	claim(ctx, s, "A", 2000, 1000, 100, 10)
	st, err := s.StepFires(ctx, "A", nil, []store.FireRef{ref}, 1000, 50, 10)
	if err != nil || len(st) != 1 {
		t.Fatalf("begin: %+v %v", st, err)
	}
	fail := store.Outcome{FireRef: ref, Attempt: 1, State: store.FireRetry, DueAt: 1500, Started: 1000, Finished: 1010, Error: "boom", StatusCode: 503}
	// An outcome of an attempt that is not the fire's current one (a
	// stale instance's) is not recorded.
	stale := fail
	stale.Attempt = 7
	if _, err := s.StepFires(ctx, "A", []store.Outcome{stale, fail}, nil, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	claim(ctx, s, "A", 2000, 1500, 100, 10)
	if st, _ := s.StepFires(ctx, "A", nil, []store.FireRef{ref}, 1500, 50, 10); len(st) != 1 || st[0].Attempt != 2 {
		t.Fatalf("second attempt: %+v", st)
	}
	ok := store.Outcome{FireRef: ref, Attempt: 2, State: store.FireSucceeded, Started: 1500, Finished: 1520, StatusCode: 200}
	if _, err := s.StepFires(ctx, "A", []store.Outcome{ok}, nil, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	fs, err := s.Fires(ctx, "f1", 10)
	if err != nil || len(fs) != 1 || fs[0].State != store.FireSucceeded || len(fs[0].Attempts) != 2 {
		t.Fatalf("history %+v %v", fs, err)
	}
	a := fs[0].Attempts
	if a[0].Error != "boom" || a[0].StatusCode != 503 || a[1].Attempt != 2 || a[1].StatusCode != 200 || a[1].Finished != 1520 {
		t.Fatalf("attempts %+v", a)
	}
	c, _ := s.CountFires(ctx, "ns", 3000, 4000)
	if c.ByState[store.FireSucceeded] != 1 {
		t.Fatalf("counts %+v", c)
	}
	if n, _ := s.PruneFires(ctx, 1521, 0); n != 1 {
		t.Fatalf("pruned %d", n)
	}
	if fs, _ := s.Fires(ctx, "f1", 10); len(fs) != 0 {
		t.Fatalf("after pruning: %+v", fs)
	}
}

func timerDisableDropsFires(t *testing.T, s store.TimerStore) {
	ctx := context.Background()
	s.InsertTimers(ctx, []store.Timer{oneShot("d1", "d", 1000)})
	due(t, s, "d1")
	claim(ctx, s, "A", 2000, 900, 100, 10)
	if ok, err := s.SetEnabled(ctx, "d1", false, 0, 950); !ok || err != nil {
		t.Fatalf("disable: %v %v", ok, err)
	}
	if st, _ := s.StartFires(ctx, "A", []store.FireRef{{TimerID: "d1", Planned: 1000}}, 1000, 50, 10); len(st) != 0 {
		t.Fatalf("a claimed fire of a disabled timer began: %+v", st)
	}
	if got, _, _ := s.GetTimer(ctx, "d1"); got.Enabled || got.Version != 2 || got.Live {
		t.Fatalf("after disable: %+v", got)
	}
	if ok, _ := s.DeleteTimer(ctx, "d1"); !ok {
		t.Fatal("delete")
	}
	if _, ok, _ := s.GetTimer(ctx, "d1"); ok {
		t.Fatal("deleted timer still there")
	}
}
