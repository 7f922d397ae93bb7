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

// deadline is a heap entry: a task run, a group, or the generation's
// stall check.
type deadline struct {
	at    time.Time
	run   *taskRun
	group *group
	stall *stallCheck
}

// stallCheck is the one heap entry of a generation that looks for queued
// tasks stuck behind workers held by abandoned tasks (see checkStall).
type stallCheck struct{ heapIndex int }

// heapIndex returns where d's owner records its position.
func (d deadline) heapIndex() *int {
	switch {
	case d.run != nil:
		return &d.run.heapIndex
	case d.group != nil:
		return &d.group.heapIndex
	}
	return &d.stall.heapIndex
}

func newTimeouts(clk clockwork.Clock, wg *sync.WaitGroup, expire func(deadline)) *timeouts {
	return &timeouts{clk: clk, wg: wg, expire: expire, wake: make(chan struct{}, 1)}
}

func (t *timeouts) add(d deadline) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case d.run != nil:
		d.run.deadline = d.at
	case d.group != nil:
		d.group.deadline = d.at
	case d.stall.heapIndex >= 0:
		return // armed already: it re-arms itself
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
	switch {
	case r != nil:
		t.drop(&r.heapIndex)
	case g != nil:
		t.drop(&g.heapIndex)
	}
}

// removeStall drops the stall check, if armed.
func (t *timeouts) removeStall(s *stallCheck) { t.drop(&s.heapIndex) }

// drop removes the entry whose owner records its position at idx.
func (t *timeouts) drop(idx *int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := *idx
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
func (h deadlineHeap) setIndex(i int) { *h[i].heapIndex() = i }
func (h *deadlineHeap) Push(x any) {
	*h = append(*h, x.(deadline))
	h.setIndex(len(*h) - 1)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	*h = old[:len(old)-1]
	*d.heapIndex() = -1
	return d
}
func (h deadlineHeap) index(d deadline) int { return *d.heapIndex() }
