package schedule

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fom-go/fom/config"
	"github.com/fom-go/fom/schedule/wheel"
	"github.com/fom-go/fom/statistics"
)

// BenchmarkRound measures one round's scheduling path: create the tasks,
// submit them, wait on the latch, record, call OnComplete, compute the next
// fire, with one trivial task.
func BenchmarkRound(b *testing.B) {
	cfg, _ := config.New("bench", config.Spec{Tags: map[string]string{"fixedRate": "1s"}})
	task := TaskFunc("t", func(context.Context) (any, error) { return nil, nil })
	c, _ := New(cfg, Job{Tasks: func(context.Context) ([]Task, error) { return []Task{task}, nil }, OnComplete: func(context.Context, Round) {}}, Options{})
	c.mu.Lock()
	gen := c.ensureGeneration()
	c.mu.Unlock()
	l := newLoop(c, gen)
	defer func() {
		c.mu.Lock()
		c.setState(Stopping)
		c.mu.Unlock()
		c.terminate(l, gen)
	}()
	plan := c.plan
	rn := &runner{} // as a round on the app's runners
	b.ReportAllocs()
	for b.Loop() {
		now := time.Now()
		r, spare, _ := c.runRound(l, gen, now, CausePlan, "", rn, time.Time{})
		plan.Next(r)
		if spare != nil {
			rn.keep(spare)
		}
	}
}

// BenchmarkSubmitOne is an ad-hoc batch of one task through the pool.
func BenchmarkSubmitOne(b *testing.B) {
	cfg, _ := config.New("bench", config.Spec{})
	c, _ := New(cfg, Job{Tasks: func(context.Context) ([]Task, error) { return nil, nil }}, Options{})
	defer c.Close(context.Background())
	task := TaskFunc("t", func(context.Context) (any, error) { return nil, nil })
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		bt, _ := c.Submit(ctx, task)
		bt.Wait(ctx)
	}
}

// BenchmarkFire is a whole fire of a sleeping schedule set up as an app
// does (shared wheel and runners): wake (here by ExecNow), hand the round
// to a runner, run it with its one trivial task on that goroutine, record,
// OnComplete, compute the next fire and arm the wheel again.
func BenchmarkFire(b *testing.B) {
	cfg, _ := config.New("bench", config.Spec{Tags: map[string]string{"fixedRate": "1h"}})
	task := TaskFunc("t", func(context.Context) (any, error) { return nil, nil })
	w, _ := wheel.New()
	defer w.Stop()
	runners := NewRunners(0, 0)
	defer runners.Close()
	c, _ := New(cfg, Job{Tasks: func(context.Context) ([]Task, error) { return []Task{task}, nil }}, Options{Wheel: w, Runners: runners})
	defer c.Close(context.Background())
	if err := c.Startup(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		ch := c.changes()
		if err := c.ExecNow(); err != nil {
			b.Fatal(err)
		}
		for c.State() != Sleeping {
			<-ch
			ch = c.changes()
		}
	}
}

// BenchmarkTimedFire is BenchmarkFire woken by its timer rather than by
// ExecNow: a schedule at the shortest fixedRate on a shared wheel and runners, so a
// fire is the wheel's wake-up, the hand-off to a runner, the round and the
// next fire armed. Its time per op is mostly the wait for the next fire;
// what it is for is counting a timer fire's instructions under valgrind
// --tool=callgrind (two lengths, the difference).
func BenchmarkTimedFire(b *testing.B) {
	cfg, err := config.New("bench", config.Spec{Tags: map[string]string{"fixedRate": config.MinInterval.String()}})
	if err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	want := make(chan struct{}, 1)
	var target atomic.Int64
	task := TaskFunc("t", func(context.Context) (any, error) {
		if n.Add(1) == target.Load() {
			want <- struct{}{}
		}
		return nil, nil
	})
	w, _ := wheel.New()
	defer w.Stop()
	runners := NewRunners(0, 0)
	defer runners.Close()
	c, err := New(cfg, Job{Tasks: func(context.Context) ([]Task, error) { return []Task{task}, nil }}, Options{Wheel: w, Runners: runners})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	target.Store(1)
	if err := c.Startup(); err != nil {
		b.Fatal(err)
	}
	<-want
	b.ReportAllocs()
	b.ResetTimer()
	target.Store(n.Load() + int64(b.N))
	<-want
}

// BenchmarkSubmitAfterCancel adds a delayed batch of one task 1–5 s out
// and cancels it, with 100 000 others pending on the schedule's shared
// wheel, as a delay queue of mostly canceled work does.
func BenchmarkSubmitAfterCancel(b *testing.B) {
	cfg, _ := config.New("bench", config.Spec{})
	w, _ := wheel.New()
	defer w.Stop()
	c, _ := New(cfg, Job{Tasks: func(context.Context) ([]Task, error) { return nil, nil }}, Options{Wheel: w})
	defer c.Close(context.Background())
	task := TaskFunc("t", func(context.Context) (any, error) { return nil, nil })
	for i := range 100_000 {
		if _, err := c.SubmitAfter(time.Second+time.Duration(i%4000)*time.Millisecond, task); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		d, _ := c.SubmitAfter(time.Second+time.Duration(i%4000)*time.Millisecond, task)
		d.Cancel()
	}
}

// BenchmarkAlignedBurst is a lap of 2 000 schedules of one fixed task
// every second, all due on the same instant, as the store-off engine runs
// them (one wheel, its runners, shared conflicts): the fake clock moves a
// second and the lap ends when every round ran and armed its next fire.
// It first runs each schedule for more rounds than its in-memory history
// keeps, so that what it measures is a running app's lap, not the first
// minute's growth. Under valgrind --tool=callgrind --cache-sim=yes with a
// last level smaller than the schedules (such as --LL=1048576,16,64), the
// difference of two lengths divided by 2 000 gives instructions and
// last-level misses per fire of an aligned burst: the cache lines a fire
// finds cold are what a fire costs at 10 000 schedules.
func BenchmarkAlignedBurst(b *testing.B) {
	const n = 2000
	clk := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	w, err := wheel.New(wheel.WithClock(clk), wheel.WithDispatchers(1))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	// Under valgrind a runner may wait for the CPU longer than the
	// watchdog's real-time stall, which would then start runners that a
	// burst on a real machine does not: the count would depend on the
	// host's load. Neither the watchdog nor the linger plays a part here.
	runners := NewRunners(time.Hour, 4)
	runners.stall = time.Hour
	defer runners.Close()
	conflicts := NewConflicts()
	var ran atomic.Int64
	ctxs := make([]*Context, n)
	for i := range ctxs {
		cfg, err := config.New(fmt.Sprintf("job-%d", i), config.Spec{Tags: map[string]string{"fixedRate": "1s"}})
		if err != nil {
			b.Fatal(err)
		}
		task := TaskFunc(fmt.Sprintf("job-%d.run", i), func(context.Context) (any, error) { ran.Add(1); return nil, nil })
		c, err := New(cfg, Job{Fixed: []Task{task}}, Options{Clock: clk, Conflicts: conflicts, Wheel: w, Runners: runners})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(context.Background())
		ctxs[i] = c
	}
	for _, c := range ctxs {
		if err := c.Startup(); err != nil {
			b.Fatal(err)
		}
	}
	laps := int64(0)
	for w.Pending() < n { // every first fire armed, a second after the start
		runtime.Gosched()
	}
	lap := func() {
		clk.Advance(time.Second)
		laps++
		for ran.Load() < laps*n || w.Pending() < n {
			runtime.Gosched()
		}
	}
	// The run history without a store drops its oldest round from its
	// second lap on, and reuses a dropped page's array from its third: the
	// timed laps are those of a schedule that has run a while.
	warm := 2*statistics.DefaultSettings().Rounds + 2
	for range warm {
		lap()
	}
	b.ResetTimer()
	for range b.N {
		lap()
	}
}
