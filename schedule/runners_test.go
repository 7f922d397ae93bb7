package schedule

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunnersReuseAGoroutine(t *testing.T) {
	rs := NewRunners(time.Hour)
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
	rs := NewRunners(200 * time.Millisecond)
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
	rs := NewRunners(time.Hour)
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
	rs := NewRunners(time.Millisecond) // lingers end while Go hands out work
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
