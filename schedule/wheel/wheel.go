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
// A coarse bucket that had only a few timers (lazyCascade) moves them at
// the tick its first one is due instead: a move that short delays nothing,
// and a wheel of a few timers far apart then wakes once per fire rather
// than twice.
// Buckets that hold timers sit in a min-heap by due time, and one advancing
// goroutine sleeps until the earliest: an idle wheel costs nothing and empty
// ticks are skipped. A timer's due tick is rounded up and checked again at
// expiry, so a timer never fires early. Add and cancel are O(1) through
// intrusive lists (plus O(log buckets) when a bucket first fills). Expired
// callbacks are run by dispatcher goroutines, never by the advancing one,
// so a slow callback delays no other timer; the exceptions are inline
// callbacks, which must return at once, and a Lender's work, run on the
// advancing goroutine only with a takeover armed for the next timer due.
//
// Entries live in an arena of fixed-size slabs and link to each other by
// index, not by pointer, and freed entries are reused. The slabs hold no
// pointers, so the garbage collector neither scans a million pending
// entries nor puts a write barrier on every link and unlink; only the
// callbacks sit in pointer slabs beside them. A callback is an interface
// (Callback), so a value that already holds a timer's state — a pointer to
// the caller's own struct — is stored as it is, with no closure allocated
// per timer; a func() is one too (Func), without an allocation either.
// A *Timer names its entry by index and by the timer's own id, unique for
// the wheel's life, so a stale handle can never stop the timer that reuses
// its entry. The handles AfterFunc returns are carved from blocks of 64, so
// an add costs a 64th of an allocation and the collector marks one object
// per 64 handles (Set and its kin write into a Timer the caller holds).
// The arena keeps the memory of the peak of pending timers while any is
// pending and is dropped when the wheel goes idle.
package wheel

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"reflect"
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

// Callback is what a timer calls when it fires, with the timer's id
// (Timer.ID): a callback armed again and again, as a schedule's wake-up is,
// tells a fire of an earlier arming, already on its way when that timer was
// stopped, from the current one.
//
// A pointer to the caller's own struct makes a Callback without an
// allocation per timer, where a method value or a closure costs one.
type Callback interface{ Fire(id uint64) }

// TimedCallback is a Callback armed inline (AfterFuncInline,
// SetInlineFrom) that is also told now, the reading of the wheel's clock
// by which the wheel found it due: a callback that would read the clock
// first thing reads none. now is at or past the timer's instant by the
// wheel's clock, and may be a little old (the callbacks due before it in
// the same tick ran since).
type TimedCallback interface {
	Callback
	FireAt(id uint64, now time.Time)
}

// Lender is a TimedCallback whose work may run on the wheel's advancing
// goroutine itself rather than on a goroutine it hands it to: fom's
// schedules, whose wake-up starts a round.
//
// Handing work to another goroutine wakes it, and on an otherwise idle
// process that means waking a second thread, whose core then runs the
// work cold: at a thousand schedules spread over the second, that
// hand-off was about a quarter of a fire's CPU. So when the wheel's next
// timer is at least lendQuiet away, the inline Lenders of a pass (on a
// wheel that coalesces them, WithCoalesce, the few a quiet wheel finds due
// at once; else, and of a burst of more than maxLent, the last one) are
// offered the advancing goroutine, one after the other: FireLend decides as FireAt would and
// returns true to take it, and RunLent then runs on that goroutine. Each
// is offered only once the one before it has returned, with a fresh
// reading of the clock. Before the first runs the wheel arms a takeover at
// its next due time (and again whenever an add makes an earlier one), and
// no later than lendQuiet when more than one is lent: if lent work is
// still running then, another goroutine takes over the wheel, the
// Lenders not yet offered go the way of any other (FireAt), and the lent
// goroutine ends when its work returns. Lent work therefore delays no
// timer by more than the takeover's own wake-up, nor a Lender lent behind
// it by more than lendQuiet, and costs two operations on a runtime timer
// a pass when it ends first, as it nearly always does.
type Lender interface {
	TimedCallback
	// FireLend is FireAt on a goroutine that can be lent: true asks the
	// wheel to call RunLent next, on the same goroutine.
	FireLend(id uint64, now time.Time) bool
	// RunLent runs the work FireLend took on. local is the advancing
	// goroutine's own slot, kept for the callbacks it runs next and never
	// shared with another goroutine: state of a goroutine (memory still
	// in its cache, a label) lives there.
	RunLent(local *any)
}

// Func is a func() as a Callback. Storing it costs no allocation.
type Func func()

// Fire calls f.
func (f Func) Fire(uint64) { f() }

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

// WithTick sets the resolution. Default 100µs: a timer fires up to one
// tick after its time, on top of the runtime's own wake-up delay (up to
// 1ms when every P is idle, as Linux's epoll_wait counts in milliseconds),
// and a finer tick costs a busy wheel more wake-ups but no measurable CPU
// (bench/README.md).
func WithTick(d time.Duration) Option {
	return func(w *Wheel) error {
		if d <= 0 {
			return fmt.Errorf("wheel: tick %s must be positive", d)
		}
		w.tick = int64(d)
		return nil
	}
}

// WithSize sets the number of buckets per level, a power of two (so that
// a timer finds its bucket by shifts, not divisions). Default 512.
func WithSize(n int) Option {
	return func(w *Wheel) error {
		if n < 4 || n > 1<<16 || n&(n-1) != 0 {
			return fmt.Errorf("wheel: size %d must be a power of two between 4 and 65536", n)
		}
		w.size = int64(n)
		return nil
	}
}

// MaxCoalesce is the most WithCoalesce takes: fires moved further would
// no longer keep a per-second schedule's rhythm.
const MaxCoalesce = time.Second

// WithCoalesce makes the wake-ups armed with SetInlineFrom (fom's
// schedules') due at the first multiple of d of wall time at or after
// their instant, rather than at their own tick. The fires of schedules
// due within d of each other then share one pass of the wheel, one
// wake-up of its goroutine, and (Lender) that goroutine: with thousands of
// schedules spread over the second, a wake-up per fire was most of a
// fire's CPU. A fire is then up to d late, never early; one planned on a
// whole multiple of d (a cron fire on the second) is not moved. Default 0:
// each is due at its own tick.
func WithCoalesce(d time.Duration) Option {
	return func(w *Wheel) error {
		if d < 0 || d > MaxCoalesce {
			return fmt.Errorf("wheel: coalesce %s must be between 0 and %s", d, MaxCoalesce)
		}
		w.coalesce = int64(d)
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
	tick        int64  // ns
	tickInv     uint64 // ⌊(2⁶⁴-1)/tick⌋, to divide by tick with a multiplication
	size        int64
	sizeBits    uint // log2(size)
	maxPending  int
	dispatchers int
	chunk       int   // timers a cascade moves per tick
	quietTicks  int64 // lendQuiet in ticks
	start       time.Time
	realClock   bool // the elapsed time can be read from the monotonic clock alone

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
	act     activation // the running activation's channels

	// Lending (Lender): lent is true while the advancing goroutine runs
	// lent work; lends counts lends, so that the goroutine back from one
	// knows whether it is still the one advancing; takeover starts
	// another advancing goroutine at the next due time while lent, or at
	// lendBy (elapsed ns, 0 for none) when Lenders wait in toLend, which
	// it then hands on. (lendBy and toLend are at the end, with coalesce:
	// the fields an add reads keep their lines.)
	lent     bool
	lends    uint64
	takeover clockwork.Timer

	// The arena. Entry index i (from 1; 0 is "none") is slot (i-1)%slabSize
	// of slab (i-1)/slabSize.
	slabs  []*[slabSize]entry
	fns    []*[slabSize]Callback
	used   int32  // indexes handed out so far
	free   int32  // the first unused entry, 0 for none: unused entries are a list through their next, reused last-in first-out
	lastID uint64 // the last timer id handed out

	handles []Timer // the rest of the block AfterFunc's handles are taken from

	lendBy   int64
	toLend   []expired // oldest first
	coalesce int64     // ns, 0 for none (WithCoalesce)
}

// slabSize is the number of entries per slab: 32 KiB of entries and 16 KiB
// of callbacks, so growing the arena never copies it.
const slabSize = 1024

// cascadeChunk bounds the timers a coarse bucket moves down per tick, and
// so how long the lock is held for a cascade.
const cascadeChunk = 4096

// lazyCascade is the most timers a coarse bucket may have had pushed since
// it was last empty for it to move them down when the first is due rather
// than a bucket-width early (insert): as many as one tick's cascade moves,
// so that such a move is done in one go (those due at once fire from it,
// and an aligned burst's timers are moved and fired in one pass). Stopped
// timers still count, and the earliest tick pushed stays when its timer
// stops: either only makes the move earlier than it needs to be, never
// late.
const lazyCascade = cascadeChunk

// idleLinger is how long an idle wheel keeps its goroutines before they
// end, so that a wheel whose last timer keeps being replaced does not
// start and stop them each time. Real time: it changes no timer's fire.
const idleLinger = 100 * time.Millisecond

// lendQuiet is how far off the wheel's next timer must be for the
// advancing goroutine to be lent (Lender). A wheel with timers due sooner
// is busy: its work goes to goroutines that are likely awake already, and
// lent work would more often still run at the next timer, which then
// takes another goroutine over. It also bounds how long the Lenders of a
// pass lent behind another wait for it. Real time, as a wheel's ticks are.
const lendQuiet = time.Millisecond

// maxLent is the most Lenders of a pass that are all lent the advancing
// goroutine, on a wheel that coalesces them. A quiet wheel's pass holds a
// few, all lent; of a burst of more (thousands due on the same second),
// only the last is, and the others go to goroutines of their own (FireAt),
// which run it several at a time. A wheel that does not coalesce (a test's
// clock, in an App) lends the last only: fires due at the same instant then
// run side by side, as a test that blocks one of them until another has
// run expects.
const maxLent = 16

// defaultTick is the resolution when WithTick is not given.
const defaultTick = 100 * time.Microsecond

type level struct {
	shift   uint // log2 of the ticks per bucket
	buckets []bucket
}

// bucket is an intrusive list of entries due at the same (level) time.
type bucket struct {
	head, tail int32 // entry indexes
	ref        int32 // this bucket's bucketRef
	pushed     int32 // entries pushed since it was last empty (never less than it holds)
	heapIndex  int   // -1 when not in the heap
	due        int64 // ticks; meaningful while in the heap
	firstAt    int64 // the earliest due tick pushed since it was last empty
	level      int
}

// bucketRef names a bucket in an entry: level<<16 | slot, plus one so that
// zero means "not filed".
func bucketRef(level, slot int) int32 { return int32(level<<16|slot) + 1 }

// entry is one timer in the arena. It holds no pointer.
type entry struct {
	next, prev int32 // entry indexes in the bucket's list
	b          int32 // bucketRef of the bucket holding it; 0 when not filed
	inline     bool  // the callback runs on the advancing goroutine
	at         int64 // due tick: expiry rounded up to a tick
	id         uint64
}

// Timer is a pending callback. Stop cancels it.
type Timer struct {
	w  *Wheel
	id uint64 // the timer's id: its entry's while it is pending
	e  int32  // entry index
}

// New returns a wheel. It starts no goroutine until the first timer.
func New(opts ...Option) (*Wheel, error) {
	w := &Wheel{clk: clockwork.NewRealClock(), tick: int64(defaultTick), size: 512, dispatchers: runtime.GOMAXPROCS(0), chunk: cascadeChunk}
	for _, o := range opts {
		if err := o(w); err != nil {
			return nil, err
		}
	}
	w.start = w.clk.Now()
	if w.coalesce > 0 {
		// Whole multiples of coalesce since start are whole multiples of
		// wall time too. Add keeps the monotonic reading.
		w.start = w.start.Add(-time.Duration(w.start.UnixNano() % w.coalesce))
	}
	w.tickInv = math.MaxUint64 / uint64(w.tick)
	w.quietTicks = max(1, int64(lendQuiet)/w.tick)
	w.sizeBits = uint(bits.TrailingZeros64(uint64(w.size)))
	// time.Since reads only the monotonic clock; a real clock's Now reads
	// the wall clock too, on every add.
	w.realClock = reflect.TypeOf(w.clk) == reflect.TypeOf(clockwork.NewRealClock())
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
// since every other timer of the wheel waits while it runs. fom's schedules
// use its kin SetInlineFrom for their wake-ups, which decide under a lock
// and then run the round on a goroutine the wheel lends (Lender) or hand
// it to a goroutine of its own.
func (w *Wheel) AfterFuncInline(d time.Duration, f func()) *Timer {
	if f == nil {
		return nil
	}
	t, err := w.add(nil, d, Func(f), true)
	if err != nil {
		return nil
	}
	return t
}

// TryAfterFunc is AfterFunc with an error for a full or stopped wheel.
func (w *Wheel) TryAfterFunc(d time.Duration, f func()) (*Timer, error) {
	if f == nil {
		return nil, errNilCallback
	}
	return w.add(nil, d, Func(f), false)
}

// Set is TryAfterFunc of a Callback into a Timer the caller holds (a field
// of its own struct), sparing the handle's allocation; t must not be in use.
func (w *Wheel) Set(t *Timer, d time.Duration, cb Callback) error {
	_, err := w.add(t, d, cb, false)
	return err
}

var errNilCallback = errors.New("wheel: nil callback")

// elapsed is the time since the wheel's start by its clock.
func (w *Wheel) elapsed() int64 {
	if w.realClock {
		return int64(time.Since(w.start))
	}
	return max(int64(w.clk.Now().Sub(w.start)), 0) // a clock set back is still at the start
}

// SetInlineFrom is AfterFuncInline of a Callback into a Timer the caller
// holds (t must not be in use), for a wait of d from from, a reading of the
// wheel's clock (with its monotonic reading, for a real one) that the
// caller made: the time between that reading and this call does not move
// the timer, and no clock is read. A caller that turned an instant into a
// wait by its own reading passes that reading, and the timer is due at the
// instant, however late the call.
//
// With WithCoalesce(g) the timer is due at the first multiple of g at or
// after that instant.
func (w *Wheel) SetInlineFrom(t *Timer, from time.Time, d time.Duration, cb Callback) error {
	start := max(int64(from.Sub(w.start)), 0)
	due := start + min(int64(max(d, 0)), math.MaxInt64-start)
	if g := w.coalesce; g > 0 {
		if r := due % g; r != 0 && due <= math.MaxInt64-g {
			due += g - r
		}
	}
	_, err := w.addAt(t, due, -1, cb, true)
	return err
}

// SetAfter is Set, and returns the instant the timer is due by the
// wheel's clock: its start moved by the elapsed time, read once (from the
// monotonic clock alone for a real one), plus d. A caller that wants the
// instant as well as the timer reads no clock of its own. (Its wall time
// is the start's moved by monotonic time: after a step of the wall clock
// it differs from the clock's Now plus d by that step.)
func (w *Wheel) SetAfter(t *Timer, d time.Duration, cb Callback) (time.Time, error) {
	now, due := w.after(d)
	if _, err := w.addAt(t, due, now, cb, false); err != nil {
		return time.Time{}, err
	}
	return w.start.Add(time.Duration(due)), nil
}

// after returns the elapsed time and the elapsed time at which a wait of
// d ends (now for a negative d, at most the end of time).
func (w *Wheel) after(d time.Duration) (now, due int64) {
	now = w.elapsed()
	return now, now + min(int64(max(d, 0)), math.MaxInt64-now)
}

func (w *Wheel) add(t *Timer, d time.Duration, cb Callback, inline bool) (*Timer, error) {
	now, due := w.after(d)
	return w.addAt(t, due, now, cb, inline)
}

// addAt adds a timer due at due ns after the start; now is the elapsed
// time of the caller's reading, or -1 when it made none. The timer is
// written to t, the caller's (written only on success), or, for a nil t,
// to a handle of the wheel's (handle).
func (w *Wheel) addAt(t *Timer, due, now int64, cb Callback, inline bool) (*Timer, error) {
	if cb == nil {
		return nil, errNilCallback
	}
	at := w.ticks(min(due, math.MaxInt64-w.tick) + w.tick - 1) // round up: never early
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return nil, ErrStopped
	}
	if w.maxPending > 0 && w.pending >= w.maxPending || w.free == 0 && w.used == math.MaxInt32 {
		w.mu.Unlock()
		return nil, ErrFull
	}
	if !w.running {
		w.startLocked()
	}
	if w.pending == 0 && w.due.Len() == 0 {
		// Nothing pending: the processed time may jump to now, so a new
		// timer lands on the finest level.
		if now < 0 {
			now = w.elapsed()
		}
		w.current = max(w.current, w.ticks(now))
	}
	i, e := w.newEntry()
	// Due at once (d <= 0, or the wheel is behind): file it for the tick
	// being processed, so the advancing goroutine fires it next.
	e.at, e.inline = max(at, w.current), inline
	*w.fn(i) = cb
	w.lastID++
	id := w.lastID
	e.id = id
	w.pending++
	first := w.insert(i, e)
	if t == nil {
		t = w.handle()
	}
	*t = Timer{w: w, id: id, e: i}
	if first && w.lent {
		// The advancing goroutine is lent: nothing listens on wake, and
		// the takeover must come no later than this timer.
		w.armTakeoverLocked(w.elapsed())
		first = false
	}
	w.mu.Unlock()
	if first {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	return t, nil
}

// handleBlock is how many handles AfterFunc allocates at a time.
const handleBlock = 64

// handle returns a handle for a timer of AfterFunc; called with mu held.
//
// Handles are carved from blocks of handleBlock (1 536 bytes, an exact
// size class): one allocation per 64 timers rather than one each, and one
// object for the collector to mark instead of 64. With a million pending
// timers that is most of an add's allocation cost and of a collection's
// marking. A handle is never used again (its caller may keep it), so a
// block stays in memory while any of its handles is referenced: at most
// 1.5 KiB for a timer whose handle outlives the others of its block.
func (w *Wheel) handle() *Timer {
	if len(w.handles) == 0 {
		w.handles = new([handleBlock]Timer)[:]
	}
	t := &w.handles[0]
	w.handles = w.handles[1:]
	return t
}

// ID returns the timer's id, unique for the wheel's life: what its
// Callback's Fire gets. Zero for a Timer never set.
func (t *Timer) ID() uint64 { return t.id }

// Stop cancels the timer. It returns true if the call stopped it, false if
// it had already fired, been stopped, or t is nil or was never set.
func (t *Timer) Stop() bool {
	if t == nil || t.w == nil {
		return false
	}
	w := t.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if t.e > w.used { // the arena was dropped since
		return false
	}
	e := w.entry(t.e)
	if e.id != t.id || e.b == 0 {
		return false
	}
	w.remove(t.e, e)
	w.pending--
	w.recycle(t.e, e)
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
func (w *Wheel) Stop() []Callback {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return nil
	}
	w.stopped = true
	var left []Callback
	for _, l := range w.levels {
		for i := range l.buckets {
			b := &l.buckets[i]
			for j := b.head; j != 0; j = w.entry(j).next {
				left = append(left, *w.fn(j))
			}
			b.head, b.tail = 0, 0
		}
	}
	w.dropArena()
	w.pending = 0
	for _, b := range w.due {
		b.heapIndex = -1
	}
	w.due = w.due[:0]
	running := w.running
	if w.takeover != nil {
		w.takeover.Stop()
	}
	w.mu.Unlock()
	if running {
		close(w.quit)
		w.wg.Wait()
	}
	return left
}

// ticks is ⌊ns/tick⌋ for ns >= 0. A 64-bit division costs tens of cycles
// on the add path; the multiplication by the inverse is at most one short,
// and one comparison corrects it.
func (w *Wheel) ticks(ns int64) int64 {
	q, _ := bits.Mul64(uint64(ns), w.tickInv)
	if (q+1)*uint64(w.tick) <= uint64(ns) {
		q++
	}
	return int64(q)
}

// entry returns the entry at index i (1 <= i <= w.used).
func (w *Wheel) entry(i int32) *entry {
	i--
	return &w.slabs[i/slabSize][i%slabSize]
}

// fn returns the callback slot of entry i.
func (w *Wheel) fn(i int32) *Callback {
	i--
	return &w.fns[i/slabSize][i%slabSize]
}

// newEntry returns an unused entry, growing the arena by a slab when none
// is free.
func (w *Wheel) newEntry() (int32, *entry) {
	if i := w.free; i != 0 {
		e := w.entry(i)
		w.free, e.next = e.next, 0
		return i, e
	}
	if w.used%slabSize == 0 {
		w.slabs = append(w.slabs, new([slabSize]entry))
		w.fns = append(w.fns, new([slabSize]Callback))
	}
	w.used++
	return w.used, w.entry(w.used)
}

// recycle frees entry i, which is in no bucket: its id no longer matches
// any *Timer's.
func (w *Wheel) recycle(i int32, e *entry) {
	e.id = 0
	*w.fn(i) = nil
	e.next, w.free = w.free, i // a list through the entries: freeing makes no garbage
}

// dropArena lets the garbage collector have the arena, once no timer is
// pending. Handles of earlier timers keep failing to stop anything: their
// ids are never handed out again.
func (w *Wheel) dropArena() {
	w.slabs, w.fns, w.free, w.used = nil, nil, 0, 0
}

// insert files entry i by its due tick; true if it made a new earliest
// bucket. Called with mu held and e.at >= w.current.
func (w *Wheel) insert(i int32, e *entry) bool {
	// Level i has buckets of (size/2)^i ticks: a shift of i*(sizeBits-1).
	delta := e.at - w.current
	lvl, shift := 0, uint(0)
	for delta>>shift >= w.size {
		shift += w.sizeBits - 1
		lvl++
	}
	for len(w.levels) <= lvl {
		l := &level{shift: uint(len(w.levels)) * (w.sizeBits - 1), buckets: make([]bucket, w.size)}
		for j := range l.buckets {
			l.buckets[j].heapIndex = -1
			l.buckets[j].level = len(w.levels)
			l.buckets[j].ref = bucketRef(len(w.levels), j)
		}
		w.levels = append(w.levels, l)
	}
	l := w.levels[lvl]
	slot := e.at >> l.shift
	b := &l.buckets[slot&(w.size-1)]
	w.push(b, i, e)
	due := e.at
	if lvl > 0 {
		// One bucket-width early: then every timer of the bucket is within
		// the finer level's span, and the move is done before any is due.
		due = max((slot-1)<<l.shift, w.current)
		if b.pushed <= lazyCascade && int(b.pushed) <= w.chunk {
			// A few timers move in no time: at the tick the first of them
			// is due, so that the move and that fire are one wake-up of
			// the wheel, not two (a wheel of a few schedules at different
			// phases would otherwise wake twice per fire).
			due = max(due, b.firstAt)
		}
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

// push appends entry i to b's list.
func (w *Wheel) push(b *bucket, i int32, e *entry) {
	e.b, e.prev, e.next = b.ref, b.tail, 0
	if b.tail != 0 {
		w.entry(b.tail).next = i
		b.firstAt = min(b.firstAt, e.at)
	} else {
		b.head = i
		b.pushed, b.firstAt = 0, e.at
	}
	b.tail = i
	b.pushed++
}

// remove unlinks entry i from its bucket.
func (w *Wheel) remove(i int32, e *entry) {
	ref := e.b - 1
	b := &w.levels[ref>>16].buckets[ref&0xffff]
	if e.prev != 0 {
		w.entry(e.prev).next = e.next
	} else {
		b.head = e.next
	}
	if e.next != 0 {
		w.entry(e.next).prev = e.prev
	} else {
		b.tail = e.prev
	}
	e.next, e.prev, e.b = 0, 0, 0
	// An emptied bucket stays in the heap; it pops as a no-op.
}

// activation is the channels of one activation: its advancing goroutine
// hands expired callbacks to the dispatchers on out, and they hand the
// emptied slices back on spare.
type activation struct {
	out, spare chan []expired
}

// startLocked starts one activation: an advancing goroutine and its
// dispatchers, which share a channel of expired callbacks.
func (w *Wheel) startLocked() {
	w.running = true
	a := activation{out: make(chan []expired, 64), spare: make(chan []expired, 2*w.dispatchers)}
	w.act = a
	w.wg.Add(1 + w.dispatchers)
	go w.advance(a)
	for range w.dispatchers {
		go w.run(a.out, a.spare)
	}
}

// lend offers the Lenders in toLend the advancing goroutine (Lender), one
// after the other, with a takeover armed for the wheel's next due time,
// and for lendQuiet from now when more than one waits; now is the reading
// of the pass that found them due. It reports whether this goroutine is
// still the one advancing the wheel when the lent work returns.
func (w *Wheel) lend(local *any, now time.Time) bool {
	w.mu.Lock()
	w.lent = true
	w.lends++
	mine := w.lends
	elapsed := int64(now.Sub(w.start))
	if len(w.toLend) > 1 {
		w.lendBy = elapsed + int64(lendQuiet)
	}
	w.armTakeoverLocked(elapsed)
	for next := 0; ; next++ {
		if !w.lent || w.lends != mine {
			w.mu.Unlock()
			return false // taken over: another goroutine advances the wheel, and the takeover handed toLend on
		}
		if next == len(w.toLend) {
			break
		}
		f := w.toLend[next]
		w.toLend[next] = expired{}
		w.mu.Unlock()
		if next > 0 {
			now = w.clk.Now() // the ones lent before took their time
		}
		if cb := f.cb.(Lender); cb.FireLend(f.id, now) {
			cb.RunLent(local)
		}
		w.mu.Lock()
	}
	w.toLend = w.toLend[:0]
	w.lent, w.lendBy = false, 0
	if w.takeover != nil {
		w.takeover.Stop()
	}
	w.mu.Unlock()
	return true
}

// armTakeoverLocked arms the takeover for the earliest due bucket, or
// lendBy if sooner, now being the elapsed time of a reading; with neither,
// an add arms it. Called with mu held while lent.
func (w *Wheel) armTakeoverLocked(now int64) {
	at := w.lendBy
	if len(w.due) > 0 {
		if due := w.due[0].due * w.tick; at == 0 || due < at {
			at = due
		}
	}
	if at == 0 {
		return
	}
	d := time.Duration(at - now)
	if w.takeover == nil {
		w.takeover = w.clk.AfterFunc(d, w.takeOver)
		return
	}
	w.takeover.Reset(d)
}

// takeOver is the takeover's callback: the wheel has timers due, or
// Lenders wait behind lent work, and its advancing goroutine is still
// lent, so another one starts, in the same activation, and the Lenders
// not yet offered the lent goroutine go the way of any other (FireAt).
// (A takeover of an earlier lend, already on its way when that lend
// ended, may take over a later one early: one goroutine more, no timer
// late.)
func (w *Wheel) takeOver() {
	w.mu.Lock()
	if !w.lent || w.stopped || !w.running {
		w.mu.Unlock()
		return
	}
	w.lent, w.lendBy = false, 0
	var rest []expired
	for _, f := range w.toLend {
		if f.cb != nil { // not yet offered
			rest = append(rest, f)
		}
	}
	clear(w.toLend)
	w.toLend = w.toLend[:0]
	w.wg.Add(1)
	go w.advance(w.act)
	w.mu.Unlock()
	if len(rest) > 0 {
		now := w.clk.Now()
		for _, f := range rest {
			f.cb.(Lender).FireAt(f.id, now)
		}
	}
}

// run is a dispatcher goroutine: it runs callbacks until its activation's
// advancing goroutine closes out, and hands each emptied slice back on
// spare, so that a busy wheel makes no garbage per tick.
func (w *Wheel) run(out, spare chan []expired) {
	defer w.wg.Done()
	for fs := range out {
		for _, f := range fs {
			f.cb.Fire(f.id)
		}
		clear(fs) // holds no callback while it waits
		select {
		case spare <- fs[:0]:
		default:
		}
	}
}

// expired is a timer taken out of the wheel to fire.
type expired struct {
	cb Callback
	id uint64
}

// advance is the goroutine that moves time forward. It returns, ending
// its activation, when no timer is pending or the wheel stops.
//
// Its activation's channels are closed by the advancing goroutine that
// ends it; one taken over while lent (Lender) just returns.
func (w *Wheel) advance(a activation) {
	defer w.wg.Done()
	out, spare := a.out, a.spare
	var fired, inline []expired
	var sleeper *time.Timer // reused across waits
	var local any           // a Lender's slot on this goroutine
	defer func() {
		if sleeper != nil {
			sleeper.Stop()
		}
	}()
	lingered := false
	for {
		w.mu.Lock()
		if w.stopped {
			w.mu.Unlock()
			close(out) // dispatchers finish what they were handed, then exit
			return
		}
		if w.pending == 0 {
			for _, b := range w.due { // only emptied buckets are left
				b.heapIndex = -1
			}
			w.due = w.due[:0]
			if lingered {
				w.dropArena()
				w.running = false
				w.mu.Unlock()
				close(out)
				return
			}
			w.mu.Unlock()
			// Real time: the linger changes no timer's fire.
			lingered = w.sleepReal(&sleeper, idleLinger) == timeUp
			continue
		}
		lingered = false
		b := w.due[0]
		dueAt := w.start.Add(time.Duration(b.due * w.tick))
		now := w.clk.Now()
		if now.Before(dueAt) { // clockx.Reached, keeping the reading for TimedCallback
			w.mu.Unlock()
			if !w.sleep(&sleeper, dueAt, now) {
				close(out)
				return
			}
			continue
		}
		heap.Pop(&w.due)
		w.current = max(w.current, b.due)
		if b.level == 0 {
			i := b.head
			b.head, b.tail = 0, 0
			for i != 0 {
				e := w.entry(i)
				next := e.next
				e.next, e.prev, e.b = 0, 0, 0
				if e.at <= w.current {
					fired, inline = w.expire(i, e, fired, inline)
				} else {
					w.insert(i, e) // filed while the wheel was behind
				}
				i = next
			}
		} else {
			fired, inline = w.cascade(b, fired, inline)
		}
		quiet := len(w.due) == 0 || w.due[0].due-w.current >= w.quietTicks
		w.mu.Unlock()
		if len(fired) > 0 {
			out <- fired
			select {
			case fired = <-spare:
			default:
				fired = make([]expired, 0, len(fired))
			}
		}
		lendFrom := len(inline) // the index of the first Lender lent
		if quiet {
			lenders, last := 0, -1
			for i := len(inline) - 1; i >= 0 && lenders <= maxLent; i-- {
				if _, ok := inline[i].cb.(Lender); ok {
					lenders++
					lendFrom, last = i, max(last, i)
				}
			}
			if lenders > maxLent || w.coalesce == 0 { // a burst, or fires not coalesced: runners take them, and the goroutine the last
				lendFrom = last
			}
		}
		for i, f := range inline {
			switch cb := f.cb.(type) {
			case Lender:
				if i >= lendFrom {
					w.toLend = append(w.toLend, f) // under no lock: only the advancing goroutine, not lent, writes it
				} else {
					cb.FireAt(f.id, now)
				}
			case TimedCallback:
				cb.FireAt(f.id, now)
			default:
				cb.Fire(f.id)
			}
			inline[i] = expired{}
		}
		inline = inline[:0]
		if len(w.toLend) > 0 && !w.lend(&local, now) {
			return
		}
	}
}

// waited is how a wait of the advancing goroutine ended.
type waited int

const (
	timeUp waited = iota // the time came
	woken                // a timer was added or the last one stopped
	closed               // the wheel stops
)

// sleep waits until dueAt, a timer is added or the wheel stops; false
// when it stops. now is the reading that found dueAt still ahead.
func (w *Wheel) sleep(sleeper **time.Timer, dueAt, now time.Time) bool {
	if !w.realClock {
		tm := clockx.TimerAt(w.clk, dueAt)
		defer tm.Stop()
		return w.wait(tm.Chan()) != closed
	}
	return w.sleepReal(sleeper, dueAt.Sub(now)) != closed // clockx.Until, from the reading just taken
}

// sleepReal waits d of real time. One timer serves every wait of an
// activation (Reset on a Go 1.23 timer leaves no stale fire behind), so a
// busy wheel does not allocate a timer per tick.
func (w *Wheel) sleepReal(sleeper **time.Timer, d time.Duration) waited {
	if *sleeper == nil {
		*sleeper = time.NewTimer(d)
	} else {
		(*sleeper).Reset(d)
	}
	how := w.wait((*sleeper).C)
	(*sleeper).Stop()
	return how
}

func (w *Wheel) wait(c <-chan time.Time) waited {
	select {
	case <-c:
		return timeUp
	case <-w.wake:
		return woken
	case <-w.quit:
		return closed
	}
}

// cascade moves up to cascadeChunk of a coarse bucket's timers down; the
// rest wait for the next tick, behind any finer bucket due then. Called
// with mu held.
func (w *Wheel) cascade(b *bucket, fired, inline []expired) ([]expired, []expired) {
	for n := 0; b.head != 0 && n < w.chunk; n++ {
		i := b.head
		e := w.entry(i)
		b.head = e.next
		if b.head == 0 {
			b.tail = 0
		} else {
			w.entry(b.head).prev = 0
		}
		e.next, e.prev, e.b = 0, 0, 0
		if e.at <= w.current { // the wheel fell behind: due already
			fired, inline = w.expire(i, e, fired, inline)
			continue
		}
		w.insert(i, e)
	}
	if b.head != 0 && b.heapIndex < 0 {
		b.due = w.current + 1
		heap.Push(&w.due, b)
	}
	return fired, inline
}

// expire takes the callback of entry i, which is due and in no bucket,
// onto fired or inline, and frees the entry.
func (w *Wheel) expire(i int32, e *entry, fired, inline []expired) ([]expired, []expired) {
	if f := (expired{*w.fn(i), e.id}); e.inline {
		inline = append(inline, f)
	} else {
		fired = append(fired, f)
	}
	w.pending--
	w.recycle(i, e)
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
