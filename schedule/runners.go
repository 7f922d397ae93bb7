package schedule

import (
	"sync"
	"time"
)

// Runners runs round goroutines on reusable goroutines, shared by the
// schedules of an app (Options.Runners).
//
// A sleeping schedule holds no goroutine, so each fire needs one. A fresh
// goroutine starts with the smallest stack and grows it, copying, as the
// round goes deeper (the round, the task, statistics, OnComplete); measured
// on a burst of a thousand schedules firing at once, that copying was a
// fifth of the CPU. A runner keeps its grown stack between rounds. Idle
// runners end after a linger, so a burst's runners serve the next burst of
// a per-second schedule and then go away. Close ends them all as soon as
// they are idle (an app calls it when it stops).
type Runners struct {
	linger time.Duration

	mu    sync.Mutex
	idle  []*runner // the last one is taken first: usually the warmest
	epoch uint64    // bumped by Close; a runner of an older epoch ends when idle
}

type runner struct {
	ch    chan func() // a function to run, or nil to end; one send per idle spell
	idx   int         // position in Runners.idle, -1 when busy
	epoch uint64
}

// DefaultRunnerLinger is how long an idle runner waits for more work.
// Above a second, so that schedules firing every second reuse runners.
const DefaultRunnerLinger = 3 * time.Second

// NewRunners returns an empty set of runners; linger <= 0 means
// DefaultRunnerLinger. It starts no goroutine.
func NewRunners(linger time.Duration) *Runners {
	if linger <= 0 {
		linger = DefaultRunnerLinger
	}
	return &Runners{linger: linger}
}

// Go runs f on an idle runner, or on a new one.
func (rs *Runners) Go(f func()) {
	rs.mu.Lock()
	if n := len(rs.idle); n > 0 {
		r := rs.idle[n-1]
		rs.removeIdle(r)
		rs.mu.Unlock()
		r.ch <- f
		return
	}
	r := &runner{ch: make(chan func(), 1), idx: -1, epoch: rs.epoch}
	rs.mu.Unlock()
	go rs.run(r, f)
}

func (rs *Runners) run(r *runner, f func()) {
	linger := time.NewTimer(rs.linger)
	defer linger.Stop()
	for f != nil {
		f()
		rs.mu.Lock()
		if r.epoch != rs.epoch {
			rs.mu.Unlock()
			return
		}
		r.idx = len(rs.idle)
		rs.idle = append(rs.idle, r)
		rs.mu.Unlock()
		linger.Reset(rs.linger)
		select {
		case f = <-r.ch:
		case <-linger.C:
			rs.mu.Lock()
			if r.idx >= 0 {
				rs.removeIdle(r)
				rs.mu.Unlock()
				return
			}
			rs.mu.Unlock()
			f = <-r.ch // taken by Go just as the linger ended
		}
	}
}

// removeIdle takes r off the idle list, moving the last one into its
// place; called with rs.mu held.
func (rs *Runners) removeIdle(r *runner) {
	last := len(rs.idle) - 1
	moved := rs.idle[last]
	rs.idle[r.idx], moved.idx = moved, r.idx
	rs.idle[last] = nil
	rs.idle = rs.idle[:last]
	r.idx = -1
}

// Idle returns the number of idle runners.
func (rs *Runners) Idle() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.idle)
}

// Close ends the idle runners now and the busy ones when their function
// returns; it does not wait for them. A later Go starts new runners.
func (rs *Runners) Close() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.epoch++
	for _, r := range rs.idle {
		r.idx = -1
		r.ch <- nil
	}
	rs.idle = nil
}
