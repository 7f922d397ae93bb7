package fom_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/statistics"
)

// fireJob signals every completed round.
type fireJob struct {
	fom.Schedule `cron:"0 0 0 1 1 *"`
	done         chan struct{}
}

func (j *fireJob) Run(context.Context) (any, error) { return nil, nil }

func (j *fireJob) OnComplete(context.Context, fom.Round) { j.done <- struct{}{} }

// BenchmarkAppFire is one round of a job of a default App, as users run
// it: the SQLite store, statistics and the run history recorded. The
// flush is kept out of the loop (an hour apart); `go run ./bench -only
// flush` measures it. A deterministic guard of the fire path under
// valgrind --tool=callgrind.
func BenchmarkAppFire(b *testing.B) {
	app, err := fom.New(fom.WithDataDir(b.TempDir()), fom.WithFlushInterval(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	j := &fireJob{done: make(chan struct{}, 1)}
	sc, err := app.Register(j, fom.Named("fire"))
	if err != nil {
		b.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer app.Stop(context.Background())
	b.ReportAllocs()
	for b.Loop() {
		if err := sc.ExecNow(); err != nil {
			b.Fatal(err)
		}
		<-j.done
		for sc.State() != fom.Sleeping { // the round goroutine arms the next fire
			runtime.Gosched()
		}
	}
}

// delayedPool is a managed pool sized for a flood of delayed batches.
type delayedPool struct {
	fom.Schedule `queueSize:"100000" threadMax:"4"`
}

func (*delayedPool) Run(context.Context) (any, error) { return nil, nil }

// countTask counts its runs.
type countTask struct{ n *atomic.Int64 }

func (countTask) ID() string                          { return "count" }
func (t countTask) Exec(context.Context) (any, error) { t.n.Add(1); return nil, nil }

// BenchmarkAppSubmitAfter is a delayed batch of one task of a default
// App, from SubmitAfter to its end (statistics and run history
// recorded), a thousand pending at a time: B/op is what each leaves
// behind for the collector, which sets how often it runs during a flood
// of them.
func BenchmarkAppSubmitAfter(b *testing.B) {
	app, err := fom.New(fom.WithDataDir(b.TempDir()), fom.WithFlushInterval(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	sc, err := app.Register(&delayedPool{}, fom.Named("delayed"))
	if err != nil {
		b.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer app.Stop(context.Background())
	var n atomic.Int64
	task := countTask{&n}
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		if _, err := sc.SubmitAfter(time.Millisecond, task); err != nil {
			b.Fatal(err)
		}
		if i++; i%1000 == 0 {
			for n.Load() < i {
				runtime.Gosched()
			}
		}
	}
	for n.Load() < i {
		runtime.Gosched()
	}
}

// BenchmarkAppFireCold is BenchmarkAppFire over 2 000 schedules, fired in
// turn, with a flush of the statistics after every five fires of each, as
// a running app's flush finds them when its jobs fire every second. Each
// fire finds its schedule where a running app with thousands of schedules
// finds it: out of the caches. Under valgrind --tool=callgrind
// --cache-sim=yes, with a last level smaller than the schedules (such as
// --LL=1048576,16,64), the last-level misses per fire count the cache
// lines that a fire and its share of a flush reach: what sets a fire's
// cost at 10 000 schedules. Compare runs of two lengths that differ by a
// multiple of 10 000 fires, so that both hold whole flushes.
func BenchmarkAppFireCold(b *testing.B) {
	const n, perFlush = 2000, 5
	app, err := fom.New(fom.WithDataDir(b.TempDir()), fom.WithFlushInterval(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	jobs := make([]*fireJob, n)
	scs := make([]*fom.ScheduleContext, n)
	for i := range jobs {
		jobs[i] = &fireJob{done: make(chan struct{}, 1)}
		if scs[i], err = app.Register(jobs[i], fom.Named(fmt.Sprintf("fire-%d", i))); err != nil {
			b.Fatal(err)
		}
	}
	if err := app.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer app.Stop(context.Background())
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sc, j := scs[i%n], jobs[i%n]
		if i++; i%(n*perFlush) == 0 {
			if err := app.FlushStats(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		if err := sc.ExecNow(); err != nil {
			b.Fatal(err)
		}
		<-j.done
		for sc.State() != fom.Sleeping {
			runtime.Gosched()
		}
	}
}

// burstJob runs every second and counts its runs.
type burstJob struct {
	fom.Schedule `fixedRate:"1s"`
	ran          *atomic.Int64
}

func (j *burstJob) Run(context.Context) (any, error) { j.ran.Add(1); return nil, nil }

// BenchmarkAppAlignedBurst is a lap of 2 000 schedules of a default App
// (the SQLite store, statistics and run history recorded), one task each
// every second, all due on the same instant: the fake clock moves a
// second and the lap ends when every round ran and its schedule sleeps
// again. The app's statistics are flushed every fifth lap, as its flush
// every 5 s finds them when its jobs fire every second, so an op holds
// 2 000 fires and a fifth of a flush of 2 000 schedules. It first runs
// more laps than a schedule's history keeps rounds, and flushes, so that
// every slot of the history is in the store. Under valgrind
// --tool=callgrind, the difference of two lengths that differ by a
// multiple of five laps, divided by their fires, is what a fire of an
// app costs in instructions, its share of the flush included: the
// deterministic figure behind the cost scenario's default App.
func BenchmarkAppAlignedBurst(b *testing.B) {
	const n, perFlush = 2000, 5
	clk := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	app, err := fom.New(fom.WithDataDir(b.TempDir()), fom.WithClock(clk), fom.WithFlushInterval(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	var ran atomic.Int64
	scs := make([]*fom.ScheduleContext, n)
	for i := range scs {
		if scs[i], err = app.Register(&burstJob{ran: &ran}, fom.Named(fmt.Sprintf("burst-%d", i))); err != nil {
			b.Fatal(err)
		}
	}
	if err := app.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer app.Stop(context.Background())
	asleep := func() {
		for _, sc := range scs {
			for sc.State() != fom.Sleeping {
				runtime.Gosched()
			}
		}
	}
	asleep() // each armed for its first fire, a period after the start
	laps := int64(0)
	lap := func() {
		clk.Advance(time.Second)
		laps++
		for ran.Load() < laps*n {
			runtime.Gosched()
		}
		asleep()
		if laps%perFlush == 0 {
			if err := app.FlushStats(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	}
	warm := int64(statistics.DefaultSettings().Rounds + 2*perFlush)
	for laps < warm || laps%perFlush != 0 {
		lap()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		lap()
	}
}
