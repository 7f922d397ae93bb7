package schedule

import (
	"bytes"
	"runtime"
	"strconv"
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
	clk  clockwork.Clock
	exec func(*taskRun)
	wg   sync.WaitGroup

	mu       sync.Mutex
	core     int
	max      int
	alive    time.Duration
	queueCap int
	queue    []*taskRun
	workers  int
	idle     []*worker
	active   map[*taskRun]struct{}
	closed   bool
}

type worker struct {
	ch  chan *taskRun // a task, or nil to re-evaluate; at most one send per idle spell
	gid uint64
}

type poolSize struct {
	core, max, queue int
	alive            time.Duration
}

func newPool(clk clockwork.Clock, size poolSize, exec func(*taskRun)) *pool {
	p := &pool{clk: clk, exec: exec, active: map[*taskRun]struct{}{}}
	p.core, p.max, p.queueCap, p.alive = size.core, size.max, size.queue, size.alive
	return p
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
	case len(p.queue) < p.queueCap:
		p.queue = append(p.queue, run)
	default:
		return false, false
	}
	return true, false
}

// spawn starts a worker; called with p.mu held.
func (p *pool) spawn(first *taskRun) {
	p.workers++
	p.wg.Add(1)
	w := &worker{ch: make(chan *taskRun, 1)}
	go p.work(w, first)
}

// pop takes the next queued run; called with p.mu held.
func (p *pool) pop() *taskRun {
	if len(p.queue) == 0 {
		return nil
	}
	r := p.queue[0]
	p.queue[0] = nil
	p.queue = p.queue[1:]
	return r
}

func (p *pool) work(w *worker, run *taskRun) {
	defer p.wg.Done()
	w.gid = goroutineID()
	for {
		if run != nil {
			p.runOne(w, run)
		}
		p.mu.Lock()
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
		var tm clockwork.Timer
		if p.workers > p.core {
			tm = p.clk.NewTimer(p.alive)
			expiry = tm.Chan()
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
		if tm != nil {
			tm.Stop()
		}
	}
}

func (p *pool) runOne(w *worker, run *taskRun) {
	p.mu.Lock()
	run.worker = w
	p.active[run] = struct{}{}
	p.mu.Unlock()
	p.exec(run)
	p.mu.Lock()
	delete(p.active, run)
	p.mu.Unlock()
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
	for len(p.queue) > 0 && p.workers < p.max {
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
	q := p.queue
	p.queue = nil
	p.nudgeIdle()
	return q
}

// counts returns how many tasks wait and run.
func (p *pool) counts() (waiting, active int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.queue {
		if !r.isDone() {
			waiting++
		}
	}
	return waiting, len(p.active)
}

func (p *pool) snapshot() (waiting, active []*taskRun, gids map[*taskRun]uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.queue {
		if !r.isDone() {
			waiting = append(waiting, r)
		}
	}
	gids = map[*taskRun]uint64{}
	for r := range p.active {
		active = append(active, r)
		gids[r] = r.worker.gid
	}
	return waiting, active, gids
}

func (p *pool) activeRuns() []*taskRun {
	_, a, _ := p.snapshot()
	return a
}

// goroutineID reads the current goroutine's id from its stack header.
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		id, _ := strconv.ParseUint(string(b[:i]), 10, 64)
		return id
	}
	return 0
}

// goroutineStacks returns the stacks of the given goroutines.
func goroutineStacks(ids map[uint64]bool) map[uint64]string {
	out := map[uint64]string{}
	if len(ids) == 0 {
		return out
	}
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for _, block := range bytes.Split(buf, []byte("\n\n")) {
		rest := bytes.TrimPrefix(block, []byte("goroutine "))
		i := bytes.IndexByte(rest, ' ')
		if i <= 0 {
			continue
		}
		id, err := strconv.ParseUint(string(rest[:i]), 10, 64)
		if err == nil && ids[id] {
			out[id] = string(block)
		}
	}
	return out
}
