package main

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/panjf2000/ants/v2"

	"github.com/fom-go/fom/config"
	"github.com/fom-go/fom/schedule"
)

type throughputResult struct {
	name          string
	tasksPerSec   float64
	allocsPerTask float64
}

const batchSize = 10000

func sink(context.Context) (any, error) { return nil, nil }

// throughputFom pushes trivial tasks through one context in batches.
func throughputFom(d time.Duration) throughputResult {
	procs := runtime.GOMAXPROCS(0)
	cfg, _ := config.New("throughput", config.Spec{Tags: map[string]string{
		"threadMax": itoa(procs), "threadCore": itoa(procs), "queueSize": itoa(batchSize),
	}})
	c, _ := schedule.New(cfg, schedule.Job{Tasks: func(context.Context) ([]schedule.Task, error) { return nil, nil }}, schedule.Options{})
	defer c.Close(context.Background())
	tasks := make([]schedule.Task, batchSize)
	for i := range tasks {
		tasks[i] = schedule.TaskFunc("t", sink)
	}
	return measureThroughput("fom (one context, threadMax=GOMAXPROCS)", d, func() {
		b, err := c.Submit(context.Background(), tasks...)
		if err != nil {
			panic(err)
		}
		b.Wait(context.Background())
	})
}

func throughputGoroutines(d time.Duration) throughputResult {
	return measureThroughput("plain goroutines", d, func() {
		var wg sync.WaitGroup
		wg.Add(batchSize)
		for range batchSize {
			go func() { sink(nil); wg.Done() }()
		}
		wg.Wait()
	})
}

func throughputAnts(d time.Duration) throughputResult {
	p, _ := ants.NewPool(runtime.GOMAXPROCS(0))
	defer p.Release()
	return measureThroughput("panjf2000/ants (pool of GOMAXPROCS)", d, func() {
		var wg sync.WaitGroup
		wg.Add(batchSize)
		for range batchSize {
			p.Submit(func() { sink(nil); wg.Done() })
		}
		wg.Wait()
	})
}

func measureThroughput(name string, d time.Duration, batch func()) throughputResult {
	batch() // warm up
	m0 := mallocs()
	start := time.Now()
	n := 0
	for time.Since(start) < d {
		batch()
		n += batchSize
	}
	el := time.Since(start)
	return throughputResult{name: name, tasksPerSec: float64(n) / el.Seconds(), allocsPerTask: float64(mallocs()-m0) / float64(n)}
}
