package schedule

import (
	"context"
	"fmt"
	"runtime"
	"runtime/pprof"
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
// fifth of the CPU. A runner keeps its grown stack between rounds.
//
// At most limit runners run at once; more work waits in a queue that busy
// runners drain before they go idle. A burst of thousands of
// schedules due at the same instant is then served by a few goroutines
// whose stacks and data stay in cache (measured on 2 000 schedules: 12–15
// µs of CPU per round against 22 with a runner each). A round may block in
// user code, though, so a watchdog checks the queue: when work has waited
// stallAfter and no runner finished anything meanwhile, it starts one more
// runner, which drains the queue like any other, and twice as many at each
// further stall in a row. Doubling reaches any number of blocked rounds in
// a few periods, while a pause of the whole process (a VM whose CPUs are
// taken away for tens of milliseconds, a long GC) costs a runner or two
// instead of one goroutine per queued round: giving every queued function
// its own runner at once turned such a pause during a burst of 20 000
// schedules into thousands of goroutines and doubled the CPU per round.
// Idle runners end after a linger, so a burst's runners serve
// the next burst of a per-second schedule and then go away; Close ends
// them all as soon as they are idle (an app calls it when it stops). The
// linger is one timer for the whole set, not one per runner: an idle
// runner waits on its channel alone, so going idle between two fires
// costs no timer reset and no select.
type Runners struct {
	linger time.Duration
	limit  int           // runners running at once before work queues
	stall  time.Duration // stallAfter; tests change it

	mu      sync.Mutex
	idle    []*runner // the last one is taken first: usually the warmest
	running int       // runners running a function
	queue   fifo[work]
	done    uint64 // functions finished, to tell a busy queue from a stalled one
	watch   *time.Timer
	seen    uint64 // done when the watchdog was armed
	armed   bool
	boost   int    // runners the watchdog started at its last stall in a row, 0 after progress
	epoch   uint64 // bumped by Close; a runner of an older epoch ends when idle
	reap    *time.Timer
	reaping bool   // reap is armed: it is while any runner is idle
	lap     uint64 // reaps so far
}

// work is what a runner runs: a function; the rounds of a schedule whose
// wake-up goLocked already decided (wake, id 0); or the wake-up of a
// schedule whose armed wait its timing wheel found due (wake, the wheel
// timer's id, never 0), decided on the runner (loopWake.runOn). A wake-up
// is handed over as it is, the schedule untouched: in a burst of
// thousands of schedules due at once, the wheel's goroutine would
// otherwise bring each schedule's lines into its cache to decide, and the
// runner bring them in again, the burst between, to run the round.
type work struct {
	f    func()
	wake *loopWake
	id   uint64
}

// some reports whether w is work rather than the signal to end.
func (w work) some() bool { return w.f != nil || w.wake != nil }

func (w work) run(r *runner) {
	switch {
	case w.wake == nil:
		w.f()
	case w.id == 0:
		l := (*loop)(w.wake)
		l.c.runRounds(l, l.planned, r, time.Time{})
	default:
		w.wake.runOn(r, w.id)
	}
}

type runner struct {
	ch      chan work // work to run, or none to end; one send per idle spell
	idx     int       // position in Runners.idle, -1 when not idle
	epoch   uint64
	idleLap uint64 // Runners.lap when it went idle

	// The pprof label its goroutine carries while it runs a task
	// (pool.runLocked), and the context carrying it.
	label  string
	labels context.Context

	// The group of a round this runner ran that nothing holds any more,
	// for the next round it runs (runRound): its memory is still in this
	// goroutine's cache, and a runner keeps one, not every schedule.
	spare *group
}

// DefaultRunnerLinger is how long an idle runner waits for more work.
// Above a second, so that schedules firing every second reuse runners.
const DefaultRunnerLinger = 3 * time.Second

// stallAfter is how long queued work waits, with no runner finishing
// anything, before it gets runners of its own. Real time: it decides
// goroutines, not when anything is due. Not shorter: on a VM whose CPUs
// are taken away for milliseconds at a time, a shorter one mistakes a
// pause of the whole process for blocked runners.
const stallAfter = 10 * time.Millisecond

// NewRunners returns an empty set of runners. linger <= 0 means
// DefaultRunnerLinger; limit <= 0 means four per P. An app makes one set
// per timing wheel (so per P, with a limit of four), so that no lock on the
// way from a fire to its round is shared by the whole app. It starts no
// goroutine.
func NewRunners(linger time.Duration, limit int) *Runners {
	if linger <= 0 {
		linger = DefaultRunnerLinger
	}
	if limit <= 0 {
		limit = 4 * runtime.GOMAXPROCS(0)
	}
	return &Runners{linger: linger, limit: limit, stall: stallAfter}
}

// Go runs f on an idle runner, on a new one, or, when enough run already,
// on the first runner to finish. It never blocks.
func (rs *Runners) Go(f func()) { rs.put(work{f: f}) }

// rounds runs l's rounds from l.planned on a runner, for a wake-up
// decided elsewhere (goLocked).
func (rs *Runners) rounds(l *loop) { rs.put(work{wake: (*loopWake)(l)}) }

// wake runs the wake-up of lw's armed wait, a wheel timer of id found due,
// on a runner (loopWake.runOn).
func (rs *Runners) wake(lw *loopWake, id uint64) { rs.put(work{wake: lw, id: id}) }

func (rs *Runners) put(w work) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	switch {
	case len(rs.idle) > 0:
		r := rs.idle[len(rs.idle)-1]
		rs.removeIdle(r)
		rs.running++
		r.ch <- w
	case rs.running < rs.limit:
		rs.spawnLocked(w)
	default:
		rs.queue.push(w)
		if !rs.armed {
			rs.armLocked()
		}
	}
}

// Warm starts idle runners until limit run or wait: the copies of a
// cluster instance about to fire here for the first time
// (Context.readyLocked) then find them, rather than each burst's first
// fires starting them, goroutine and stack, in the middle of it. They
// end after the linger, as any idle runner, when no burst comes.
func (rs *Runners) Warm() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for rs.running+len(rs.idle) < rs.limit {
		rs.spawnLocked(work{f: growStack})
	}
}

// warmStack is how deep a warmed runner's stack reaches before its first
// round: a gated round (the gate's admission, the task, the statistics)
// grew a runner's first stack, by copying, in its first burst.
const warmStack = 12 << 10

// growStack grows the calling goroutine's stack to warmStack.
func growStack() { stackFrames(warmStack / 512) }

// stackFrames calls itself n deep, each frame half a kilobyte.
//
//go:noinline
func stackFrames(n int) byte {
	var pad [512]byte
	pad[n%len(pad)] = byte(n)
	if n > 1 {
		return stackFrames(n-1) ^ pad[(n*7)%len(pad)]
	}
	return pad[0]
}

// spawnLocked starts a runner for w; called with rs.mu held.
func (rs *Runners) spawnLocked(w work) {
	rs.running++
	r := newRunner(rs.epoch)
	r.ch = make(chan work, 1)
	go rs.run(r, w)
}

// newRunner returns a runner's state with its label: for a goroutine of
// Runners, or for a timing wheel's goroutine that runs rounds lent to it
// (loopWake.RunLent).
func newRunner(epoch uint64) *runner {
	r := &runner{idx: -1, epoch: epoch}
	r.label = fmt.Sprintf("%p/runner", r)
	r.labels = pprof.WithLabels(context.Background(), pprof.Labels(workerLabel, r.label))
	return r
}

// armLocked arms the watchdog; called with rs.mu held.
func (rs *Runners) armLocked() {
	rs.armed, rs.seen = true, rs.done
	if rs.watch == nil {
		rs.watch = time.AfterFunc(rs.stall, rs.check)
		return
	}
	rs.watch.Reset(rs.stall)
}

// check is the watchdog: with no function finished since it was armed,
// the runners may all be blocked, and queued functions get new runners:
// one at the first stall, twice as many as the last time at each further
// stall in a row.
func (rs *Runners) check() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.armed = false
	if rs.queue.len() == 0 {
		rs.boost = 0
		return
	}
	if rs.done != rs.seen {
		rs.boost = 0
		rs.armLocked() // progress: look again later
		return
	}
	rs.boost = max(1, 2*rs.boost)
	for range min(rs.boost, rs.queue.len()) {
		rs.spawnLocked(rs.next())
	}
	if rs.queue.len() != 0 {
		rs.armLocked()
	}
}

// next takes the oldest queued work; called with rs.mu held.
func (rs *Runners) next() work { return rs.queue.pop() }

func (rs *Runners) run(r *runner, w work) {
	for w.some() {
		w.run(r)
		rs.mu.Lock()
		rs.done++
		if w = rs.next(); w.some() {
			rs.mu.Unlock()
			continue
		}
		rs.running--
		if rs.armed {
			// Nothing waits any more: the watchdog has nothing to watch, and
			// disarmed it wakes nobody after a burst of a per-second schedule.
			rs.armed, rs.boost = false, 0
			rs.watch.Stop()
		}
		if r.epoch != rs.epoch {
			rs.mu.Unlock()
			break
		}
		r.idx, r.idleLap = len(rs.idle), rs.lap
		rs.idle = append(rs.idle, r)
		if !rs.reaping {
			rs.reaping = true
			if rs.reap == nil {
				rs.reap = time.AfterFunc(rs.linger, rs.reapIdle)
			} else {
				rs.reap.Reset(rs.linger)
			}
		}
		rs.mu.Unlock()
		w = <-r.ch // none from reapIdle or Close: end
	}
}

// reapIdle runs once per linger while any runner is idle: it ends those
// idle since before its previous run, so a runner ends after between one
// and two lingers of idleness.
func (rs *Runners) reapIdle() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.reaping = false
	rs.lap++
	for i := 0; i < len(rs.idle); {
		if r := rs.idle[i]; r.idleLap+1 < rs.lap {
			rs.removeIdle(r) // the last one moves to i
			r.ch <- work{}
			continue
		}
		i++
	}
	if len(rs.idle) > 0 {
		rs.reaping = true
		rs.reap.Reset(rs.linger)
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

// Queued returns the number of functions waiting for a runner: more are
// due than the limit runs at once, a burst under way.
func (rs *Runners) Queued() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.queue.len()
}

// Idle returns the number of idle runners.
func (rs *Runners) Idle() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.idle)
}

// Close ends the idle runners now and the busy ones once the queue is
// empty; it does not wait for them. A later Go starts new runners.
func (rs *Runners) Close() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.epoch++
	for _, r := range rs.idle {
		r.idx = -1
		r.ch <- work{}
	}
	rs.idle = nil
	if rs.reaping {
		rs.reap.Stop()
		rs.reaping = false
	}
}
