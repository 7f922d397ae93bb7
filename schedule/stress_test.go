package schedule

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fom-go/fom/config"
	"github.com/fom-go/fom/schedule/wheel"
)

// TestManySchedulesUnderOperatorStorm runs schedules as an app does (one
// wheel, shared runners with a small limit so that the queue and its
// watchdog work) on the real clock, while goroutines start, stop, exec-now,
// edit plans and submit batches at random. Rounds of one schedule must never
// overlap, every batch must complete, and everything must stop.
func TestManySchedulesUnderOperatorStorm(t *testing.T) {
	t.Parallel()
	w, err := wheel.New()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	runners := NewRunners(0, 2)
	defer runners.Close()
	const n = 40
	type sched struct {
		c       *Context
		cfg     *config.Config
		running atomic.Int32
	}
	var overlaps atomic.Int32
	scheds := make([]*sched, n)
	for i := range n {
		s := &sched{}
		cfg, err := config.New(fmt.Sprintf("s%d", i), config.Spec{Tags: map[string]string{"fixedRate": "10ms", "threadMax": "2"}})
		if err != nil {
			t.Fatal(err)
		}
		task := TaskFunc(fmt.Sprintf("s%d.t", i), func(ctx context.Context) (any, error) {
			if i%7 == 0 { // some rounds take a while, holding their runner
				select {
				case <-time.After(2 * time.Millisecond):
				case <-ctx.Done():
				}
			}
			return nil, nil
		})
		s.c, err = New(cfg, Job{
			Tasks: func(context.Context) ([]Task, error) {
				if s.running.Add(1) != 1 {
					overlaps.Add(1)
				}
				return []Task{task, task}, nil
			},
			OnComplete: func(_ context.Context, r Round) {
				if !r.Batch { // batches call OnComplete too, without Tasks
					s.running.Add(-1)
				}
			},
		}, Options{Wheel: w, Runners: runners})
		if err != nil {
			t.Fatal(err)
		}
		s.cfg = cfg
		scheds[i] = s
		if err := s.c.Startup(); err != nil {
			t.Fatal(err)
		}
	}
	var batches []*Batch
	var bmu sync.Mutex
	var wg sync.WaitGroup
	stop := time.Now().Add(time.Second)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for time.Now().Before(stop) {
				s := scheds[r.IntN(n)]
				switch r.IntN(6) {
				case 0:
					s.c.ExecNow()
				case 1:
					s.c.Shutdown()
				case 2:
					s.c.Startup()
				case 3:
					s.cfg.Apply(map[string]string{"fixedRate": fmt.Sprintf("%dms", 10+r.IntN(5))})
				case 4:
					if b, err := s.c.Submit(context.Background(), ok("adhoc")); err == nil {
						bmu.Lock()
						batches = append(batches, b)
						bmu.Unlock()
					}
				default:
					s.c.Info()
					s.c.ActiveTasks()
				}
				time.Sleep(50 * time.Microsecond)
			}
		}()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, b := range batches {
		if _, err := b.Wait(ctx); err != nil {
			t.Fatalf("batch did not complete: %v", err)
		}
	}
	// Whatever the storm left each schedule in, it still starts and runs a
	// round when asked. (Whether a schedule ran during the storm depends on
	// timing: under load one may be stopped again before each first fire.)
	for _, s := range scheds {
		before := s.c.Info().Rounds
		for s.c.Info().Rounds == before {
			if ctx.Err() != nil {
				t.Fatalf("%s does not run a round after the storm: %s", s.c.Name(), s.c.State())
			}
			switch s.c.State() {
			case Stopped, Inited:
				s.c.Startup()
			case Sleeping:
				s.c.ExecNow()
			}
			time.Sleep(time.Millisecond)
		}
	}
	for _, s := range scheds {
		if err := s.c.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if st := s.c.State(); st != Stopped && st != Inited {
			t.Fatalf("%s: %s after Close", s.c.Name(), st)
		}
	}
	if o := overlaps.Load(); o != 0 {
		t.Fatalf("%d overlapping rounds", o)
	}
}
