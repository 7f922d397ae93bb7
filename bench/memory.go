package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fom-go/fom/fom"
)

// memJob runs once a second: on the fake clock of the memory scenario it
// fires only when the scenario advances it.
type memJob struct {
	fom.Schedule `fixedRate:"1s"`
	rounds       *atomic.Int64
}

func (*memJob) Run(context.Context) (any, error) { return nil, nil }

func (j *memJob) OnComplete(context.Context, fom.Round) { j.rounds.Add(1) }

// startMemJobs registers n memJobs named prefix-0 … prefix-(n-1), counting
// their rounds in done, and starts the app.
func startMemJobs(app *fom.App, n int, prefix string, done *atomic.Int64) error {
	for i := range n {
		if _, err := app.Register(&memJob{rounds: done}, fom.Named(fmt.Sprintf("%s-%d", prefix, i))); err != nil {
			return err
		}
	}
	return app.Start(context.Background())
}

// waitAsleep waits until every schedule of app sleeps with its next fire
// armed after the fake clock's now, so that the clock can move: it jumps a
// whole second at once.
func waitAsleep(app *fom.App, clk *clockwork.FakeClock) error {
	deadline := time.Now().Add(time.Minute)
	for _, sc := range app.Schedules() {
		for i := sc.Info(); i.State != fom.Sleeping || !i.Next.After(clk.Now()); i = sc.Info() {
			if time.Now().After(deadline) {
				return fmt.Errorf("schedule %s: %s, next %v", sc.Name(), i.State, i.Next)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	return nil
}

// appMemory is heap plus goroutine stacks per schedule of a default App:
// started and sleeping before its first round, after `rounds` rounds of
// one task each, fired by advancing a fake clock from noon (UTC) on, and
// after a week: a few more rounds on each of the next six days, so that
// the statistics hold the days of the default retention window, as an app
// that has run for a week does.
func appMemory(n, rounds int) (before, after, week float64, err error) {
	dir, err := os.MkdirTemp("", "fom-bench-mem")
	if err != nil {
		return 0, 0, 0, err
	}
	defer os.RemoveAll(dir)
	if os.Getenv("FOM_BENCH_HEAP_PROFILE") != "" {
		runtime.MemProfileRate = 1 // every allocation, for the profiles
	}
	// From noon: the rounds stay within one day whatever the hour of the
	// run (a run just before midnight otherwise measured two days).
	clk := clockwork.NewFakeClockAt(time.Now().UTC().Truncate(24 * time.Hour).Add(12 * time.Hour))
	// The app writes statistics every 5 s; a jump of the fake clock by a
	// second takes far less than a second here, so its own flushes would
	// lag behind the rounds and be caught half done. The scenario flushes
	// in step instead, every fifth round (its own ticker is set aside).
	app, err := fom.New(fom.WithDataDir(dir), fom.WithClock(clk), fom.WithFlushInterval(time.Hour))
	if err != nil {
		return 0, 0, 0, err
	}
	var done atomic.Int64
	// Open the store first, so that its caches do not count.
	if _, err := app.Register(&memJob{rounds: &done}, fom.Named("warm")); err != nil {
		return 0, 0, 0, err
	}
	h0, s0 := heapInUse()
	if err := startMemJobs(app, n, "mem", &done); err != nil {
		return 0, 0, 0, err
	}
	defer app.Stop(context.Background())
	asleep := func() error { return waitAsleep(app, clk) }
	if err := asleep(); err != nil {
		return 0, 0, 0, err
	}
	h1, s1 := heapInUse()
	if f := os.Getenv("FOM_BENCH_HEAP_PROFILE"); f != "" {
		if w, err := os.Create(f + ".before"); err == nil {
			pprof.WriteHeapProfile(w)
			w.Close()
		}
	}
	round := func(r int, step time.Duration) error {
		clk.Advance(step)
		if err := asleep(); err != nil {
			return fmt.Errorf("round %d: %w", r, err)
		}
		// Measured three rounds after a flush: what waits for the next
		// one is counted.
		if r%5 == 2 {
			return app.FlushStats(context.Background())
		}
		return nil
	}
	for r := 1; r <= rounds; r++ {
		if err := round(r, time.Second); err != nil {
			return 0, 0, 0, err
		}
	}
	if got, want := done.Load(), int64(rounds*(n+1)); got != want {
		return 0, 0, 0, fmt.Errorf("%d rounds ran, want %d", got, want)
	}
	h2, s2 := heapInUse()
	if f := os.Getenv("FOM_BENCH_HEAP_PROFILE"); f != "" {
		if w, err := os.Create(f); err == nil {
			pprof.WriteHeapProfile(w)
			w.Close()
		}
	}
	// A day later, five rounds (the first one at once, for the fire the
	// jump passed), six times.
	r := rounds
	for range 6 {
		step := 24*time.Hour - 4*time.Second
		for range 5 {
			r++
			if err := round(r, step); err != nil {
				return 0, 0, 0, err
			}
			step = time.Second
		}
	}
	h3, s3 := heapInUse()
	if f := os.Getenv("FOM_BENCH_HEAP_PROFILE"); f != "" {
		if w, err := os.Create(f + ".week"); err == nil {
			pprof.WriteHeapProfile(w)
			w.Close()
		}
	}
	per := func(h, s uint64) float64 { return float64(h+s-h0-s0) / float64(n) }
	return per(h1, s1), per(h2, s2), per(h3, s3), nil
}
