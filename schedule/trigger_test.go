package schedule

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

func TestTriggerFireAndAgain(t *testing.T) {
	t.Parallel()
	clk := clockwork.NewFakeClockAt(t0)
	runs := make(chan time.Time, 10)
	tr := NewTrigger(func(context.Context) (time.Duration, bool) {
		runs <- clk.Now()
		return 5 * time.Second, true
	}, WithTriggerClock(clk))
	defer tr.Close()
	tr.Fire(10 * time.Second)
	clk.BlockUntilContext(context.Background(), 1)
	clk.Advance(9 * time.Second)
	select {
	case <-runs:
		t.Fatal("ran early")
	default:
	}
	clk.Advance(time.Second)
	if at := <-runs; !at.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("ran at %v", at)
	}
	clk.BlockUntilContext(context.Background(), 1) // again=true re-armed after 5s
	clk.Advance(5 * time.Second)
	if at := <-runs; !at.Equal(t0.Add(15 * time.Second)) {
		t.Fatalf("re-ran at %v", at)
	}
	clk.BlockUntilContext(context.Background(), 1)
	tr.Suspend()
	clk.Advance(time.Hour)
	select {
	case <-runs:
		t.Fatal("ran after Suspend")
	default:
	}
}

func TestTriggerLatestCallWins(t *testing.T) {
	t.Parallel()
	clk := clockwork.NewFakeClockAt(t0)
	var runs atomic.Int32
	tr := NewTrigger(func(context.Context) (time.Duration, bool) { runs.Add(1); return 0, false }, WithTriggerClock(clk))
	defer tr.Close()
	tr.Fire(time.Minute)
	tr.Fire(10 * time.Second) // replaces the minute
	clk.Advance(10 * time.Second)
	waitFor(t, func() bool { return runs.Load() == 1 })
	tr.Fire(time.Second)
	tr.Suspend()
	clk.Advance(time.Minute)
	tr.Close()
	if runs.Load() != 1 {
		t.Fatalf("runs %d", runs.Load())
	}
}

func TestTriggerFireDuringRunYieldsOneMore(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	var runs atomic.Int32
	tr := NewTrigger(func(context.Context) (time.Duration, bool) {
		runs.Add(1)
		started <- struct{}{}
		<-release
		return time.Hour, true // superseded by the Fire during the run
	})
	defer tr.Close()
	tr.FireNow()
	<-started
	for range 100 {
		tr.FireNow()
	}
	release <- struct{}{}
	<-started
	release <- struct{}{}
	waitFor(t, func() bool { return !tr.Running() })
	close(release)
	if runs.Load() != 2 {
		t.Fatalf("runs %d, want 2", runs.Load())
	}
}

func TestTriggerPanicCountsAsStop(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	var recovered atomic.Value
	tr := NewTrigger(func(context.Context) (time.Duration, bool) {
		runs.Add(1)
		panic("bad")
	}, WithTriggerPanicHandler(func(p any) { recovered.Store(p) }))
	tr.FireNow()
	waitFor(t, func() bool { return recovered.Load() != nil })
	tr.Close()
	if runs.Load() != 1 {
		t.Fatalf("runs %d", runs.Load())
	}
}

// TestTriggerStorm has many goroutines fire and suspend at random on the
// real clock. It checks that runs never overlap, that requests coalesce,
// and that the last call decides whether one more run happens.
func TestTriggerStorm(t *testing.T) {
	t.Parallel()
	for _, lastIsFire := range []bool{true, false} {
		var inRun, overlaps, runs atomic.Int32
		tr := NewTrigger(func(context.Context) (time.Duration, bool) {
			if inRun.Add(1) > 1 {
				overlaps.Add(1)
			}
			runs.Add(1)
			time.Sleep(50 * time.Microsecond)
			inRun.Add(-1)
			return 0, false
		})
		var wg sync.WaitGroup
		const calls = 2000
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(g), 1))
				for range calls / 8 {
					switch r.IntN(3) {
					case 0:
						tr.Suspend()
					case 1:
						tr.FireNow()
					default:
						tr.Fire(time.Duration(r.IntN(200)) * time.Microsecond)
					}
				}
			}()
		}
		wg.Wait()
		// Quiesce: after a Suspend nothing new starts; let a run in
		// progress finish. Then one last call decides.
		tr.Suspend()
		waitFor(t, func() bool { return !tr.Running() })
		before := runs.Load()
		if lastIsFire {
			tr.Fire(time.Millisecond)
			waitFor(t, func() bool { return runs.Load() == before+1 && !tr.Running() })
		} else {
			tr.Suspend()
		}
		time.Sleep(5 * time.Millisecond) // nothing further may run
		tr.Close()
		after := runs.Load()
		if lastIsFire && after != before+1 || !lastIsFire && after != before {
			t.Fatalf("last call fire=%v: runs before %d after %d", lastIsFire, before, after)
		}
		if overlaps.Load() != 0 {
			t.Fatalf("%d overlapping runs", overlaps.Load())
		}
		if runs.Load() >= calls {
			t.Fatalf("no coalescing: %d runs for %d calls", runs.Load(), calls)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
