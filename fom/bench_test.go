package fom_test

import (
	"context"
	"runtime"
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
