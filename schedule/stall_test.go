package schedule

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestStalledScheduleIsVisibleAndItsQueueTimesOut: the only worker is held
// by a task that ignores its timeout; the next round's task waits behind
// it. The schedule reports itself stalled, and the queued task times out
// after taskOverTime of waiting, so the round completes.
func TestStalledScheduleIsVisibleAndItsQueueTimesOut(t *testing.T) {
	t.Parallel()
	stuck := newGate("stuck")
	stuck.stubborn = true
	var mu sync.Mutex
	var rounds []Round
	first := true
	h := newHarness(t, map[string]string{"taskOverTime": "1s", "execOnLoad": "true", "fixedRate": "10s"},
		Job{
			Tasks: func(context.Context) ([]Task, error) {
				mu.Lock()
				defer mu.Unlock()
				if first {
					first = false
					return []Task{stuck}, nil
				}
				return []Task{ok("next")}, nil
			},
			OnComplete: func(_ context.Context, r Round) {
				mu.Lock()
				rounds = append(rounds, r)
				mu.Unlock()
			},
		})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	waitChan(t, stuck.started, "stuck task")
	h.clk.Advance(time.Second) // its timeout: recorded, but it keeps the worker
	h.waitSleeping(1)
	if i := h.c.Info(); i.Abandoned != 1 || !i.Stalled {
		t.Fatalf("after the timeout: %+v", i)
	}
	h.clk.Advance(9 * time.Second) // round 2: its task queues behind the stuck one
	h.waitFor("queued", func() bool { i := h.c.Info(); return i.State == Running && i.Waiting == 1 })
	if i := h.c.Info(); !i.Stalled {
		t.Fatalf("a queue behind an abandoned task is stalled: %+v", i)
	}
	h.clk.Advance(time.Second) // the queued task waited taskOverTime
	h.waitSleeping(2)
	mu.Lock()
	r := rounds[1]
	mu.Unlock()
	res := r.Results[0]
	if res.Status != StatusTimeout || !errors.Is(res.Err, ErrTimeout) || !strings.Contains(res.Err.Error(), "waited 1s for a worker: all 1 were held by tasks past their timeout") || !res.Started.IsZero() {
		t.Fatalf("queued task: %+v", res)
	}
	stuck.open()
	h.waitFor("unstalled", func() bool { i := h.c.Info(); return i.Abandoned == 0 && !i.Stalled && i.Active == 0 })
	h.clk.Advance(t0.Add(20 * time.Second).Sub(h.clk.Now())) // round 3 runs normally
	h.waitSleeping(3)
	mu.Lock()
	defer mu.Unlock()
	if res := rounds[2].Results[0]; res.Status != StatusSuccess {
		t.Fatalf("round 3: %+v", res)
	}
}

// TestAMovingQueueIsNotTimedOut: with free workers a long queue waits as
// long as it must; only a stalled schedule times out its queue.
func TestAMovingQueueIsNotTimedOut(t *testing.T) {
	t.Parallel()
	gates := []*gate{newGate("a"), newGate("b"), newGate("c")}
	gates[0].stubborn = true // ignores its timeout, but there are two workers
	var done = make(chan Round, 1)
	h := newHarness(t, map[string]string{"taskOverTime": "1s", "threadMax": "2", "threadCore": "2"},
		Job{Tasks: tasksOf(gates[0], gates[1], gates[2]), OnComplete: func(_ context.Context, r Round) { done <- r }})
	b, err := h.c.Submit(context.Background(), gates[0], gates[1], gates[2])
	if err != nil {
		t.Fatal(err)
	}
	waitChan(t, gates[0].started, "a")
	waitChan(t, gates[1].started, "b")
	h.clk.Advance(time.Second) // a and b time out; b returns, a does not
	h.waitFor("c started", func() bool {
		select {
		case <-gates[2].started:
			return true
		default:
			return false
		}
	})
	if i := h.c.Info(); i.Stalled || i.Abandoned != 1 {
		t.Fatalf("one of two workers held: %+v", i)
	}
	gates[2].open()
	r, err := b.Wait(context.Background())
	if err != nil || r.Results[2].Status != StatusSuccess {
		t.Fatalf("c: %+v %v", r.Results, err)
	}
	gates[0].open()
}
