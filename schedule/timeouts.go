package schedule

import (
	"container/heap"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// timeouts is a context's one delay heap of deadlines, for tasks (each
// from its own start) and for rounds (one deadline from submission). A
// single watcher goroutine sleeps until the earliest deadline; it exists
// only while the heap is not empty.
type timeouts struct {
	clk    clockwork.Clock
	expire func(e deadline)
	wg     *sync.WaitGroup

	mu      sync.Mutex
	h       deadlineHeap
	wake    chan struct{}
	running bool
}

// deadline is a heap entry: a task run or a group.
type deadline struct {
	at    time.Time
	run   *taskRun
	group *group
}

func newTimeouts(clk clockwork.Clock, wg *sync.WaitGroup, expire func(deadline)) *timeouts {
	return &timeouts{clk: clk, wg: wg, expire: expire, wake: make(chan struct{}, 1)}
}

func (t *timeouts) add(d deadline) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d.run != nil {
		d.run.deadline = d.at
	} else {
		d.group.deadline = d.at
	}
	heap.Push(&t.h, d)
	if t.h.index(d) == 0 {
		t.notify()
	}
	if !t.running {
		t.running = true
		t.wg.Add(1)
		go t.watch()
	}
}

// remove drops a run's or group's deadline, if any.
func (t *timeouts) remove(r *taskRun, g *group) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := -1
	if r != nil {
		i = r.heapIndex
	} else if g != nil {
		i = g.heapIndex
	}
	if i < 0 {
		return
	}
	heap.Remove(&t.h, i)
	if len(t.h) == 0 {
		t.notify() // let the watcher exit now rather than at the stale deadline
	}
}

func (t *timeouts) notify() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

func (t *timeouts) watch() {
	defer t.wg.Done()
	for {
		t.mu.Lock()
		if len(t.h) == 0 {
			t.running = false
			t.mu.Unlock()
			return
		}
		first := t.h[0]
		if reached(t.clk, first.at) {
			heap.Pop(&t.h)
			t.mu.Unlock()
			t.expire(first)
			continue
		}
		t.mu.Unlock()
		at := first.at
		if limit := t.clk.Now().Add(maxWait); limit.Before(at) {
			at = limit
		}
		tm := timerAt(t.clk, at)
		select {
		case <-tm.Chan():
		case <-t.wake:
		}
		tm.Stop()
	}
}

type deadlineHeap []deadline

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h.setIndex(i)
	h.setIndex(j)
}
func (h deadlineHeap) setIndex(i int) {
	if h[i].run != nil {
		h[i].run.heapIndex = i
	} else {
		h[i].group.heapIndex = i
	}
}
func (h *deadlineHeap) Push(x any) {
	*h = append(*h, x.(deadline))
	h.setIndex(len(*h) - 1)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	*h = old[:len(old)-1]
	if d.run != nil {
		d.run.heapIndex = -1
	} else {
		d.group.heapIndex = -1
	}
	return d
}
func (h deadlineHeap) index(d deadline) int {
	if d.run != nil {
		return d.run.heapIndex
	}
	return d.group.heapIndex
}
