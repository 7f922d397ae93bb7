package wheel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

type modelTimer struct {
	id      int
	at      time.Time // exact expiry asked for
	t       *Timer
	stopped bool // Stop returned true
	fired   atomic.Int32
	firedAt atomic.Int64 // clock reading inside the callback
}

// TestPropertyAgainstModel runs random adds, cancels and clock advances on
// a fake clock and checks every timer against a simple model: it fires
// exactly once, never before its time, unless stopped; and Stop returns
// exactly the timers still pending.
func TestPropertyAgainstModel(t *testing.T) {
	t.Parallel()
	for seed := range 30 {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		clk := clockwork.NewFakeClockAt(t0)
		size := []int{4, 8, 16, 64}[seed%4]
		w, err := New(WithClock(clk), WithTick(time.Millisecond), WithSize(size), WithDispatchers(2))
		if err != nil {
			t.Fatal(err)
		}
		w.chunk = 1 + seed%5 // small cascades, so that chunking is exercised
		var all []*modelTimer
		var stopping atomic.Bool
		var mu sync.Mutex
		var leftIDs []int
		for op := range 600 {
			switch k := r.IntN(10); {
			case k < 5: // add
				var d time.Duration
				switch r.IntN(4) {
				case 0:
					d = time.Duration(r.IntN(3)) * time.Millisecond
				case 1:
					d = time.Duration(r.IntN(5000)) * time.Millisecond
				case 2:
					d = time.Duration(r.Int64N(int64(time.Second)))
				default:
					d = time.Duration(r.IntN(1000)) * time.Hour
				}
				m := &modelTimer{id: op, at: clk.Now().Add(d)}
				add := w.AfterFunc
				if r.IntN(2) == 0 { // half run on the advancing goroutine
					add = w.AfterFuncInline
				}
				m.t = add(d, func() {
					if stopping.Load() {
						mu.Lock()
						leftIDs = append(leftIDs, m.id)
						mu.Unlock()
						return
					}
					m.firedAt.Store(clk.Now().UnixNano())
					m.fired.Add(1)
				})
				all = append(all, m)
			case k < 7: // cancel
				if len(all) == 0 {
					continue
				}
				m := all[r.IntN(len(all))]
				dueAndDone := m.fired.Load() > 0
				got := m.t.Stop()
				if got && dueAndDone {
					t.Fatalf("seed %d: Stop true for a timer that fired", seed)
				}
				if got {
					if m.stopped {
						t.Fatalf("seed %d: Stop true twice", seed)
					}
					m.stopped = true
				}
			default: // advance, then wait for what is due
				clk.Advance(time.Duration(r.IntN(400)) * time.Millisecond * time.Duration(1+r.IntN(3)))
				now := clk.Now()
				waitUntil(t, func() bool {
					for _, m := range all {
						if !m.stopped && !m.at.After(now) && m.fired.Load() == 0 {
							return false
						}
					}
					return true
				})
			}
		}
		stopping.Store(true)
		left := w.Stop()
		for _, f := range left {
			f.Fire(0)
		}
		pending := map[int]bool{}
		for _, m := range all {
			if n := m.fired.Load(); n > 1 {
				t.Fatalf("seed %d: timer %d fired %d times", seed, m.id, n)
			}
			if m.stopped && m.fired.Load() > 0 {
				t.Fatalf("seed %d: stopped timer %d fired", seed, m.id)
			}
			if m.fired.Load() == 1 && time.Unix(0, m.firedAt.Load()).Before(m.at) {
				t.Fatalf("seed %d: timer %d fired early: at %v, due %v", seed, m.id, time.Unix(0, m.firedAt.Load()).UTC(), m.at)
			}
			if !m.stopped && m.fired.Load() == 0 {
				pending[m.id] = true
			}
		}
		mu.Lock()
		if len(leftIDs) != len(pending) {
			t.Fatalf("seed %d: Stop returned %d timers, %d were pending", seed, len(leftIDs), len(pending))
		}
		for _, id := range leftIDs {
			if !pending[id] {
				t.Fatalf("seed %d: Stop returned timer %d, which was not pending", seed, id)
			}
		}
		mu.Unlock()
		if w.Pending() != 0 {
			t.Fatalf("pending %d after Stop", w.Pending())
		}
	}
}

// TestCancelRacesExpiry stops timers just as they come due on the real
// clock: each ends either stopped (and never runs) or run exactly once.
func TestCancelRacesExpiry(t *testing.T) {
	t.Parallel()
	w, _ := New()
	defer w.Stop()
	const n = 20000
	var ran [n]atomic.Int32
	timers := make([]*Timer, n)
	for i := range n {
		add := w.AfterFunc
		if i%2 == 1 {
			add = w.AfterFuncInline
		}
		timers[i] = add(time.Duration(i%5)*time.Millisecond, func() { ran[i].Add(1) })
	}
	stopped := make([]bool, n)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 4 {
				stopped[i] = timers[i].Stop()
			}
		}()
	}
	wg.Wait()
	waitUntil(t, func() bool { return w.Pending() == 0 })
	time.Sleep(10 * time.Millisecond) // let dispatched callbacks finish
	var nStopped, nRan int
	for i := range n {
		r := ran[i].Load()
		switch {
		case stopped[i] && r != 0:
			t.Fatalf("timer %d stopped and ran", i)
		case !stopped[i] && r != 1:
			t.Fatalf("timer %d neither stopped nor ran once (ran %d)", i, r)
		}
		if stopped[i] {
			nStopped++
		} else {
			nRan++
		}
	}
	t.Logf("%d stopped, %d ran", nStopped, nRan)
}

func TestBoundAndStop(t *testing.T) {
	t.Parallel()
	w, _ := New(WithMaxPending(2))
	a := w.AfterFunc(time.Hour, func() {})
	w.AfterFunc(time.Hour, func() {})
	if _, err := w.TryAfterFunc(time.Hour, func() {}); err != ErrFull {
		t.Fatalf("got %v, want ErrFull", err)
	}
	if !a.Stop() || a.Stop() {
		t.Fatal("Stop must be true once")
	}
	if w.AfterFunc(time.Hour, func() {}) == nil {
		t.Fatal("room after a Stop")
	}
	if left := w.Stop(); len(left) != 2 {
		t.Fatalf("Stop returned %d", len(left))
	}
	if _, err := w.TryAfterFunc(time.Second, func() {}); err != ErrStopped {
		t.Fatalf("after Stop: %v", err)
	}
	if w.Stop() != nil {
		t.Fatal("second Stop")
	}
	var nilTimer *Timer
	if nilTimer.Stop() {
		t.Fatal("nil Stop")
	}
	idle, _ := New()
	idle.Stop() // before any timer: no goroutine to stop
	for _, o := range []Option{WithTick(0), WithSize(2), WithSize(6), WithSize(7), WithMaxPending(-1), WithDispatchers(0), WithClock(nil)} {
		if _, err := New(o); err == nil {
			t.Error("bad option accepted")
		}
	}
}

func TestStaleHandleCannotStopReusedEntry(t *testing.T) {
	t.Parallel()
	clk := clockwork.NewFakeClockAt(t0)
	w, _ := New(WithClock(clk))
	defer w.Stop()
	a := w.AfterFunc(time.Second, func() {})
	a.Stop()
	var ran atomic.Bool
	b := w.AfterFunc(time.Second, func() { ran.Store(true) }) // reuses a's entry
	if a.e != b.e {
		t.Skip("entry not reused")
	}
	if a.Stop() {
		t.Fatal("stale handle stopped the new timer")
	}
	clk.Advance(time.Second)
	waitUntil(t, ran.Load)
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func TestIdleWheelHoldsNoGoroutine(t *testing.T) {
	t.Parallel()
	w, _ := New()
	running := func() bool { w.mu.Lock(); defer w.mu.Unlock(); return w.running }
	tm := w.AfterFunc(time.Hour, func() {})
	if !running() {
		t.Fatal("no goroutine for a pending timer")
	}
	tm.Stop()
	waitUntil(t, func() bool { return !running() })
	w.mu.Lock()
	dropped := w.slabs == nil
	w.mu.Unlock()
	if !dropped {
		t.Fatal("an idle wheel keeps its arena")
	}
	var fired atomic.Bool
	again := w.AfterFunc(5*time.Millisecond, func() { fired.Store(true) }) // starts again
	if again.e != tm.e {
		t.Fatalf("the new arena did not start over: entry %d, was %d", again.e, tm.e)
	}
	if tm.Stop() {
		t.Fatal("a handle from before the arena was dropped stopped a new timer")
	}
	waitUntil(t, fired.Load)
	waitUntil(t, func() bool { return !running() })
	// No Stop: goleak in TestMain checks that nothing was left behind.
}

// TestTicksDividesExactly checks the division by multiplication against
// the division operator, at the edges where it could be one short.
func TestTicksDividesExactly(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for _, tick := range []time.Duration{1, 2, 3, 7, time.Microsecond, time.Millisecond, 1500 * time.Microsecond, time.Second, time.Hour} {
		w, err := New(WithTick(tick))
		if err != nil {
			t.Fatal(err)
		}
		k := int64(tick)
		for range 20000 {
			var ns int64
			switch r.IntN(3) {
			case 0:
				ns = r.Int64N(1 << 40)
			case 1:
				ns = r.Int64N(1<<62/k)*k + r.Int64N(3) - 1 // around a multiple
			default:
				ns = r.Int64N(1 << 62)
			}
			ns = max(ns, 0)
			if got, want := w.ticks(ns), ns/k; got != want {
				t.Fatalf("tick %v: ticks(%d) = %d, want %d", tick, ns, got, want)
			}
		}
	}
}

// idFires is a Callback that reports the id each fire gets.
type idFires chan uint64

func (c idFires) Fire(id uint64) { c <- id }

// TestCallbackGetsItsTimersID: a Callback set on a dispatcher or inline
// gets the id of the timer that fired (Timer.ID), distinct per timer; a
// Callback that is a pointer or a chan is set and stopped with no
// allocation once the arena has room.
func TestCallbackGetsItsTimersID(t *testing.T) {
	// Not parallel: AllocsPerRun counts the whole process's allocations.
	w, _ := New()
	defer w.Stop()
	cb := make(idFires, 2)
	var a, b Timer
	if err := w.Set(&a, time.Millisecond, cb); err != nil {
		t.Fatal(err)
	}
	if err := w.SetInlineFrom(&b, time.Now(), 2*time.Millisecond, cb); err != nil {
		t.Fatal(err)
	}
	if a.ID() == 0 || a.ID() == b.ID() {
		t.Fatalf("ids %d and %d", a.ID(), b.ID())
	}
	got := []uint64{<-cb, <-cb}
	slices.Sort(got)
	if want := []uint64{min(a.ID(), b.ID()), max(a.ID(), b.ID())}; !slices.Equal(got, want) {
		t.Fatalf("fires got ids %v, want %v", got, want)
	}
	if err := w.Set(&a, time.Hour, nil); err == nil {
		t.Fatal("a nil callback was set")
	}
	if w.AfterFunc(time.Hour, nil) != nil || w.AfterFuncInline(time.Hour, nil) != nil {
		t.Fatal("a nil func was set")
	}
	keep := w.AfterFunc(time.Hour, func() {}) // the arena stays while a timer is pending
	defer keep.Stop()
	if n := testing.AllocsPerRun(100, func() {
		if w.Set(&a, time.Hour, cb) != nil || !a.Stop() {
			t.Fatal("set or stop failed")
		}
	}); n != 0 {
		t.Fatalf("%v allocations per Set and Stop", n)
	}
}

// timedFire records what FireAt was told; Fire records a call without a
// reading.
type timedFire chan time.Time

func (f timedFire) Fire(uint64)                    { f <- time.Time{} }
func (f timedFire) FireAt(_ uint64, now time.Time) { f <- now }

// TestTimedCallbackGetsTheWheelsReading: an inline TimedCallback is told
// the wheel's reading of its clock, at or past the timer's instant; one
// set on a dispatcher is called through Fire.
func TestTimedCallbackGetsTheWheelsReading(t *testing.T) {
	t.Parallel()
	clk, w := msWheel(t)
	f := make(timedFire, 2)
	var a, b Timer
	if err := w.SetInlineFrom(&a, t0, 10*time.Millisecond, f); err != nil {
		t.Fatal(err)
	}
	if err := w.Set(&b, 20*time.Millisecond, f); err != nil {
		t.Fatal(err)
	}
	clk.BlockUntilContext(t.Context(), 1)
	clk.Advance(15 * time.Millisecond)
	if now := <-f; !now.Equal(t0.Add(15 * time.Millisecond)) {
		t.Fatalf("inline: FireAt told %v, want the wheel's reading %v", now, t0.Add(15*time.Millisecond))
	}
	clk.BlockUntilContext(t.Context(), 1)
	clk.Advance(10 * time.Millisecond)
	if now := <-f; !now.IsZero() {
		t.Fatalf("dispatcher: told %v, want a call of Fire", now)
	}
}

// TestFewTimersOfACoarseBucketMoveWhenTheFirstIsDue: a lone timer a second
// out (on a coarse level) is moved down and fired at its own tick, one
// wake-up of the wheel rather than one a bucket-width early to move it and
// another to fire it; a bucket that had many timers pushed still moves
// them early. Either way each fires once, at its time.
func TestFewTimersOfACoarseBucketMoveWhenTheFirstIsDue(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, lazyCascade + 1} {
		clk, w := msWheel(t)
		fired := make(chan struct{}, n)
		for range n {
			w.AfterFuncInline(time.Second, func() { fired <- struct{}{} })
		}
		w.mu.Lock()
		b := w.due[0]
		level, due := b.level, b.due
		w.mu.Unlock()
		if level == 0 {
			t.Fatalf("%d timers: filed on level 0; the test wants a coarse level", n)
		}
		if lazy := due == 1000; lazy != (n <= lazyCascade) {
			t.Errorf("%d timers: their coarse bucket is due at tick %d of 1000", n, due)
		}
		clk.BlockUntilContext(t.Context(), 1)
		clk.Advance(999 * time.Millisecond)
		clk.BlockUntilContext(t.Context(), 1)
		if len(fired) != 0 {
			t.Fatalf("%d timers: fired early", n)
		}
		clk.Advance(time.Millisecond)
		for range n {
			<-fired
		}
	}
}

// TestSetAfter: a timer set by SetAfter says when it is due (now plus the
// wait by the wheel's clock) and fires then, never before, on a fake
// clock and on the real one; one at the end of time is pending until
// stopped.
func TestSetAfter(t *testing.T) {
	t.Parallel()
	fake, w, fired := fakeWheel(t)
	var a Timer
	at, err := w.SetAfter(&a, time.Second, fired)
	if err != nil || !at.Equal(fake.Now().Add(time.Second)) {
		t.Fatalf("due %v (%v), want %v", at, err, fake.Now().Add(time.Second))
	}
	fake.Advance(999 * time.Millisecond)
	select {
	case <-fired:
		t.Fatal("fired early")
	case <-time.After(20 * time.Millisecond):
	}
	fake.Advance(time.Millisecond)
	if id := <-fired; id != a.ID() {
		t.Fatalf("fired %d, set %d", id, a.ID())
	}

	rw, _ := New()
	defer rw.Stop()
	before := time.Now()
	at, err = rw.SetAfter(&a, 5*time.Millisecond, Func(func() { fired <- 0 }))
	if err != nil || at.Before(before.Add(5*time.Millisecond)) || at.After(time.Now().Add(5*time.Millisecond)) {
		t.Fatalf("due %v (%v), set between %v and now, 5ms out", at, err, before)
	}
	<-fired
	if late := time.Since(at); late < 0 {
		t.Fatalf("fired %s early", -late)
	}
	var far Timer
	if _, err := rw.SetAfter(&far, time.Duration(math.MaxInt64), fired); err != nil {
		t.Fatal(err)
	}
	if rw.Pending() != 1 || !far.Stop() {
		t.Fatalf("far timer: %d pending", rw.Pending())
	}
}

// TestSetInlineFrom: a wait set from an earlier reading of the clock is
// due at that reading plus the wait, not at the call's time plus the
// wait: a caller that turned an instant into a wait fires at the instant.
func TestSetInlineFrom(t *testing.T) {
	t.Parallel()
	fake, w, fired := fakeWheel(t)
	from := fake.Now()
	fake.Advance(40 * time.Second)
	var a Timer
	if err := w.SetInlineFrom(&a, from, time.Minute, fired); err != nil {
		t.Fatal(err)
	}
	fake.Advance(19 * time.Second)
	select {
	case <-fired:
		t.Fatal("fired early")
	case <-time.After(20 * time.Millisecond):
	}
	fake.Advance(time.Second) // from + a minute
	select {
	case id := <-fired:
		if id != a.ID() {
			t.Fatalf("fired %d, set %d", id, a.ID())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not fired at its instant")
	}
	var late Timer // from a reading whose wait is already over: at once
	if err := w.SetInlineFrom(&late, from, time.Second, fired); err != nil {
		t.Fatal(err)
	}
	if id := <-fired; id != late.ID() {
		t.Fatalf("fired %d, set %d", id, late.ID())
	}
}

// msWheel is a wheel with a millisecond tick on a fake clock at t0,
// stopped at the test's end.
func msWheel(t *testing.T) (*clockwork.FakeClock, *Wheel) {
	clk := clockwork.NewFakeClockAt(t0)
	w, err := New(WithClock(clk), WithTick(time.Millisecond), WithCoalesce(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop() })
	return clk, w
}

// fakeWheel is a wheel on a fake clock, stopped at the test's end, and a
// callback reporting its fires.
func fakeWheel(t *testing.T) (*clockwork.FakeClock, *Wheel, idFires) {
	fake := clockwork.NewFakeClock()
	w, err := New(WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop() })
	return fake, w, make(idFires, 1)
}

// TestHandlesOfOneBlockAreTheirOwn adds timers across several blocks of
// handles and stops every other one: each handle stops its own timer and
// no other, and the rest fire once each.
func TestHandlesOfOneBlockAreTheirOwn(t *testing.T) {
	t.Parallel()
	clk, w := msWheel(t)
	const n = 3*handleBlock + 5
	var fired [n]atomic.Int32
	var done sync.WaitGroup
	handles := make([]*Timer, n)
	for i := range n {
		if i%2 == 1 {
			done.Add(1)
		}
		handles[i] = w.AfterFunc(time.Duration(1+i%7)*time.Millisecond, func() {
			fired[i].Add(1)
			done.Done()
		})
		if i > 0 && handles[i] == handles[i-1] {
			t.Fatalf("timers %d and %d share a handle", i-1, i)
		}
	}
	for i := 0; i < n; i += 2 {
		if !handles[i].Stop() {
			t.Fatalf("Stop of pending timer %d returned false", i)
		}
	}
	for i := 0; i < n; i += 2 {
		if handles[i].Stop() {
			t.Fatalf("second Stop of timer %d returned true", i)
		}
	}
	clk.Advance(10 * time.Millisecond)
	done.Wait()
	for i := range n {
		if want := int32(i % 2); fired[i].Load() != want {
			t.Fatalf("timer %d fired %d times, want %d", i, fired[i].Load(), want)
		}
	}
}

// lender is a Lender for tests: FireLend takes the goroutine when take is
// set, and RunLent reports its start and its slot's value, stores one
// more in the slot, and returns when release is closed.
type lender struct {
	take    bool
	fired   chan string    // "at" for FireAt, "lend" for FireLend
	started chan any       // RunLent began: the slot's value then
	release chan struct{}  // RunLent returns once closed
	during  func(w *Wheel) // run inside RunLent before it waits, if set
	w       *Wheel
}

// waitUnlent waits for the wheel's advancing goroutine to be back from
// the work lent to it.
func waitUnlent(t *testing.T, w *Wheel) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		w.mu.Lock()
		lent := w.lent
		w.mu.Unlock()
		if !lent {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the advancing goroutine is still lent after 10s")
		}
	}
}

func newLender(w *Wheel, take bool) *lender {
	return &lender{take: take, fired: make(chan string, 4), started: make(chan any, 4), release: make(chan struct{}), w: w}
}

func (l *lender) Fire(uint64)              { l.fired <- "fire" }
func (l *lender) FireAt(uint64, time.Time) { l.fired <- "at" }
func (l *lender) FireLend(uint64, time.Time) bool {
	l.fired <- "lend"
	return l.take
}
func (l *lender) RunLent(local *any) {
	l.started <- *local
	n, _ := (*local).(int)
	*local = n + 1
	if l.during != nil {
		l.during(l.w)
	}
	<-l.release
}

// TestLentWorkIsTakenOverWhenATimerFallsDue: the last inline Lender of a
// pass runs its work on the advancing goroutine. While that work runs,
// timers still fire at their time: one pending before the lend, and one
// added during it when nothing else was pending, earlier than any other;
// once the lent work returns, its goroutine ends and the wheel goes on.
func TestLentWorkIsTakenOverWhenATimerFallsDue(t *testing.T) {
	t.Parallel()
	later := make(chan time.Time, 2)
	clk, l, _ := startLent(t, func(clk *clockwork.FakeClock, w *Wheel, _ *lender) {
		w.AfterFuncInline(30*time.Millisecond, func() { later <- clk.Now() })
	}, 0)
	clk.BlockUntilContext(t.Context(), 1) // the takeover
	clk.Advance(20 * time.Millisecond)
	if at := recv(t, later, "the timer due at 30 ms, while lent"); at.Before(t0.Add(30 * time.Millisecond)) {
		t.Fatalf("the timer due at 30 ms fired at %v", at.Sub(t0))
	}
	close(l.release)

	// A lend with nothing else pending: an add during it arms the takeover.
	added := make(chan time.Time, 1)
	clk, l, _ = startLent(t, func(clk *clockwork.FakeClock, _ *Wheel, l *lender) {
		l.during = func(w *Wheel) { w.AfterFuncInline(5*time.Millisecond, func() { added <- clk.Now() }) }
	}, 0)
	clk.BlockUntilContext(t.Context(), 1) // the takeover, armed by the add
	clk.Advance(5 * time.Millisecond)
	if at := recv(t, added, "the timer added while lent"); at.Before(t0.Add(15 * time.Millisecond)) {
		t.Fatalf("the timer added while lent fired at %v, before its 15 ms", at.Sub(t0))
	}
	close(l.release)
}

// startLent sets a Lender due at 10 ms on a new wheel, after setup, and
// behind it more Lenders due at the same time, and returns once its work
// runs lent.
func startLent(t *testing.T, setup func(*clockwork.FakeClock, *Wheel, *lender), more int) (*clockwork.FakeClock, *lender, []*lender) {
	t.Helper()
	clk, w := msWheel(t)
	l := newLender(w, true)
	setup(clk, w, l)
	rest := make([]*lender, more)
	for i := range rest {
		rest[i] = newLender(w, true)
	}
	for _, x := range append([]*lender{l}, rest...) {
		if err := w.SetInlineFrom(new(Timer), t0, 10*time.Millisecond, x); err != nil {
			t.Fatal(err)
		}
	}
	clk.BlockUntilContext(t.Context(), 1)
	clk.Advance(10 * time.Millisecond)
	if how := <-l.fired; how != "lend" {
		t.Fatalf("the first inline Lender was called through %s, want FireLend", how)
	}
	<-l.started
	return clk, l, rest
}

// recv receives from ch, failing the test when nothing comes within ten
// seconds of real time: what was to send it never ran.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: never fired", what)
		panic("unreachable")
	}
}

// TestLentGoroutineKeepsItsSlot: lent work that returns before the next
// timer leaves the same goroutine advancing, so the next lend finds the
// slot as the last one left it; the Lenders due in one pass are offered
// the goroutine in turn, each once the one before has returned, a Lender
// that declines is not run, and a wheel with a timer due within lendQuiet
// offers it to none.
func TestLentGoroutineKeepsItsSlot(t *testing.T) {
	t.Parallel()
	clk, w := msWheel(t)
	l := newLender(w, true)
	close(l.release)
	for i := range 3 {
		var lt Timer
		if err := w.SetInlineFrom(&lt, clk.Now(), 10*time.Millisecond, l); err != nil {
			t.Fatal(err)
		}
		clk.BlockUntilContext(t.Context(), 1)
		clk.Advance(10 * time.Millisecond)
		<-l.fired
		if slot := <-l.started; i > 0 && slot != i {
			t.Fatalf("lend %d found the slot at %v, want %d: another goroutine ran it", i, slot, i)
		}
		// Added while the goroutine is still lent, the next timers
		// would arm a takeover, which the clock's advance could fire
		// before the lend ends: another goroutine, another slot.
		waitUnlent(t, w)
	}

	declines := newLender(w, false)
	first := newLender(w, true)
	close(first.release)
	var a, b, c Timer
	now := clk.Now()
	for _, set := range []struct {
		t *Timer
		l *lender
	}{{&a, declines}, {&b, first}, {&c, l}} {
		if err := w.SetInlineFrom(set.t, now, 10*time.Millisecond, set.l); err != nil {
			t.Fatal(err)
		}
	}
	clk.BlockUntilContext(t.Context(), 1)
	clk.Advance(10 * time.Millisecond)
	for _, want := range []*lender{declines, first, l} {
		if how := <-want.fired; how != "lend" {
			t.Errorf("called through %s, want lend", how)
		}
	}
	if slot := <-first.started; slot != 3 {
		t.Errorf("the first Lender of the pass found the slot at %v, want 3", slot)
	}
	if slot := <-l.started; slot != 4 {
		t.Errorf("the second Lender of the pass found the slot at %v, want 4: it ran before the first returned, or elsewhere", slot)
	}
	if len(declines.started) != 0 {
		t.Error("work of a Lender that declined ran")
	}

	// A busy wheel, its next timer due within lendQuiet, lends nothing.
	fine := clockwork.NewFakeClockAt(t0)
	bw, err := New(WithClock(fine), WithTick(lendQuiet/10))
	if err != nil {
		t.Fatal(err)
	}
	defer bw.Stop()
	busy := newLender(bw, true)
	close(busy.release)
	var bt Timer
	if err := bw.SetInlineFrom(&bt, t0, 10*time.Millisecond, busy); err != nil {
		t.Fatal(err)
	}
	bw.AfterFuncInline(10*time.Millisecond+lendQuiet/2, func() {})
	fine.BlockUntilContext(t.Context(), 1)
	fine.Advance(10 * time.Millisecond)
	if how := recv(t, busy.fired, "the busy wheel's Lender"); how != "at" {
		t.Errorf("a wheel with a timer due %v later offered its goroutine (%s)", lendQuiet/2, how)
	}
}

// TestLendersLentBehindBlockedWorkMoveOn: of three Lenders due in one
// pass, the first blocks its lent goroutine; lendQuiet later the takeover
// hands the other two on through FireAt, and the wheel fires on.
func TestLendersLentBehindBlockedWorkMoveOn(t *testing.T) {
	t.Parallel()
	var w *Wheel
	clk, blocks, rest := startLent(t, func(_ *clockwork.FakeClock, ww *Wheel, _ *lender) { w = ww }, 2)
	second, third := rest[0], rest[1]
	clk.BlockUntilContext(t.Context(), 1) // the takeover: nothing else is pending
	clk.Advance(lendQuiet - time.Nanosecond)
	select {
	case how := <-second.fired:
		t.Fatalf("the second Lender was called (%s) before lendQuiet", how)
	case <-time.After(20 * time.Millisecond):
	}
	clk.Advance(time.Nanosecond)
	for _, l := range []*lender{second, third} {
		if how := recv(t, l.fired, "a Lender lent behind blocked work"); how != "at" {
			t.Errorf("a Lender waiting behind blocked work was called through %s, want at", how)
		}
	}
	fired := make(chan struct{})
	w.AfterFunc(5*time.Millisecond, func() { close(fired) })
	clk.BlockUntilContext(t.Context(), 1)
	clk.Advance(5 * time.Millisecond)
	recv(t, fired, "a timer added after the takeover")
	close(blocks.release)
	if len(second.started)+len(third.started) != 0 {
		t.Error("a Lender handed on ran lent")
	}
}

// TestABurstLendsOnlyItsLast: of a pass of more than maxLent Lenders, or
// of any pass on a wheel that does not coalesce, only the last is offered
// the advancing goroutine; the others are handed on.
func TestABurstLendsOnlyItsLast(t *testing.T) {
	t.Parallel()
	t.Run("burst", func(t *testing.T) {
		t.Parallel()
		clk, w := msWheel(t)
		lendsOnlyTheLast(t, clk, w, maxLent+1)
	})
	t.Run("not coalesced", func(t *testing.T) {
		t.Parallel()
		clk := clockwork.NewFakeClockAt(t0)
		w, err := New(WithClock(clk), WithTick(time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Stop() })
		lendsOnlyTheLast(t, clk, w, 3)
	})
}

// lendsOnlyTheLast sets n Lenders due at once on w and checks that only
// the last is offered the advancing goroutine.
func lendsOnlyTheLast(t *testing.T, clk *clockwork.FakeClock, w *Wheel, n int) {
	t.Helper()
	ls := make([]*lender, n)
	for i := range ls {
		ls[i] = newLender(w, true)
		close(ls[i].release)
		if err := w.SetInlineFrom(new(Timer), t0, 10*time.Millisecond, ls[i]); err != nil {
			t.Fatal(err)
		}
	}
	clk.BlockUntilContext(t.Context(), 1)
	clk.Advance(10 * time.Millisecond)
	for i, l := range ls {
		want := "at"
		if i == len(ls)-1 {
			want = "lend"
		}
		if how := recv(t, l.fired, "a Lender of the burst"); how != want {
			t.Errorf("Lender %d of %d due at once was called through %s, want %s", i, len(ls), how, want)
		}
	}
	<-ls[len(ls)-1].started
}

// TestCoalesce: with WithCoalesce, a wake-up armed with SetInlineFrom is
// due at the first whole multiple of wall time at or after its instant;
// one on a whole multiple is not moved, other timers are not, and none
// fires early.
func TestCoalesce(t *testing.T) {
	t.Parallel()
	for _, bad := range []time.Duration{-time.Millisecond, 2 * time.Second} {
		if _, err := New(WithCoalesce(bad)); err == nil || !strings.Contains(err.Error(), bad.String()) {
			t.Errorf("WithCoalesce(%s): error %v, want one naming the value", bad, err)
		}
	}
	start := t0.Add(250 * time.Microsecond) // the wheel starts off the grid
	clk := clockwork.NewFakeClockAt(start)
	w, err := New(WithClock(clk), WithTick(100*time.Microsecond), WithCoalesce(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	fires := make(chan time.Time, 3)
	for _, wait := range []time.Duration{
		1750 * time.Microsecond, // t0 + 2 ms: on the grid, not moved
		2050 * time.Microsecond, // t0 + 2.3 ms: at t0 + 3 ms
	} {
		l := &timeLender{clk: clk, fires: fires}
		if err := w.SetInlineFrom(new(Timer), start, wait, l); err != nil {
			t.Fatal(err)
		}
	}
	w.AfterFuncInline(2050*time.Microsecond, func() { fires <- clk.Now() }) // not coalesced: t0 + 2.3 ms
	for _, want := range []time.Duration{2 * time.Millisecond, 2300 * time.Microsecond, 3 * time.Millisecond} {
		clk.BlockUntilContext(t.Context(), 1)
		clk.Advance(t0.Add(want).Sub(clk.Now()))
		if got := recv(t, fires, fmt.Sprintf("the timer due at t0+%s", want)).Sub(t0); got != want {
			t.Errorf("fired at t0+%s, want t0+%s", got, want)
		}
	}
}

// timeLender is a Lender that reports the fake clock's time when called.
type timeLender struct {
	clk   *clockwork.FakeClock
	fires chan time.Time
}

func (l *timeLender) Fire(uint64)                     { l.fires <- l.clk.Now() }
func (l *timeLender) FireAt(uint64, time.Time)        { l.fires <- l.clk.Now() }
func (l *timeLender) FireLend(uint64, time.Time) bool { l.fires <- l.clk.Now(); return false }
func (l *timeLender) RunLent(*any)                    {}

// TestStopWaitsForLentWork: Stop returns only once lent work has.
func TestStopWaitsForLentWork(t *testing.T) {
	t.Parallel()
	_, l, _ := startLent(t, func(*clockwork.FakeClock, *Wheel, *lender) {}, 0)
	w := l.w
	var returned atomic.Bool
	stopped := make(chan struct{})
	go func() {
		w.Stop()
		if !returned.Load() {
			t.Error("Stop returned while lent work ran")
		}
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(50 * time.Millisecond):
	}
	returned.Store(true)
	close(l.release)
	<-stopped
}
