// Package wheel is a hierarchical timing wheel for very many one-shot
// timers, most of which are canceled before they fire ("close this order if
// it is still unpaid in 30 minutes").
//
// Levels follow Kafka's design with one change. Each level has size
// buckets; level 0 has one per tick, level i one per r^i ticks where
// r = size/2, so every level spans two of the next coarser level's buckets.
// A timer goes to the finest level whose span covers it. A coarse bucket
// moves its timers down one whole bucket-width before they are due, and at
// most cascadeChunk of them per tick, finer buckets first: the cascade of a
// busy coarse bucket never delays timers that are about to fire, which a
// plain Kafka wheel does (its cascade runs exactly when the timers are due).
// Buckets that hold timers sit in a min-heap by due time, and one advancing
// goroutine sleeps until the earliest: an idle wheel costs nothing and empty
// ticks are skipped. A timer's due tick is rounded up and checked again at
// expiry, so a timer never fires early. Add and cancel are O(1) through
// intrusive lists (plus O(log buckets) when a bucket first fills); entries
// are pooled and guarded by a generation so a stale *Timer cannot touch a
// reused entry. Expired callbacks are run by dispatcher goroutines, never by
// the advancing one, so a slow callback delays no other timer.
package wheel

import (
	"container/heap"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fom-go/fom/internal/clockx"
)

// Errors of the wheel.
var (
	ErrFull    = errors.New("wheel: pending timer limit reached")
	ErrStopped = errors.New("wheel: stopped")
)

// Option configures a Wheel.
type Option func(*Wheel) error

// WithClock sets the clock (tests pass a fake one). Default: real time.
func WithClock(c clockwork.Clock) Option {
	return func(w *Wheel) error {
		if c == nil {
			return errors.New("wheel: clock is nil")
		}
		w.clk = c
		return nil
	}
}

// WithTick sets the resolution. Default 1ms.
func WithTick(d time.Duration) Option {
	return func(w *Wheel) error {
		if d <= 0 {
			return fmt.Errorf("wheel: tick %s must be positive", d)
		}
		w.tick = int64(d)
		return nil
	}
}

// WithSize sets the number of buckets per level, an even number. Default 512.
func WithSize(n int) Option {
	return func(w *Wheel) error {
		if n < 4 || n > 1<<16 || n%2 != 0 {
			return fmt.Errorf("wheel: size %d must be even and between 4 and 65536", n)
		}
		w.size = int64(n)
		return nil
	}
}

// WithMaxPending bounds the pending timers; more are rejected with ErrFull.
// Default 0: no bound.
func WithMaxPending(n int) Option {
	return func(w *Wheel) error {
		if n < 0 {
			return fmt.Errorf("wheel: max pending %d must not be negative", n)
		}
		w.maxPending = n
		return nil
	}
}

// WithDispatchers sets how many goroutines run expired callbacks.
// Default GOMAXPROCS.
func WithDispatchers(n int) Option {
	return func(w *Wheel) error {
		if n < 1 {
			return fmt.Errorf("wheel: dispatchers %d must be at least 1", n)
		}
		w.dispatchers = n
		return nil
	}
}

// Wheel is a hierarchical timing wheel. Its goroutines start with the first
// pending timer and end when none is pending, or at Stop: an idle wheel
// holds no goroutine, so a wheel shared by many schedules needs no
// lifecycle of its own.
type Wheel struct {
	clk         clockwork.Clock
	tick        int64 // ns
	size        int64
	maxPending  int
	dispatchers int
	chunk       int // timers a cascade moves per tick
	start       time.Time

	mu      sync.Mutex
	levels  []*level
	current int64 // ticks since start that have been processed
	due     bucketHeap
	pending int
	running bool
	stopped bool
	wake    chan struct{}
	quit    chan struct{}
	wg      sync.WaitGroup
	free    []*entry // entry pool; a sync.Pool would hide reuse from the generation check's lock
}

// cascadeChunk bounds the timers a coarse bucket moves down per tick, and
// so how long the lock is held for a cascade.
const cascadeChunk = 4096

// idleLinger is how long an idle wheel keeps its goroutines before they
// end, so that a wheel whose last timer keeps being replaced does not
// start and stop them each time. Real time: it changes no timer's fire.
const idleLinger = 100 * time.Millisecond

type level struct {
	interval int64 // ticks per bucket
	buckets  []bucket
}

// bucket is an intrusive list of entries due at the same (level) time.
type bucket struct {
	head, tail *entry
	due        int64 // ticks; meaningful while in the heap
	heapIndex  int   // -1 when not in the heap
	level      int
}

type entry struct {
	next, prev *entry
	b          *bucket
	at         int64 // due tick: expiry rounded up to a tick
	f          func()
	gen        uint64 // generation << 1 | 1 when f runs inline (one word: entries stay 48 bytes)
}

func (e *entry) inline() bool { return e.gen&1 == 1 }

// Timer is a pending callback. Stop cancels it.
type Timer struct {
	w   *Wheel
	e   *entry
	gen uint64
}

// New returns a wheel. It starts no goroutine until the first timer.
func New(opts ...Option) (*Wheel, error) {
	w := &Wheel{clk: clockwork.NewRealClock(), tick: int64(time.Millisecond), size: 512, dispatchers: runtime.GOMAXPROCS(0), chunk: cascadeChunk}
	for _, o := range opts {
		if err := o(w); err != nil {
			return nil, err
		}
	}
	w.start = w.clk.Now()
	w.wake = make(chan struct{}, 1)
	w.quit = make(chan struct{})
	return w, nil
}

// AfterFunc calls f in its own dispatcher goroutine once d has passed. It
// returns nil if the wheel is full or stopped; use TryAfterFunc to learn why.
func (w *Wheel) AfterFunc(d time.Duration, f func()) *Timer {
	t, _ := w.TryAfterFunc(d, f)
	return t
}

// AfterFuncInline is AfterFunc for a callback that returns at once: f runs
// on the advancing goroutine itself, saving the hand-off to a dispatcher.
// It must not block, wait for a lock held for long or stop the wheel,
// since every other timer of the wheel waits while it runs. fom's schedules use it for their
// wake-ups, which only hand the round to a goroutine of its own.
func (w *Wheel) AfterFuncInline(d time.Duration, f func()) *Timer {
	t, _ := w.add(d, f, true)
	return t
}

// TryAfterFunc is AfterFunc with an error for a full or stopped wheel.
func (w *Wheel) TryAfterFunc(d time.Duration, f func()) (*Timer, error) {
	return w.add(d, f, false)
}

func (w *Wheel) add(d time.Duration, f func(), inline bool) (*Timer, error) {
	if f == nil {
		return nil, errors.New("wheel: nil func")
	}
	elapsed := int64(w.clk.Now().Sub(w.start))
	at := (elapsed + int64(max(d, 0)) + w.tick - 1) / w.tick // round up: never early
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return nil, ErrStopped
	}
	if w.maxPending > 0 && w.pending >= w.maxPending {
		w.mu.Unlock()
		return nil, ErrFull
	}
	if !w.running {
		w.startLocked()
	}
	if w.pending == 0 && w.due.Len() == 0 {
		// Nothing pending: the processed time may jump to now, so a new
		// timer lands on the finest level.
		w.current = max(w.current, elapsed/w.tick)
	}
	e := w.newEntry()
	// Due at once (d <= 0, or the wheel is behind): file it for the tick
	// being processed, so the advancing goroutine fires it next.
	e.at, e.f = max(at, w.current), f
	if inline {
		e.gen |= 1
	}
	gen := e.gen
	w.pending++
	first := w.insert(e)
	w.mu.Unlock()
	if first {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	return &Timer{w: w, e: e, gen: gen}, nil
}

// Stop cancels the timer. It returns true if the call stopped it, false if
// it had already fired, been stopped, or t is nil.
func (t *Timer) Stop() bool {
	if t == nil {
		return false
	}
	w := t.w
	w.mu.Lock()
	defer w.mu.Unlock()
	e := t.e
	if e.gen != t.gen || e.b == nil {
		return false
	}
	e.b.remove(e)
	w.pending--
	w.recycle(e)
	if w.pending == 0 {
		select { // let an idle wheel's goroutines end now, not at the stale due time
		case w.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// Pending returns the number of timers that have neither fired nor been stopped.
func (w *Wheel) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pending
}

// Stop stops the wheel and returns the callbacks of the timers that never
// ran. Callbacks already handed to a dispatcher still run; Stop waits for
// them. Safe to call twice and before any timer.
func (w *Wheel) Stop() []func() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return nil
	}
	w.stopped = true
	var left []func()
	for _, l := range w.levels {
		for i := range l.buckets {
			b := &l.buckets[i]
			for e := b.head; e != nil; {
				next := e.next
				left = append(left, e.f)
				e.b, e.next, e.prev = nil, nil, nil
				w.recycle(e)
				e = next
			}
			b.head, b.tail = nil, nil
		}
	}
	w.pending = 0
	for _, b := range w.due {
		b.heapIndex = -1
	}
	w.due = w.due[:0]
	running := w.running
	w.mu.Unlock()
	if running {
		close(w.quit)
		w.wg.Wait()
	}
	return left
}

func (w *Wheel) newEntry() *entry {
	if n := len(w.free); n > 0 {
		e := w.free[n-1]
		w.free = w.free[:n-1]
		return e
	}
	return &entry{}
}

// recycle invalidates outstanding *Timer handles and pools the entry.
func (w *Wheel) recycle(e *entry) {
	e.gen = e.gen&^1 + 2
	e.f = nil
	e.b = nil
	if len(w.free) < 1<<16 {
		w.free = append(w.free, e)
	}
}

// insert files e by its due tick; true if it made a new earliest bucket.
// Called with mu held and e.at >= w.current.
func (w *Wheel) insert(e *entry) bool {
	delta := e.at - w.current
	r := w.size / 2
	lvl, interval := 0, int64(1)
	for delta >= w.size*interval && interval <= (1<<62)/w.size {
		interval *= r
		lvl++
	}
	for len(w.levels) <= lvl {
		iv := int64(1)
		for range len(w.levels) {
			iv *= r
		}
		l := &level{interval: iv, buckets: make([]bucket, w.size)}
		for i := range l.buckets {
			l.buckets[i].heapIndex = -1
			l.buckets[i].level = len(w.levels)
		}
		w.levels = append(w.levels, l)
	}
	l := w.levels[lvl]
	slot := e.at / l.interval
	b := &l.buckets[slot%w.size]
	b.push(e)
	due := e.at
	if lvl > 0 {
		// One bucket-width early: then every timer of the bucket is within
		// the finer level's span, and the move is done before any is due.
		due = max(slot*l.interval-l.interval, w.current)
	}
	switch {
	case b.heapIndex < 0:
		b.due = due
		heap.Push(&w.due, b)
	case due < b.due:
		b.due = due
		heap.Fix(&w.due, b.heapIndex)
	default:
		return false
	}
	return b.heapIndex == 0
}

func (b *bucket) push(e *entry) {
	e.b, e.prev, e.next = b, b.tail, nil
	if b.tail != nil {
		b.tail.next = e
	} else {
		b.head = e
	}
	b.tail = e
}

func (b *bucket) remove(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		b.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		b.tail = e.prev
	}
	e.next, e.prev, e.b = nil, nil, nil
	// An emptied bucket stays in the heap; it pops as a no-op.
}

// startLocked starts one activation: an advancing goroutine and its
// dispatchers, which share a channel of expired callbacks.
func (w *Wheel) startLocked() {
	w.running = true
	out := make(chan []func(), 64)
	w.wg.Add(1 + w.dispatchers)
	go w.advance(out)
	for range w.dispatchers {
		go w.run(out)
	}
}

// run is a dispatcher goroutine: it runs callbacks until its activation's
// advancing goroutine closes out.
func (w *Wheel) run(out chan []func()) {
	defer w.wg.Done()
	for fs := range out {
		for _, f := range fs {
			f()
		}
	}
}

// advance is the goroutine that moves time forward. It returns, ending
// its activation, when no timer is pending or the wheel stops.
func (w *Wheel) advance(out chan []func()) {
	defer w.wg.Done()
	defer close(out) // dispatchers finish what they were handed, then exit
	var fired, inline []func()
	lingered := false
	for {
		w.mu.Lock()
		if w.stopped {
			w.mu.Unlock()
			return
		}
		if w.pending == 0 {
			for _, b := range w.due { // only emptied buckets are left
				b.heapIndex = -1
			}
			w.due = w.due[:0]
			if lingered {
				w.running = false
				w.mu.Unlock()
				return
			}
			w.mu.Unlock()
			linger := time.NewTimer(idleLinger)
			select {
			case <-w.wake:
			case <-linger.C:
				lingered = true
			case <-w.quit:
			}
			linger.Stop()
			continue
		}
		lingered = false
		b := w.due[0]
		dueAt := w.start.Add(time.Duration(b.due * w.tick))
		if !clockx.Reached(w.clk, dueAt) {
			w.mu.Unlock()
			tm := clockx.TimerAt(w.clk, dueAt)
			select {
			case <-tm.Chan():
			case <-w.wake:
			case <-w.quit:
				tm.Stop()
				return
			}
			tm.Stop()
			continue
		}
		heap.Pop(&w.due)
		w.current = max(w.current, b.due)
		if b.level == 0 {
			head := b.head
			b.head, b.tail = nil, nil
			for e := head; e != nil; {
				next := e.next
				e.next, e.prev, e.b = nil, nil, nil
				if e.at <= w.current {
					if e.inline() {
						inline = append(inline, e.f)
					} else {
						fired = append(fired, e.f)
					}
					w.pending--
					w.recycle(e)
				} else {
					w.insert(e) // filed while the wheel was behind
				}
				e = next
			}
		} else {
			fired, inline = w.cascade(b, fired, inline)
		}
		w.mu.Unlock()
		if len(fired) > 0 {
			out <- fired
			fired = make([]func(), 0, len(fired))
		}
		for i, f := range inline {
			f()
			inline[i] = nil
		}
		inline = inline[:0]
	}
}

// cascade moves up to cascadeChunk of a coarse bucket's timers down; the
// rest wait for the next tick, behind any finer bucket due then. Called
// with mu held.
func (w *Wheel) cascade(b *bucket, fired, inline []func()) ([]func(), []func()) {
	for n := 0; b.head != nil && n < w.chunk; n++ {
		e := b.head
		b.head = e.next
		if b.head == nil {
			b.tail = nil
		} else {
			b.head.prev = nil
		}
		e.next, e.prev, e.b = nil, nil, nil
		if e.at <= w.current { // the wheel fell behind: due already
			if e.inline() {
				inline = append(inline, e.f)
			} else {
				fired = append(fired, e.f)
			}
			w.pending--
			w.recycle(e)
			continue
		}
		w.insert(e)
	}
	if b.head != nil && b.heapIndex < 0 {
		b.due = w.current + 1
		heap.Push(&w.due, b)
	}
	return fired, inline
}

type bucketHeap []*bucket

func (h bucketHeap) Len() int { return len(h) }

// Less orders by due tick, finer levels first, so that timers about to
// fire go before a cascade due at the same tick.
func (h bucketHeap) Less(i, j int) bool {
	if h[i].due != h[j].due {
		return h[i].due < h[j].due
	}
	return h[i].level < h[j].level
}
func (h bucketHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex = i
	h[j].heapIndex = j
}
func (h *bucketHeap) Push(x any) {
	b := x.(*bucket)
	b.heapIndex = len(*h)
	*h = append(*h, b)
}
func (h *bucketHeap) Pop() any {
	old := *h
	b := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	b.heapIndex = -1
	return b
}
