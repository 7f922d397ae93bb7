package fom_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fom-go/fom/fom"
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
