package schedule

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// pool is a context's bounded worker pool.
//
// Unlike java.util.concurrent.ThreadPoolExecutor, which spring-fom uses and
// which only grows past its core size once the queue is full, a task here
// goes to an idle worker, else to a new worker while fewer than max run,
// and only then waits in the queue. So threadMax really is "tasks running
// at once", whatever queueSize is.
type pool struct {
	// What a round that lends its goroutine reads and writes (lend, help,
	// runLocked), first and together: with thousands of schedules, each
	// line of a pool is one a fire finds cold.
	mu      sync.Mutex
	closed  bool
	workers int
	max     int
	helper  *worker // the round goroutine when it lends itself; made once
	active  runList
	queue   fifo[*taskRun]

	c        *Context // runs a task: c.exec(gen, run), with no closure to fetch from memory on a fire
	gen      *generation
	wg       sync.WaitGroup
	core     int
	alive    time.Duration
	queueCap int
	idle     []*worker
	spawned  int // workers ever started, for their labels
}

type worker struct {
	ch     chan *taskRun   // a task, or nil to re-evaluate; at most one send per idle spell
	label  string          // its goroutine's pprof label value, which finds its stack
	labels context.Context // carries that label
	expiry clockwork.Timer // ends an idle spell above core; one for the worker's life
}

// workerLabel is the pprof goroutine label that marks a worker, so that
// ActiveTasks can show a running task's stack. (A goroutine id would do,
// but reading one costs a whole traceback.)
const workerLabel = "fom.worker"

func (p *pool) newWorker(helper bool) *worker {
	label := fmt.Sprintf("%p/round", p)
	if !helper {
		p.spawned++
		label = fmt.Sprintf("%p/%d", p, p.spawned)
	}
	return &worker{label: label, labels: pprof.WithLabels(context.Background(), pprof.Labels(workerLabel, label))}
}

type poolSize struct {
	core, max, queue int
	alive            time.Duration
}

// init sets up an empty pool of gen, which holds it (generation.pool).
func (p *pool) init(c *Context, gen *generation, size poolSize) {
	*p = pool{c: c, gen: gen}
	p.core, p.max, p.queueCap, p.alive = size.core, size.max, size.queue, size.alive
}

// submit hands run to the pool. It returns false, changing nothing, when the
// queue is full or the pool is closed (closed reports which).
func (p *pool) submit(run *taskRun) (ok, closed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return false, true
	case len(p.idle) > 0:
		w := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		w.ch <- run
	case p.workers < p.max:
		p.spawn(run)
	case p.queue.len() < p.queueCap:
		p.queue.push(run)
	default:
		return false, false
	}
	return true, false
}

// spawn starts a worker; called with p.mu held.
func (p *pool) spawn(first *taskRun) {
	p.workers++
	p.wg.Add(1)
	w := p.newWorker(false)
	w.ch = make(chan *taskRun, 1)
	go p.work(w, first)
}

// pop takes the next queued run; called with p.mu held.
func (p *pool) pop() *taskRun {
	return p.queue.pop()
}

func (p *pool) work(w *worker, run *taskRun) {
	defer p.wg.Done()
	for {
		p.mu.Lock()
		if run != nil {
			p.runLocked(w, run, nil)
		}
		if p.closed || p.workers > p.max {
			p.workers--
			p.mu.Unlock()
			return
		}
		if run = p.pop(); run != nil {
			p.mu.Unlock()
			continue
		}
		p.idle = append(p.idle, w)
		var expiry <-chan time.Time
		if p.workers > p.core {
			expiry = w.arm(p.c.clk, p.alive)
		}
		p.mu.Unlock()
		select {
		case run = <-w.ch:
		case <-expiry:
			p.mu.Lock()
			if p.removeIdle(w) {
				if p.workers > p.core {
					p.workers--
					p.mu.Unlock()
					return
				}
				p.mu.Unlock()
				continue
			}
			p.mu.Unlock()
			run = <-w.ch // handed a task just as the timer fired
		}
		if expiry != nil {
			w.disarm()
		}
	}
}

// arm starts the worker's idle expiry: its timer is made once and reset
// for each idle spell, not allocated per task.
func (w *worker) arm(clk clockwork.Clock, d time.Duration) <-chan time.Time {
	if w.expiry == nil {
		w.expiry = clk.NewTimer(d)
	} else {
		w.expiry.Reset(d)
	}
	return w.expiry.Chan()
}

// disarm stops the idle expiry and drops a fire nobody read (a fake
// clock's timer keeps it in its channel), so that the next spell does not
// see it.
func (w *worker) disarm() {
	if !w.expiry.Stop() {
		select {
		case <-w.expiry.Chan():
		default:
		}
	}
}

// runLocked runs run as worker w, on runner rn's goroutine when rn is not
// nil. It is called with p.mu held and returns with it held, releasing it
// while the task runs: the caller decides what the worker does next under
// the same lock that ends the run.
//
// The goroutine is labelled for the task, so that ActiveTasks finds its
// stack: with the worker's label, or on a runner with the runner's own,
// which is in its goroutine's cache where a worker's would be one more
// line to fetch on every fire. It is set before every run (a task may
// change its goroutine's labels) and cleared after the last (help): a
// goroutine fom starts outside a task must not carry it.
func (p *pool) runLocked(w *worker, run *taskRun, rn *runner) {
	if rn == nil || rn.labels == nil { // a runner made by hand (tests, benchmarks) has none
		pprof.SetGoroutineLabels(w.labels)
		run.label = &w.label
	} else {
		pprof.SetGoroutineLabels(rn.labels)
		run.label = &rn.label
	}
	p.active.add(run)
	p.mu.Unlock()
	p.c.exec(p.gen, run)
	p.mu.Lock()
	p.active.remove(run)
	run.group.release()
}

// runList is a pool's running tasks, oldest first, linked through the runs
// themselves: adding or removing one touches it and its neighbours only,
// with no table to hash into or allocate, on every task's path.
type runList struct {
	head, tail *taskRun
	n          int
}

func (l *runList) add(r *taskRun) {
	r.prevActive, r.nextActive = l.tail, nil
	if l.tail != nil {
		l.tail.nextActive = r
	} else {
		l.head = r
	}
	l.tail = r
	l.n++
}

func (l *runList) remove(r *taskRun) {
	if r.prevActive != nil {
		r.prevActive.nextActive = r.nextActive
	} else {
		l.head = r.nextActive
	}
	if r.nextActive != nil {
		r.nextActive.prevActive = r.prevActive
	} else {
		l.tail = r.prevActive
	}
	r.prevActive, r.nextActive = nil, nil
	l.n--
}

// lend makes the calling goroutine one of the pool's workers, if a worker
// slot is free, and returns its worker; nil if none is free or the pool is
// closed. The caller runs its first task with help and ends with it.
func (p *pool) lend() *worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.workers >= p.max {
		return nil
	}
	p.workers++
	if p.helper == nil {
		p.helper = p.newWorker(true)
	}
	return p.helper
}

// ready makes the worker lend returns before the first round asks for it
// (see Context.readyLocked).
func (p *pool) ready() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.helper == nil && !p.closed {
		p.helper = p.newWorker(true)
	}
}

// help runs first on the calling goroutine as worker w, then the queued
// tasks of first's group (never another round's or batch's, which would
// hold this round up), and gives the worker slot back; a task still queued
// then gets a worker if a slot is free. first may be nil.
//
// It takes the pool's lock before each run and after it, where it also
// finds the next run or, after the last, gives the slot back: twice for a
// round of one task (every fire's path).
func (p *pool) help(w *worker, first *taskRun, rn *runner) {
	run := first
	p.mu.Lock()
	for run != nil {
		g := run.group
		p.runLocked(w, run, rn)
		run = nil
		if !p.closed && p.workers <= p.max {
			run = p.popGroup(g)
		}
	}
	p.workers--
	for !p.closed && p.queue.len() > 0 && p.workers < p.max {
		p.spawn(p.pop())
	}
	p.mu.Unlock()
	if first != nil {
		pprof.SetGoroutineLabels(context.Background())
	}
}

// popGroup takes the oldest queued run of g; called with p.mu held.
func (p *pool) popGroup(g *group) *taskRun {
	for i, r := range p.queue.waiting() {
		if r.group == g {
			p.queue.removeAt(i)
			return r
		}
	}
	return nil
}

// removeIdle takes w off the idle stack; called with p.mu held.
func (p *pool) removeIdle(w *worker) bool {
	for i, x := range p.idle {
		if x == w {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			return true
		}
	}
	return false
}

// nudgeIdle makes every idle worker re-evaluate; called with p.mu held.
func (p *pool) nudgeIdle() {
	for _, w := range p.idle {
		w.ch <- nil
	}
	p.idle = p.idle[:0]
}

// resize applies new sizes at once: more workers start for queued tasks,
// surplus ones exit when their task returns or they are idle.
func (p *pool) resize(s poolSize) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.core, p.max, p.queueCap, p.alive = s.core, s.max, s.queue, s.alive
	if p.closed {
		return
	}
	for p.queue.len() > 0 && p.workers < p.max {
		p.spawn(p.pop())
	}
	p.nudgeIdle()
}

// close stops accepting tasks and returns the queued ones, which will never
// run. Workers exit once their current task returns.
func (p *pool) close() []*taskRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	q := p.queue.drain()
	p.nudgeIdle()
	return q
}

// counts returns how many tasks wait and run.
// counts returns the queued tasks, the running ones, how many of those are
// abandoned (decided, still holding their worker) and the worker slots.
func (p *pool) counts() (waiting, active, abandoned, slots int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.queue.waiting() {
		if !r.isDone() {
			waiting++
		}
	}
	for r := p.active.head; r != nil; r = r.nextActive {
		if r.isDone() {
			abandoned++
		}
	}
	return waiting, p.active.n, abandoned, p.max
}

// runView is what the pool shows of a run, read under its lock: once a
// run leaves the queue or its worker, its group may be used again by
// another batch (group.release).
type runView struct {
	TaskInfo
	label string // its worker's goroutine label
}

// snapshot returns the queued runs without an outcome and the active ones.
func (p *pool) snapshot() (waiting, active []runView) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.queue.waiting() {
		if !r.isDone() {
			waiting = append(waiting, runView{TaskInfo: TaskInfo{ID: r.id, Round: r.group.number, Batch: r.group.batch, Submitted: r.submitted}})
		}
	}
	for r := p.active.head; r != nil; r = r.nextActive {
		started, _ := r.startInfo()
		active = append(active, runView{TaskInfo{ID: r.id, Round: r.group.number, Batch: r.group.batch, Submitted: r.submitted, Started: started, Abandoned: r.isDone()}, *r.label})
	}
	return waiting, active
}

// activeRuns returns the runs on a worker. A shutdown interrupts them:
// no batch is submitted meanwhile, so none of their groups is used again
// while it does, though a worker may let go of it.
func (p *pool) activeRuns() []*taskRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*taskRun
	for r := p.active.head; r != nil; r = r.nextActive {
		out = append(out, r)
	}
	return out
}

// workerStacks returns the stacks of the worker goroutines with the given
// labels, from the goroutine profile, formatted like runtime.Stack.
func workerStacks(labels map[string]bool) map[string]string {
	out := map[string]string{}
	if len(labels) == 0 {
		return out
	}
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		return out
	}
	for _, block := range strings.Split(buf.String(), "\n\n") {
		var label string
		var frames strings.Builder
		for _, line := range strings.Split(block, "\n") {
			if rest, ok := strings.CutPrefix(line, "# labels: "); ok {
				for l := range labels {
					if strings.Contains(rest, strconv.Quote(workerLabel)+":"+strconv.Quote(l)) {
						label = l
					}
				}
				continue
			}
			// "#\t0x4dbfbd\tmain.blocker+0x7d\t/tmp/main.go:10"
			f := strings.Fields(strings.TrimPrefix(line, "#"))
			if len(f) == 3 && strings.HasPrefix(f[0], "0x") {
				fn, _, _ := strings.Cut(f[1], "+0x")
				fmt.Fprintf(&frames, "%s(...)\n\t%s\n", fn, f[2])
			}
		}
		if label != "" && out[label] == "" {
			out[label] = frames.String()
		}
	}
	return out
}
