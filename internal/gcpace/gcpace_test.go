package gcpace

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestReadNamesMetricsTheRuntimeHas: every figure a pacer reads is one the
// runtime gives (a misspelt name reads zero).
func TestReadNamesMetricsTheRuntimeHas(t *testing.T) {
	runtime.GC()
	s := Read()
	if s.Goal == 0 || s.Live == 0 || s.Heap == 0 || s.Allocs == 0 || s.Cycles == 0 {
		t.Fatalf("read %+v: a figure is zero", s)
	}
	if s.Started != s.Cycles {
		t.Fatalf("read %+v after runtime.GC: %d collections begun, %d done", s, s.Started, s.Cycles)
	}
}

const mb = 1 << 20

func TestDue(t *testing.T) {
	// Live 100 MB, goal 200: the trigger expected at 180.
	at := func(heap uint64) Sample { return Sample{Goal: 200 * mb, Live: 100 * mb, Heap: heap * mb} }
	for _, c := range []struct {
		name  string
		cur   Sample
		rate  uint64
		since time.Duration
		want  bool
	}{
		{"within two seconds of the trigger", at(160), 10 * mb, time.Minute, true},
		{"at the trigger", at(180), 0, time.Minute, true},
		{"more than two seconds away", at(150), 10 * mb, time.Minute, false},
		{"collections too close together", at(170), 10 * mb, minGap - time.Second, false},
		{"no goal above the live heap", Sample{Goal: 100 * mb, Live: 100 * mb, Heap: 150 * mb}, mb, time.Minute, false},
		{"one under way", Sample{Goal: 200 * mb, Live: 100 * mb, Heap: 190 * mb, Started: 8, Cycles: 7}, mb, time.Minute, false},
	} {
		if got := Due(c.cur, c.rate, c.since); got != c.want {
			t.Errorf("%s: Due = %v, want %v", c.name, got, c.want)
		}
	}
}

// script is a runtime whose figures a test sets, and which counts the
// collections asked of it.
type script struct {
	mu        sync.Mutex
	s         Sample
	collected chan struct{}
}

func (r *script) read() Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.s
}

func (r *script) set(f func(*Sample)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.s)
}

func (r *script) collect() {
	r.set(func(s *Sample) { s.Cycles++; s.Started++; s.Heap = s.Live })
	r.collected <- struct{}{}
}

// TestThePacerCollectsJustAfterAWholeSecondWhenTheTriggerIsNear: on a
// fake clock, a pacer looks as each second's calm part begins (100 ms
// after the whole second); it collects when the heap, at the most it grew
// in a second lately, would reach the trigger within two seconds, and not
// within minGap of the last collection it saw.
func TestThePacerCollectsJustAfterAWholeSecondWhenTheTriggerIsNear(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	clk := clockwork.NewFakeClockAt(t0)
	r := &script{s: Sample{Goal: 200 * mb, Live: 100 * mb, Heap: 100 * mb, Allocs: 100 * mb}, collected: make(chan struct{}, 10)}
	p := Start(clk, r.read, r.collect)
	defer p.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// look advances the clock to the next look, the heap grown by grow
	// MB over the second before it, and reports whether it collected.
	look := func(grow uint64) bool {
		t.Helper()
		if err := clk.BlockUntilContext(ctx, 1); err != nil {
			t.Fatal(err)
		}
		r.set(func(s *Sample) { s.Heap += grow * mb; s.Allocs += grow * mb })
		now := clk.Now()
		want := now.Truncate(time.Second).Add(time.Second + 100*time.Millisecond)
		clk.Advance(want.Sub(now))
		if !clk.Now().Equal(want) {
			t.Fatalf("looked at %s", clk.Now().Format("15:04:05.000"))
		}
		if err := clk.BlockUntilContext(ctx, 1); err != nil { // the look done, the next timer armed
			t.Fatal(err)
		}
		select {
		case <-r.collected:
			return true
		default:
			return false
		}
	}
	// Nine seconds of 5 MB, a 20 MB step (a flush) among them: within
	// minGap of the pacer's start, the heap at 160.
	for i := range 9 {
		grow := uint64(5)
		if i == 4 {
			grow = 20
		}
		if look(grow) {
			t.Fatalf("collected at look %d, heap %d MB", i+1, r.read().Heap/mb)
		}
	}
	// Heap 160, the most grown in a second 20: the trigger (180) within
	// two, and minGap since the start.
	if !look(0) {
		t.Fatalf("did not collect with the heap at %d MB, 20 MB a second lately, the trigger at 180", r.read().Heap/mb)
	}
	// Just collected: not again within minGap, however near.
	r.set(func(s *Sample) { s.Heap = 179 * mb })
	if look(0) {
		t.Fatal("collected again within minGap of its own collection")
	}
	// A collection of the runtime's own is seen: minGap counts from it.
	for range 3 {
		look(0)
	}
	r.set(func(s *Sample) { s.Started++; s.Heap = 175 * mb }) // begun, not done
	if look(0) {
		t.Fatal("collected while the runtime's own collection was under way")
	}
	r.set(func(s *Sample) { s.Cycles++; s.Heap = 100 * mb })
	look(0)
	for i := range int(minGap/time.Second) - 1 {
		if look(30) {
			t.Fatalf("collected %d s after the runtime's own collection", i+1)
		}
		r.set(func(s *Sample) { s.Heap = 100 * mb })
	}
	r.set(func(s *Sample) { s.Heap = 150 * mb })
	if !look(0) {
		t.Fatal("did not collect minGap after the runtime's collection, the trigger within two seconds")
	}
}
