package main

import (
	"context"
	"fmt"
	"os"

	"github.com/fom-go/fom/fom"
)

// memJob is a sleeping job: hourly, so it never fires while measured.
type memJob struct {
	fom.Schedule `cron:"0 0 * * * *"`
}

func (*memJob) Run(context.Context) (any, error) { return nil, nil }

// appMemory is heap plus stacks per schedule of a default App: sleeping
// before its first round, and after `rounds` rounds of one task each
// (ad-hoc batches through the same pool, statistics and results).
func appMemory(n, rounds int) (before, after float64, err error) {
	dir, err := os.MkdirTemp("", "fom-bench-mem")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	app, err := fom.New(fom.WithDataDir(dir))
	if err != nil {
		return 0, 0, err
	}
	// Open the store first, so that its caches do not count.
	if _, err := app.Register(&memJob{}, fom.Named("warm")); err != nil {
		return 0, 0, err
	}
	if err := app.Start(context.Background()); err != nil {
		return 0, 0, err
	}
	defer app.Stop(context.Background())
	h0, s0 := heapInUse()
	scs := make([]*fom.ScheduleContext, n)
	for i := range n {
		if scs[i], err = app.Register(&memJob{}, fom.Named(fmt.Sprintf("mem-%d", i))); err != nil {
			return 0, 0, err
		}
	}
	h1, s1 := heapInUse()
	task := fom.TaskFunc("t", func(context.Context) (any, error) { return nil, nil })
	for _, sc := range scs {
		for range rounds {
			b, err := sc.Submit(context.Background(), task)
			if err != nil {
				return 0, 0, err
			}
			if _, err := b.Wait(context.Background()); err != nil {
				return 0, 0, err
			}
		}
	}
	h2, s2 := heapInUse()
	return float64(h1+s1-h0-s0) / float64(n), float64(h2+s2-h0-s0) / float64(n), nil
}
