package schedule

import (
	"context"
	"fmt"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fom-go/fom/config"
	"github.com/fom-go/fom/schedule/wheel"
)

// spawned is how many worker goroutines the live pool ever started.
func spawned(c *Context) int {
	p := &c.currentGen().pool
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.spawned
}

// startGated starts a schedule whose first round (execOnLoad, then hourly)
// is gate g alone, with the extra tags, and waits until g runs.
func startGated(t *testing.T, g *gate, job Job, tags ...string) *harness {
	t.Helper()
	m := map[string]string{"execOnLoad": "true", "fixedRate": "1h"}
	for i := 0; i+1 < len(tags); i += 2 {
		m[tags[i]] = tags[i+1]
	}
	job.Tasks = tasksOf(g)
	h := newHarness(t, m, job)
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	waitChan(t, g.started, "task "+g.id+" start")
	return h
}

func TestRoundRunsItsTaskOnTheRoundGoroutine(t *testing.T) {
	t.Parallel()
	g := newGate("solo")
	var rounds []Round
	var mu sync.Mutex
	h := startGated(t, g, Job{
		OnComplete: func(_ context.Context, r Round) { mu.Lock(); rounds = append(rounds, r); mu.Unlock() },
	})
	// It is an active task with its stack, like one on a worker.
	a := h.c.ActiveTasks()
	if len(a) != 1 || a[0].ID != "solo" || !strings.Contains(a[0].Stack, "(*gate).Exec") || !strings.Contains(a[0].Stack, "runRound") {
		t.Fatalf("active %+v", a)
	}
	if i := h.c.Info(); i.Active != 1 || i.State != Running {
		t.Fatalf("info %+v", i)
	}
	g.open()
	h.waitSleeping(1)
	mu.Lock()
	defer mu.Unlock()
	if len(rounds) != 1 || rounds[0].Results[0].Status != StatusSuccess || rounds[0].Results[0].Value != "solo" {
		t.Fatalf("rounds %+v", rounds)
	}
	if n := spawned(h.c); n != 0 {
		t.Fatalf("a one-task round started %d worker goroutines", n)
	}
}

func TestRoundWithOneWorkerSlotRunsAllItsTasksInOrder(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var order []string
	var tasks []Task
	for _, id := range []string{"a", "b", "c", "d"} {
		tasks = append(tasks, TaskFunc(id, func(context.Context) (any, error) {
			mu.Lock()
			order = append(order, id)
			mu.Unlock()
			return nil, nil
		}))
	}
	h := newHarness(t, map[string]string{"execOnLoad": "true", "fixedRate": "1h", "threadMax": "1"}, Job{Tasks: tasksOf(tasks...)})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	h.waitSleeping(1)
	if c := h.c.Counts(); c.Success != 4 {
		t.Fatalf("counts %+v", c)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(order, "") != "abcd" {
		t.Fatalf("order %v", order)
	}
	if n := spawned(h.c); n != 0 {
		t.Fatalf("started %d worker goroutines for tasks the round goroutine could run", n)
	}
}

func TestShutdownCancelsTheTaskOnTheRoundGoroutine(t *testing.T) {
	t.Parallel()
	g := newGate("long")
	var got Round
	h := startGated(t, g, Job{OnComplete: func(_ context.Context, r Round) { got = r }})
	if err := h.c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.c.Wait(ctx); err != nil { // the task returns only because it was canceled
		t.Fatal(err)
	}
	if !g.canceled.Load() {
		t.Fatal("the task's OnCancel was not called")
	}
	if len(got.Results) != 1 || got.Results[0].Status != StatusCanceled {
		t.Fatalf("round %+v", got)
	}
	if h.c.State() != Stopped {
		t.Fatalf("state %s", h.c.State())
	}
}

func TestABatchQueuedBehindARoundGetsAWorker(t *testing.T) {
	t.Parallel()
	g := newGate("round-task")
	h := startGated(t, g, Job{}, "threadMax", "1")
	b, err := h.c.Submit(context.Background(), ok("batch-task"))
	if err != nil {
		t.Fatal(err)
	}
	if w := h.c.WaitingTasks(); len(w) != 1 || w[0].ID != "batch-task" {
		t.Fatalf("waiting %+v", w)
	}
	g.open()
	// The round goroutine runs only its own round's tasks; the batch gets
	// a worker once the round gives the slot back.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := b.Wait(ctx)
	if err != nil || r.Results[0].Status != StatusSuccess {
		t.Fatalf("batch %+v %v", r, err)
	}
	h.waitSleeping(1)
}

func TestNoLendingWhenADeadlineCanFire(t *testing.T) {
	t.Parallel()
	g := newGate("timed")
	h := startGated(t, g, Job{}, "taskOverTime", "1m")
	if a := h.c.ActiveTasks(); len(a) != 1 || strings.Contains(a[0].Stack, "runRound") {
		t.Fatalf("a task with a deadline must run on a worker: %+v", a)
	}
	g.open()
	h.waitSleeping(1)
	if n := spawned(h.c); n != 1 {
		t.Fatalf("workers started: %d", n)
	}
}

// An exec-now accepted while the round goroutine computes the next fire
// (RUNNING, outside the lock) is not lost: the re-run starts at once.
func TestExecNowWhileTheNextFireIsComputed(t *testing.T) {
	t.Parallel()
	inNext := make(chan struct{})
	release := make(chan struct{})
	var calls int
	plan := PlanFunc("blocking", func(prev Round) (time.Time, bool) {
		calls++
		if calls == 1 { // after the first round (execOnLoad fires without it)
			close(inNext)
			<-release
		}
		return prev.Start.Add(time.Hour), true
	})
	h := newHarness(t, map[string]string{"execOnLoad": "true", "ignoreExecRequestWhenRunning": "false"},
		Job{Tasks: tasksOf(ok("t")), Plan: plan})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	waitChan(t, inNext, "the plan's Next after round 1")
	if err := h.c.ExecNow(); err != nil {
		t.Fatal(err)
	}
	close(release)
	h.waitSleeping(2) // round 2 ran now, not an hour later
}

// A round run on a plain goroutine (no runners) labels it as the pool's
// worker for the task: ActiveTasks still finds the task's stack.
func TestRoundTaskStackWithoutRunners(t *testing.T) {
	t.Parallel()
	g := newGate("plain")
	h := newHarness(t, map[string]string{"execOnLoad": "true", "fixedRate": "1h"}, Job{Tasks: tasksOf(g)},
		func(o *Options) { o.Runners = nil })
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	waitChan(t, g.started, "task start")
	if a := h.c.ActiveTasks(); len(a) != 1 || !strings.Contains(a[0].Stack, "(*gate).Exec") || !strings.Contains(a[0].Stack, "runRound") {
		t.Fatalf("active %+v", a)
	}
	g.open()
	h.waitSleeping(1)
}

// A task that changes its goroutine's pprof labels (pprof.Do, or setting
// them outright) does not hide the next task run on the same runner from
// ActiveTasks: the runner's label is restored after every task.
func TestTaskThatRelabelsItsGoroutine(t *testing.T) {
	t.Parallel()
	g := newGate("second")
	var round atomic.Int32
	relabel := TaskFunc("relabel", func(ctx context.Context) (any, error) {
		pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("mine", "yes")))
		return nil, nil
	})
	h := newHarness(t, map[string]string{"execOnLoad": "true", "fixedRate": "1h"}, Job{Tasks: func(context.Context) ([]Task, error) {
		if round.Add(1) == 1 {
			return []Task{relabel}, nil
		}
		return []Task{g}, nil
	}}, func(o *Options) { o.Runners = NewRunners(0, 1) }) // one runner: both rounds run on it
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	h.waitSleeping(1)
	if err := h.c.ExecNow(); err != nil {
		t.Fatal(err)
	}
	waitChan(t, g.started, "second round's task start")
	if a := h.c.ActiveTasks(); len(a) != 1 || a[0].ID != "second" || !strings.Contains(a[0].Stack, "(*gate).Exec") {
		t.Fatalf("active %+v", a)
	}
	g.open()
	h.waitSleeping(2)
}

// TestRoundOnTheWheelsGoroutineDelaysNoOtherSchedule: a lone fire runs its
// round on the wheel's own goroutine (wheel.Lender), and a round that
// blocks there keeps no other schedule of the wheel from firing: the
// wheel is taken over at the next timer due.
func TestRoundOnTheWheelsGoroutineDelaysNoOtherSchedule(t *testing.T) {
	t.Parallel()
	// Stopped after the schedules' Close, which ends the blocked round.
	w, runners := wheelAndRunners(t, 0, wheel.WithTick(time.Millisecond))
	start := func(name string, task Task) *Context {
		cfg, err := config.New(name, config.Spec{Tags: map[string]string{"fixedRate": config.MinInterval.String()}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := New(cfg, Job{Fixed: []Task{task}}, Options{Wheel: w, Runners: runners})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Startup(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	stacks := make(chan string, 1)
	release := make(chan struct{})
	var once sync.Once
	blocks := start("blocks", TaskFunc("blocks", func(ctx context.Context) (any, error) {
		once.Do(func() {
			buf := make([]byte, 64<<10)
			stacks <- string(buf[:runtime.Stack(buf, false)])
			select {
			case <-release:
			case <-ctx.Done():
			}
		})
		return nil, nil
	}))
	var stack string
	select {
	case stack = <-stacks:
	case <-time.After(5 * time.Second):
		t.Fatal("timed out waiting for the blocking round")
	}
	if !strings.Contains(stack, "wheel.(*Wheel).lend") {
		t.Errorf("a lone fire ran its round elsewhere than on the wheel's goroutine:\n%s", stack)
	}
	// Its task is active with its stack (found by the goroutine's label), as on a runner.
	if a := blocks.ActiveTasks(); len(a) != 1 || a[0].ID != "blocks" || !strings.Contains(a[0].Stack, "wheel.(*Wheel).lend") {
		t.Errorf("active tasks of the lent round: %+v", a)
	}
	var n atomic.Int64
	ticked := make(chan struct{}, 1)
	start("ticks", TaskFunc("ticks", func(context.Context) (any, error) {
		if n.Add(1) == 3 {
			ticked <- struct{}{}
		}
		return nil, nil
	}))
	waitChan(t, ticked, "three fires of the other schedule while the round blocks")
	close(release)
}

// A burst's wake-ups go to the runners as they are: the wheel's goroutine
// reads no schedule's state, so one whose lock is held (here by the test;
// in an app, briefly, by an edit or a page view) holds up no other fire
// of the burst. With the wake-ups decided on the wheel's goroutine, the
// first schedule's lock stopped the whole burst behind it. On a wheel
// that coalesces, the three are lent its goroutine in turn, and the one
// whose lock is held is handed to a runner.
func TestBurstWakeUpsAreDecidedOnTheRunners(t *testing.T) {
	t.Parallel()
	t.Run("not coalesced", func(t *testing.T) { t.Parallel(); burstPastAHeldLock(t) })
	t.Run("coalesced", func(t *testing.T) { t.Parallel(); burstPastAHeldLock(t, wheel.WithCoalesce(time.Millisecond)) })
}

func burstPastAHeldLock(t *testing.T, opts ...wheel.Option) {
	clk := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	w, runners := wheelAndRunners(t, 4, append(opts, wheel.WithClock(clk))...)
	ran := make(chan string, 8)
	ctxs := make([]*Context, 3)
	for i := range ctxs {
		name := fmt.Sprintf("s%d", i)
		cfg, err := config.New(name, config.Spec{Tags: map[string]string{"fixedRate": "1s"}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := New(cfg, Job{Fixed: []Task{TaskFunc(name, func(context.Context) (any, error) { ran <- name; return nil, nil })}},
			Options{Clock: clk, Wheel: w, Runners: runners})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Startup(); err != nil { // armed in this order: s0 fires first in the wheel's pass
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		ctxs[i] = c
	}
	for w.Pending() < len(ctxs) {
		runtime.Gosched()
	}
	ctxs[0].mu.Lock()
	clk.Advance(time.Second)
	got := map[string]bool{}
	for len(got) < 2 {
		select {
		case name := <-ran:
			if name == "s0" {
				t.Fatal("s0 ran while its lock was held")
			}
			got[name] = true
		case <-time.After(5 * time.Second):
			ctxs[0].mu.Unlock()
			t.Fatalf("with s0's lock held, only %v of s1 and s2 fired", got)
		}
	}
	ctxs[0].mu.Unlock()
	select {
	case name := <-ran:
		if name != "s0" {
			t.Fatalf("ran %s, want s0", name)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("s0 never fired once its lock was free")
	}
}
