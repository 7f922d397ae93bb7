package main

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/schedule/wheel"
)

// oneShotResult is one library's run of the delay-queue scenario.
type oneShotResult struct {
	name        string
	addsPerSec  float64       // timers added per second, half of them also canceled
	bytesPerPen float64       // heap per pending timer
	p50, p99    time.Duration // lateness of the timers that fired
	maxLate     time.Duration
	exact       bool // every kept timer fired exactly once, none early, no canceled one fired
	detail      string
}

// stopper is what both libraries' timers have. A *Timer stored in an
// interface costs no allocation, where a method value (t.Stop) costs one
// per timer in either library.
type stopper interface{ Stop() bool }

// timerLib adds a one-shot timer that records fire i of fs, in the form
// its library takes (a closure, a Task), and returns it.
type timerLib struct {
	name  string
	after func(d time.Duration, fs *fires, i int) stopper
	close func()
}

func runtimeTimers() timerLib {
	return timerLib{name: "Go runtime timers (time.AfterFunc)", after: func(d time.Duration, fs *fires, i int) stopper {
		return time.AfterFunc(d, fs.fire(i))
	}, close: func() {}}
}

func wheelTimers(size int) timerLib {
	w, _ := wheel.New(wheel.WithSize(size))
	return timerLib{name: "fom wheel", after: func(d time.Duration, fs *fires, i int) stopper {
		return w.AfterFunc(d, fs.fire(i))
	}, close: func() { w.Stop() }}
}

// delayedPool is a managed pool (no plan) sized for a flood of delayed
// one-task batches: a user submitting half a million of them sizes the
// queue for it.
type delayedPool struct {
	fom.Schedule `queueSize:"1000000" threadMax:"4"`
}

func (*delayedPool) Run(context.Context) (any, error) { return nil, nil }

// fireTask is fire i of fs as a fom Task: the same two words as the
// closure the runtime's and the wheel's timers get, as a user's "close
// order 42" task holds its order.
type fireTask struct {
	fs *fires
	i  int
}

func (t fireTask) ID() string { return "fire" }

func (t fireTask) Exec(context.Context) (any, error) { t.fs.record(t.i); return nil, nil }

// appSubmitAfter is what a user of a default App calls for one-shot work:
// SubmitAfter on a schedule of an App with its store and statistics; each
// delayed batch is one task. With wrap, the task is fom.TaskFunc around
// the closure the other libraries get (two more small objects per timer,
// the cost of that convenience); without, a Task of its own (fireTask).
func appSubmitAfter(wrap bool) timerLib {
	dir, err := os.MkdirTemp("", "fom-bench-oneshot")
	if err != nil {
		panic(err)
	}
	app, err := fom.New(fom.WithDataDir(dir))
	if err != nil {
		panic(err)
	}
	sc, err := app.Register(&delayedPool{}, fom.Named("delayed"))
	if err != nil {
		panic(err)
	}
	if err := app.Start(context.Background()); err != nil {
		panic(err)
	}
	lib := timerLib{name: "fom default App, SubmitAfter(Task)", after: func(d time.Duration, fs *fires, i int) stopper {
		dl, err := sc.SubmitAfter(d, fireTask{fs, i})
		if err != nil {
			panic(err)
		}
		return dl
	}}
	if wrap {
		lib = timerLib{name: "fom default App, SubmitAfter(TaskFunc(closure))", after: func(d time.Duration, fs *fires, i int) stopper {
			f := fs.fire(i)
			dl, err := sc.SubmitAfter(d, fom.TaskFunc("fire", func(context.Context) (any, error) { f(); return nil, nil }))
			if err != nil {
				panic(err)
			}
			return dl
		}}
	}
	lib.close = func() {
		app.Stop(context.Background())
		os.RemoveAll(dir)
	}
	return lib
}

// fires records each timer's fires; fire(i) is timer i's callback, a
// closure of two words as an application's "close order i" would be.
type fires struct {
	count []atomic.Int32
	at    []int64 // unix ns of the first fire
	total atomic.Int64
}

func (fs *fires) fire(i int) func() { return func() { fs.record(i) } }

func (fs *fires) record(i int) {
	if fs.count[i].Add(1) == 1 {
		fs.at[i] = time.Now().UnixNano()
	}
	fs.total.Add(1)
}

// settle is how long after the start of insertion the first timer is due:
// insertion and the heap measurement (two full GCs) finish before any timer
// fires, so lateness is measured in steady state.
const settle = 3 * time.Second

// oneShot adds n timers due 1–5 s after the settle point, cancels every
// other one right after adding it, then waits for the rest to fire and
// checks each.
func oneShot(lib timerLib, n int) oneShotResult {
	defer lib.close()
	r := rand.New(rand.NewPCG(1, 2))
	offsets := make([]time.Duration, n)
	for i := range offsets {
		offsets[i] = time.Second + time.Duration(r.Int64N(int64(4*time.Second)))
	}
	fs := &fires{count: make([]atomic.Int32, n), at: make([]int64, n)}
	count, fired, firedTotal := fs.count, fs.at, &fs.total
	heap0, _ := heapInUse()

	// The loop reads the clock once per 64 timers: a read costs 80 ns on
	// this VM, as much as half a wheel add, and would be counted for both
	// libraries. Each delay is taken from a reading made before the add, so
	// the timer is due no earlier than planned (at most the time of 64 adds,
	// some tens of µs, later, which counts as lateness) and firing before
	// the planned instant still shows as early.
	start := time.Now()
	base := start.Add(settle)
	now := start
	for i := range n {
		if i%64 == 0 {
			now = time.Now()
		}
		t := lib.after(base.Add(offsets[i]).Sub(now), fs, i)
		if i%2 == 1 && !t.Stop() {
			count[i].Add(100) // could not cancel: counted as a failure below
		}
	}
	addTime := time.Since(start)
	heap1, _ := heapInUse()
	pending := n - n/2

	if time.Now().After(base) {
		res := oneShotResult{name: lib.name, detail: "insertion overran the settle time"}
		return res
	}
	deadline := base.Add(10 * time.Second)
	for firedTotal.Load() < int64(pending) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)

	res := oneShotResult{name: lib.name, addsPerSec: float64(n) / addTime.Seconds(), bytesPerPen: float64(heap1-heap0) / float64(pending), exact: true}
	var late []time.Duration
	early, missing, twice, canceledFired := 0, 0, 0, 0
	for i := range n {
		c := count[i].Load()
		if i%2 == 1 {
			if c != 0 {
				canceledFired++
			}
			continue
		}
		switch {
		case c == 0:
			missing++
		case c > 1:
			twice++
		}
		if c >= 1 {
			l := time.Duration(fired[i] - base.Add(offsets[i]).UnixNano())
			if l < 0 {
				early++
			}
			late = append(late, l)
		}
	}
	res.p50, res.p99 = percentile(late, 0.5), percentile(late, 0.99)
	res.maxLate = percentile(late, 1)
	if early+missing+twice+canceledFired > 0 {
		res.exact = false
		res.detail = fmt.Sprintf("early %d, missing %d, twice %d, canceled-but-fired %d", early, missing, twice, canceledFired)
	}
	return res
}

// oneShotWire is a oneShotResult as a child process prints it.
type oneShotWire struct {
	Name          string
	Adds, Bytes   float64
	P50, P99, Max time.Duration
	Exact         bool
	Detail        string
}

func (r oneShotResult) wire() oneShotWire {
	return oneShotWire{r.name, r.addsPerSec, r.bytesPerPen, r.p50, r.p99, r.maxLate, r.exact, r.detail}
}

// oneShotProcess runs one try of library k in a child process (this
// program with -oneshot-lib k) and reads its result.
func oneShotProcess(k, pending, wheelSize int) (oneShotResult, error) {
	w, err := runChild[oneShotWire](fmt.Sprintf("one-shot library %d", k),
		"-oneshot-lib", strconv.Itoa(k), "-pending", strconv.Itoa(pending), "-wheel-size", strconv.Itoa(wheelSize))
	return oneShotResult{w.Name, w.Adds, w.Bytes, w.P50, w.P99, w.Max, w.Exact, w.Detail}, err
}

// medianOneShot is a library's median over its tries of the insertion
// rate, the heap and the lateness (by p99). Exactness must hold in every
// try.
func medianOneShot(runs []oneShotResult) oneShotResult {
	byRate := slices.Clone(runs)
	slices.SortFunc(byRate, func(a, b oneShotResult) int { return cmp.Compare(a.addsPerSec, b.addsPerSec) })
	byHeap := slices.Clone(runs)
	slices.SortFunc(byHeap, func(a, b oneShotResult) int { return cmp.Compare(a.bytesPerPen, b.bytesPerPen) })
	byP99 := slices.Clone(runs)
	slices.SortFunc(byP99, func(a, b oneShotResult) int { return cmp.Compare(a.p99, b.p99) })
	m := len(runs) / 2
	med := byP99[m]
	med.addsPerSec, med.bytesPerPen = byRate[m].addsPerSec, byHeap[m].bytesPerPen
	for _, r := range runs {
		if !r.exact {
			med.exact, med.detail = false, r.detail
		}
	}
	return med
}

// oneShotRatios is a contender's ratios to the runtime's in each try (the
// same try: they ran one after the other) and the worst of them.
func oneShotRatios(lib, base []oneShotResult) (adds, bytes []float64, worstAdds, worstBytes float64) {
	worstAdds, worstBytes = math.Inf(1), 0
	for i := range lib {
		a, b := lib[i].addsPerSec/base[i].addsPerSec, lib[i].bytesPerPen/base[i].bytesPerPen
		adds, bytes = append(adds, a), append(bytes, b)
		worstAdds, worstBytes = min(worstAdds, a), max(worstBytes, b)
	}
	return adds, bytes, worstAdds, worstBytes
}
