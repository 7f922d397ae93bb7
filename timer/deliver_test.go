package timer

import (
	"context"
	"encoding/base32"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fom-go/fom/store"
)

// TestDeliveriesCoalesceUnderLoadNeverEarly drives one batch's deliveries
// millisecond by millisecond on a fake clock: a fire alone is delivered
// on its millisecond, fires due less than Coalesce after a wake-up wait
// for the next one, and none is delivered before its due time.
func TestDeliveriesCoalesceUnderLoadNeverEarly(t *testing.T) {
	clk := clockwork.NewFakeClockAt(t0)
	s, err := New(Options{Store: sqliteStore(t), Clock: clk, Instance: "test", Coalesce: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	at := map[int64]int64{} // planned -> delivered, ms after t0
	if err := s.Handle("k", func(_ context.Context, f Fire) error {
		mu.Lock()
		at[f.Planned.Sub(t0).Milliseconds()] = clk.Since(t0).Milliseconds()
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// due (ms after t0) -> when it is delivered: 1 alone; 2 and 3 wait
	// for the wake-up at 6 (1 + Coalesce); 10 for 11; 30 alone again.
	want := map[int64]int64{1: 1, 2: 6, 3: 6, 10: 11, 30: 30}
	var fs []timedFire
	for _, d := range []int64{1, 2, 3, 10, 30} {
		p := ms(t0) + d
		fs = append(fs, timedFire{due: p, st: store.Started{FireRef: store.FireRef{TimerID: "t", Planned: p}, Attempt: 1, Timer: store.Timer{ID: "t", Namespace: "n", Name: "t", Kind: "k"}}})
	}
	s.inflight.Add(len(fs))
	go s.deliverAt(fs)
	delivered := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(at)
	}
	for now := int64(1); now <= 30; now++ {
		if err := clk.BlockUntilContext(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Millisecond)
		n := 0
		for _, w := range want {
			if w <= now {
				n++
			}
		}
		for deadline := time.Now().Add(5 * time.Second); delivered() < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("at +%dms: %d of %d fires delivered", now, delivered(), n)
			}
		}
		// The batch re-armed (or ended) once this millisecond's fires were
		// started; a fire started early shows within a few milliseconds.
		if n < len(want) {
			if err := clk.BlockUntilContext(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(5 * time.Millisecond)
		if d := delivered(); d != n {
			t.Fatalf("at +%dms: %d fires delivered, want %d", now, d, n)
		}
		if n == len(want) {
			break
		}
	}
	s.inflight.Wait()
	mu.Lock()
	defer mu.Unlock()
	for d, w := range want {
		if at[d] != w {
			t.Errorf("fire due at +%dms delivered at +%dms, want +%dms", d, at[d], w)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.finished) != len(want) {
		t.Errorf("%d outcomes queued, want %d", len(s.finished), len(want))
	}
}

// TestASlowHandlerDelaysNoOtherFire: the fires due at one wake-up are
// delivered on their batch's goroutine, one after the other; a handler
// that blocks past the inline budget hands the fires left to goroutines
// of their own and the batch's later fires to a new waiter, so the fires
// due with it and after it are delivered while it still blocks, each
// once.
func TestASlowHandlerDelaysNoOtherFire(t *testing.T) {
	clk := clockwork.NewFakeClockAt(t0)
	s, err := New(Options{Store: sqliteStore(t), Clock: clk, Instance: "test", Coalesce: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var mu sync.Mutex
	count := map[string]int{}
	if err := s.Handle("k", func(_ context.Context, f Fire) error {
		if f.Name == "slow" {
			<-release
		}
		mu.Lock()
		count[f.Name]++
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var fs []timedFire
	for _, f := range []struct {
		name string
		due  int64 // ms after t0
	}{{"slow", 1}, {"a", 1}, {"b", 1}, {"later", 20}} {
		p := ms(t0) + f.due
		fs = append(fs, timedFire{due: p, st: store.Started{FireRef: store.FireRef{TimerID: f.name, Planned: p}, Attempt: 1, Timer: store.Timer{ID: f.name, Namespace: "n", Name: f.name, Kind: "k"}}})
	}
	s.inflight.Add(len(fs))
	go s.deliverAt(fs)
	waitFor := func(what string, names ...string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			mu.Lock()
			ok := true
			for _, n := range names {
				ok = ok && count[n] == 1
			}
			mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: delivered %v", what, count)
			}
		}
	}
	if err := clk.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Millisecond)
	waitFor("the fires due with the slow one", "a", "b")
	// The later fire waits on a new waiter of its own.
	if err := clk.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(19 * time.Millisecond)
	waitFor("the fire due after the slow one", "a", "b", "later")
	close(release)
	s.inflight.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(count) != 4 || count["slow"] != 1 || count["a"] != 1 || count["b"] != 1 || count["later"] != 1 {
		t.Fatalf("deliveries %v, want each of the four once", count)
	}
}

// TestOnlyQuickHandlersRunInline: a fire is delivered on its batch's
// goroutine only when its kind's handler has been quick and its namespace
// has no limit to wait on; a handler that waits (on the network, say)
// runs on a goroutine of its own, so that the waits overlap.
func TestOnlyQuickHandlersRunInline(t *testing.T) {
	s, err := New(Options{Store: sqliteStore(t), Clock: clockwork.NewFakeClockAt(t0), Instance: "test"})
	if err != nil {
		t.Fatal(err)
	}
	nop := func(context.Context, Fire) error { return nil }
	for _, k := range []string{"quick", "slow"} {
		if err := s.Handle(k, nop); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetLimits("limited", Limits{Concurrency: 4}); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		s.kinds["quick"].note(5 * time.Microsecond)
		s.kinds["slow"].note(2 * time.Millisecond)
	}
	for _, c := range []struct {
		kind, ns string
		want     bool
	}{{"quick", "n", true}, {"slow", "n", false}, {"quick", "limited", false}, {"unknown", "n", false}} {
		if got := inlineable(s.handlerOf(&store.Timer{Kind: c.kind, Namespace: c.ns})); got != c.want {
			t.Errorf("kind %q in namespace %q: inline %v, want %v", c.kind, c.ns, got, c.want)
		}
	}
	// A quick kind that turns slow stops running inline within a few calls.
	for range 4 {
		s.kinds["quick"].note(time.Millisecond)
	}
	if inlineable(s.handlerOf(&store.Timer{Kind: "quick", Namespace: "n"})) {
		t.Errorf("a kind whose last calls took 1ms still runs inline (recent run time %s)", time.Duration(s.kinds["quick"].took.Load()))
	}
}

// TestIDsKeepTheirEncoding: ids are base32hex in lower case, as the
// timers stored by earlier releases have them, and sort as their bytes.
func TestIDsKeepTheirEncoding(t *testing.T) {
	for i := range 100 {
		id := newID(t0.Add(time.Duration(i)*time.Millisecond), uint16(i))
		b, err := base32.HexEncoding.WithPadding(base32.NoPadding).DecodeString(strings.ToUpper(id))
		if err != nil || len(b) != 16 || strings.ToLower(base32.HexEncoding.WithPadding(base32.NoPadding).EncodeToString(b)) != id {
			t.Fatalf("id %q: %v", id, err)
		}
		if next := newID(t0.Add(time.Duration(i+1)*time.Millisecond), uint16(i+1)); next <= id {
			t.Fatalf("id %q then %q: not in time order", id, next)
		}
	}
}
