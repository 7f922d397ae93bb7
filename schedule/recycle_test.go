package schedule

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// spares returns the groups idle runners keep for their next round. A
// runner sets its spare before it locks the set to go idle.
func spares(rs *Runners) []*group {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var out []*group
	for _, r := range rs.idle {
		if r.spare != nil {
			out = append(out, r.spare)
		}
	}
	return out
}

// idleSpares waits until every runner is idle again and returns the
// spares they keep.
func (h *harness) idleSpares() []*group {
	h.t.Helper()
	rs := h.c.runners
	deadline := time.Now().Add(5 * time.Second)
	for {
		rs.mu.Lock()
		busy := rs.running
		rs.mu.Unlock()
		if busy == 0 {
			return spares(rs)
		}
		if time.Now().After(deadline) {
			h.t.Fatal("the runners did not go idle")
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// A round of one task run on the round goroutine leaves its group to its
// runner, which uses it again for the next round: no group per fire.
func TestARoundsGroupIsUsedAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]string{"cron": "0 0 * * * *"}, Job{Tasks: func(context.Context) ([]Task, error) {
		return []Task{TaskFunc("t", func(context.Context) (any, error) { return "a value", nil })}, nil
	}})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	var first *group
	for n := int64(1); n <= 5; n++ {
		if err := h.c.ExecNow(); err != nil {
			t.Fatal(err)
		}
		h.waitSleeping(n)
		kept := h.idleSpares() // one runner: the next round finds it idle
		if len(kept) != 1 {
			t.Fatalf("round %d left %d spare groups", n, len(kept))
		}
		g := kept[0]
		if g.ctx != nil || g.first.task != nil || g.oneResult[0].Value != nil || g.number != 0 {
			t.Fatalf("round %d's spare group still holds its round: %+v", n, g)
		}
		if first == nil {
			first = g
		}
		if g != first {
			t.Fatalf("round %d used another group", n)
		}
	}
}

// Rounds whose group other goroutines may still hold do not give it back:
// several tasks (workers run them), or a deadline.
func TestAGroupOthersMayHoldIsNotUsedAgain(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		tags  map[string]string
		tasks []Task
	}{
		"two tasks":    {map[string]string{"cron": "0 0 * * * *"}, []Task{ok("a"), ok("b")}},
		"taskOverTime": {map[string]string{"cron": "0 0 * * * *", "taskOverTime": "1h"}, []Task{ok("a")}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, tc.tags, Job{Tasks: func(context.Context) ([]Task, error) { return tc.tasks, nil }})
			if err := h.c.Startup(); err != nil {
				t.Fatal(err)
			}
			for n := int64(1); n <= 3; n++ {
				if err := h.c.ExecNow(); err != nil {
					t.Fatal(err)
				}
				h.waitSleeping(n)
				if len(h.idleSpares()) != 0 {
					t.Fatalf("round %d left its group for the next", n)
				}
			}
		})
	}
}

// Results handed to OnComplete and a task's context kept past its return
// stay what they were while later rounds use the group again. Run with
// -race: the goroutines reading kept contexts race with nothing.
func TestRecycledRoundsKeepWhatTheyHandedOut(t *testing.T) {
	t.Parallel()
	const rounds = 50
	var (
		mu   sync.Mutex
		kept []Round
		n    atomic.Int64
		wg   sync.WaitGroup
		stop = make(chan struct{})
		bad  atomic.Value
	)
	task := TaskFunc("t", func(ctx context.Context) (any, error) {
		v := n.Add(1)
		wg.Add(1)
		go func() { // a task that leaves work behind with its context
			defer wg.Done()
			for {
				if FromContext(ctx) == nil || ctx.Value(taskKey{}) != "t" || ctx.Err() != nil {
					bad.Store("a kept task context changed")
					return
				}
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Microsecond):
				}
			}
		}()
		return v, nil
	})
	h := newHarness(t, map[string]string{"cron": "0 0 * * * *"}, Job{
		Tasks: func(context.Context) ([]Task, error) { return []Task{task}, nil },
		OnComplete: func(_ context.Context, r Round) {
			mu.Lock()
			kept = append(kept, r)
			mu.Unlock()
		},
	})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= rounds; i++ {
		if err := h.c.ExecNow(); err != nil {
			t.Fatal(err)
		}
		h.waitSleeping(i)
	}
	close(stop)
	wg.Wait()
	if msg := bad.Load(); msg != nil {
		t.Fatal(msg)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(kept) != rounds {
		t.Fatalf("%d rounds completed", len(kept))
	}
	for i, r := range kept {
		if len(r.Results) != 1 || r.Results[0].Value != int64(i+1) || r.Number != int64(i+1) {
			t.Fatalf("round %d kept by OnComplete now reads %+v", i+1, r)
		}
	}
	if len(h.idleSpares()) == 0 {
		t.Fatal("no runner kept a round's group for another")
	}
}
