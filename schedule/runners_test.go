package schedule

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunnersReuseAGoroutine(t *testing.T) {
	rs := NewRunners(time.Hour, 0)
	defer rs.Close()
	done := make(chan struct{})
	rs.Go(func() { close(done) })
	waitChan(t, done, "first function")
	waitIdle(t, rs, 1)
	// The idle runner takes the next function: still one runner.
	done = make(chan struct{})
	rs.Go(func() { close(done) })
	waitChan(t, done, "second function")
	waitIdle(t, rs, 1)
}

func TestRunnersGrowUnderLoadAndLingerOut(t *testing.T) {
	rs := NewRunners(200*time.Millisecond, 0)
	defer rs.Close()
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(5)
	for range 5 {
		rs.Go(func() { started.Done(); <-release }) // all busy at once: five runners
	}
	started.Wait()
	if n := rs.Idle(); n != 0 {
		t.Fatalf("idle while all busy: %d", n)
	}
	close(release)
	waitIdle(t, rs, 5)
	waitIdle(t, rs, 0) // linger over: they end
}

func TestRunnersCloseEndsIdleAndLaterGoStillRuns(t *testing.T) {
	rs := NewRunners(time.Hour, 0)
	release := make(chan struct{})
	busyDone := make(chan struct{})
	rs.Go(func() { <-release; close(busyDone) })
	idleDone := make(chan struct{})
	rs.Go(func() { close(idleDone) })
	waitChan(t, idleDone, "idle runner's function")
	waitIdle(t, rs, 1)
	rs.Close()
	if n := rs.Idle(); n != 0 {
		t.Fatalf("idle after Close: %d", n)
	}
	close(release) // the busy runner finishes its function, then ends
	waitChan(t, busyDone, "busy runner's function")
	waitIdle(t, rs, 0)
	again := make(chan struct{})
	rs.Go(func() { close(again) })
	waitChan(t, again, "function after Close")
	rs.Close()
}

func TestRunnersStress(t *testing.T) {
	rs := NewRunners(time.Millisecond, 0) // lingers end while Go hands out work
	defer rs.Close()
	var ran atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2000 {
				var one sync.WaitGroup
				one.Add(1)
				rs.Go(func() { ran.Add(1); one.Done() })
				one.Wait()
			}
		}()
	}
	wg.Wait()
	if ran.Load() != 8000 {
		t.Fatalf("ran %d of 8000", ran.Load())
	}
}

func waitIdle(t *testing.T, rs *Runners, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for rs.Idle() != n {
		if time.Now().After(deadline) {
			t.Fatalf("idle runners: %d, want %d", rs.Idle(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRunnersWarm: Warm starts idle runners up to the limit, counting
// those busy, never past it however often it is called; they take work
// as any idle runner does, and end after the linger.
func TestRunnersWarm(t *testing.T) {
	rs := NewRunners(200*time.Millisecond, 3)
	defer rs.Close()
	release := make(chan struct{})
	busy := make(chan struct{})
	rs.Go(func() { close(busy); <-release })
	waitChan(t, busy, "the busy runner's function")
	rs.Warm()
	rs.Warm()
	rs.mu.Lock()
	started := rs.running + len(rs.idle) // a runner Warm starts counts as running until idle
	rs.mu.Unlock()
	if started != 3 {
		t.Fatalf("runners after Warm beside one busy runner: %d, want 3", started)
	}
	waitIdle(t, rs, 2)
	done := make(chan struct{})
	rs.Go(func() { close(done) })
	waitChan(t, done, "a function on a warmed runner")
	close(release)
	waitIdle(t, rs, 3)
	waitIdle(t, rs, 0) // linger over: they end
}

func TestRunnersQueueBeyondTheLimitInOrder(t *testing.T) {
	rs := NewRunners(time.Hour, 1)
	defer rs.Close()
	rs.stall = time.Hour // no watchdog: the busy runner drains the queue
	release := make(chan struct{})
	var mu sync.Mutex
	var order []int
	done := make(chan struct{})
	rs.Go(func() { <-release })
	for i := range 3 {
		rs.Go(func() {
			mu.Lock()
			order = append(order, i)
			n := len(order)
			mu.Unlock()
			if n == 3 {
				close(done)
			}
		})
	}
	mu.Lock()
	if len(order) != 0 {
		t.Fatal("queued work ran while the only runner was busy")
	}
	mu.Unlock()
	close(release)
	waitChan(t, done, "queued functions")
	mu.Lock()
	defer mu.Unlock()
	if order[0] != 0 || order[1] != 1 || order[2] != 2 {
		t.Fatalf("order %v", order)
	}
	waitIdle(t, rs, 1) // one runner did it all
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.armed {
		t.Fatal("the watchdog is still armed with the queue drained")
	}
}

// runBlocked hands rs n functions that block until release is closed and
// waits until all n run at once, which only the watchdog can bring about
// when n is above the limit.
func runBlocked(t *testing.T, rs *Runners, n int) (release chan struct{}) {
	t.Helper()
	release = make(chan struct{})
	var started sync.WaitGroup
	started.Add(n)
	for range n {
		rs.Go(func() { started.Done(); <-release })
	}
	wait := make(chan struct{})
	go func() { started.Wait(); close(wait) }()
	waitChan(t, wait, "blocked functions started by the watchdog")
	return release
}

func TestRunnersWatchdogStartsRunnersWhenAllAreBlocked(t *testing.T) {
	rs := NewRunners(time.Hour, 2)
	defer rs.Close()
	// Two run, two queue; nothing finishes, so the watchdog gives the
	// queued two runners: all four are blocked at once.
	release := runBlocked(t, rs, 4)
	close(release)
	waitIdle(t, rs, 4)
}

func TestRunnersWatchdogAddsRunnersOneStallAtATime(t *testing.T) {
	rs := NewRunners(time.Hour, 1)
	defer rs.Close()
	release := make(chan struct{})
	rs.Go(func() { <-release }) // the only runner blocks
	var wg sync.WaitGroup
	wg.Add(100)
	for range 100 {
		rs.Go(wg.Done) // quick ones queue behind it
	}
	// One stall: one more runner, which drains the whole queue on its own
	// (a runner per queued function would leave 100 idle runners).
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	waitChan(t, done, "queued functions")
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for {
		rs.mu.Lock()
		running, idle := rs.running, len(rs.idle)
		rs.mu.Unlock()
		if running == 0 {
			// Two unless the machine paused the new runner for whole
			// stall periods too (1, then 2, then 4 more); never one per
			// queued function.
			if idle < 2 || idle > 8 {
				t.Fatalf("%d runners after the stall, want 2 (at most 8)", idle)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d runners still running", running)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRunnersWatchdogDoublesWhileStalled(t *testing.T) {
	rs := NewRunners(time.Hour, 1)
	defer rs.Close()
	// Stalls in a row start 1, 2, then 4 runners: all eight are blocked
	// at once after three periods, not seven.
	release := runBlocked(t, rs, 8)
	rs.mu.Lock()
	boost := rs.boost
	rs.mu.Unlock()
	if boost != 4 {
		t.Fatalf("last stall started %d runners, want 4", boost)
	}
	close(release)
	waitIdle(t, rs, 8)
}

func TestARoundBlockedInUserCodeDoesNotHoldUpOtherSchedules(t *testing.T) {
	t.Parallel()
	shared := NewRunners(0, 1) // one runner, taken by the blocked round
	defer shared.Close()
	blocked := newGate("blocked")
	a := newHarness(t, map[string]string{"execOnLoad": "true", "fixedRate": "1h"}, Job{Tasks: tasksOf(blocked)},
		func(o *Options) { o.Runners = shared })
	b := newHarness(t, map[string]string{"fixedRate": "1h"}, Job{Tasks: tasksOf(ok("b"))},
		func(o *Options) { o.Runners = shared })
	if err := a.c.Startup(); err != nil {
		t.Fatal(err)
	}
	waitChan(t, blocked.started, "blocked task")
	if err := b.c.Startup(); err != nil {
		t.Fatal(err)
	}
	if err := b.c.ExecNow(); err != nil {
		t.Fatal(err)
	}
	b.waitSleeping(1) // its round waited in the queue until the watchdog gave it a runner
	if c := b.c.Counts(); c.Success != 1 {
		t.Fatalf("counts %+v", c)
	}
	blocked.open()
	a.waitSleeping(1)
}

func TestRunnersQueueThatNeverDrainsStaysBounded(t *testing.T) {
	rs := NewRunners(time.Hour, 1)
	noop := work{f: func() {}}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	// Steady load: 1 000 added and 1 000 taken per round, never empty.
	for range 3000 {
		rs.queue.push(noop)
	}
	for range 200 {
		for range 1000 {
			rs.queue.push(noop)
		}
		for range 1000 {
			if !rs.next().some() {
				t.Fatal("queue ran dry")
			}
		}
	}
	if n := rs.queue.len(); n != 3000 {
		t.Fatalf("waiting %d, want 3000", n)
	}
	if c := cap(rs.queue.items); c > 16384 {
		t.Fatalf("queue capacity %d for 3 000 waiting", c)
	}
}
