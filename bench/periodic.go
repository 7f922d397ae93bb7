package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/robfig/cron/v3"

	"github.com/fom-go/fom/config"
	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/schedule"
	"github.com/fom-go/fom/schedule/wheel"
)

// lateness collects fire lateness samples from many goroutines. A sample
// takes a slot of a buffer sized for the window with one atomic add: no
// lock for the fires of a burst to queue on, and no slice grown (copied)
// during the window. (Shards of a locked slice measured the same as one
// lock on 2026-11-24; this recorder is simply the one with nothing to
// wait on.)
type lateness struct {
	from, to atomic.Int64 // the window, unix ns: fires planned outside it are dropped; to 0 until it is set
	buf      []time.Duration
	sec      []int32      // each sample's planned second, counted from the window's start
	job      []int32      // each sample's job, -1 when not told (addJob)
	next     atomic.Int64 // samples taken, including those past the buffer
}

// newLateness holds up to n fires a second over window, and as many again.
func newLateness(n int, window time.Duration) *lateness {
	size := 2 * n * int(window/time.Second+1)
	return &lateness{buf: make([]time.Duration, size), sec: make([]int32, size), job: make([]int32, size)}
}

// add records a fire that started at now, d after it was planned.
func (l *lateness) add(now time.Time, d time.Duration) { l.addJob(now, d, -1) }

// addJob records a fire of job that started at now, d after it was planned.
func (l *lateness) addJob(now time.Time, d time.Duration, job int) {
	planned := now.Add(-d).UnixNano()
	from := l.from.Load()
	if to := l.to.Load(); to == 0 || planned < from || planned >= to {
		return
	}
	if i := l.next.Add(1) - 1; i < int64(len(l.buf)) {
		l.buf[i], l.sec[i], l.job[i] = d, int32((planned-from)/int64(time.Second)), int32(job)
	}
}

// bySecond is the p99 of the samples of each planned second of the
// window, in order: where a slow second falls (a lease handed over, a
// renewal).
func (l *lateness) bySecond() []time.Duration {
	n := min(l.next.Load(), int64(len(l.buf)))
	var secs [][]time.Duration
	for i := range n {
		s := int(l.sec[i])
		for len(secs) <= s {
			secs = append(secs, nil)
		}
		secs[s] = append(secs[s], l.buf[i])
	}
	out := make([]time.Duration, len(secs))
	for i, s := range secs {
		out[i] = percentile(s, 0.99)
	}
	return out
}

// split is the p99 of the samples of the jobs in moved, and of the others.
func (l *lateness) split(moved map[int]bool) (in, out time.Duration) {
	n := min(l.next.Load(), int64(len(l.buf)))
	var a, b []time.Duration
	for i := range n {
		if moved[int(l.job[i])] {
			a = append(a, l.buf[i])
		} else {
			b = append(b, l.buf[i])
		}
	}
	return percentile(a, 0.99), percentile(b, 0.99)
}

// window sets the window: fires planned from `from` for d.
func (l *lateness) window(from time.Time, d time.Duration) {
	l.from.Store(from.UnixNano())
	l.to.Store(from.Add(d).UnixNano())
}

// samples returns the samples taken; call it once the window's fires
// are over. ok is false when more fires came than the buffer holds.
func (l *lateness) samples() (s []time.Duration, ok bool) {
	n := l.next.Load()
	return slices.Clone(l.buf[:min(n, int64(len(l.buf)))]), n <= int64(len(l.buf))
}

// periodicRun is one library at one N.
type periodicRun struct {
	n          int
	p99        time.Duration
	rounds     int
	cpuPerRun  time.Duration
	gcs        uint64  // collections that ended in the window
	allocPer   uint64  // heap bytes allocated in the window per fire
	goPer      float64 // goroutines created in the window per fire
	swPer      float64 // the process's context switches in the window per fire
	setupError string
}

// periodicLib starts n jobs firing every second (spread over the second
// when spread is set) that record their lateness, and returns a stop func.
type periodicLib struct {
	name      string
	canSpread bool
	start     func(n int, spread bool, l *lateness) (stop func(), err error)
	// profile, when set, is the prefix of the files each measurement
	// window is profiled to (FOM_BENCH_WINDOW_PROFILE).
	profile string
}

// offset is job i's phase within the second.
func offset(i, n int, spread bool) time.Duration {
	if !spread {
		return 0
	}
	return time.Duration(i) * time.Second / time.Duration(n)
}

// latenessOf is how late now is for a fire planned at whole seconds + off.
func latenessOf(now time.Time, off time.Duration) time.Duration {
	d := now.Sub(now.Truncate(time.Second).Add(off))
	if d < 0 {
		d += time.Second
	}
	return d
}

// fomSchedules is fom's engine, its wheels ticking every tick (-tick).
func fomSchedules(tick time.Duration) periodicLib {
	return periodicLib{name: "fom", canSpread: true, start: func(n int, spread bool, l *lateness) (func(), error) {
		conflicts := schedule.NewConflicts()
		// As an App does: a wheel per P (coalescing fires to the millisecond), schedules assigned round-robin,
		// and a set of runners (four at once) per wheel.
		wheels := make([]*wheel.Wheel, runtime.GOMAXPROCS(0))
		runners := make([]*schedule.Runners, len(wheels))
		for i := range wheels {
			runners[i] = schedule.NewRunners(0, 4)
			w, err := wheel.New(wheel.WithDispatchers(1), wheel.WithTick(tick), wheel.WithCoalesce(fom.DefaultFireCoalescing))
			if err != nil {
				return nil, err
			}
			wheels[i] = w
		}
		ctxs := make([]*schedule.Context, 0, n)
		for i := range n {
			off := offset(i, n, spread)
			cfg, err := config.New(fmt.Sprintf("job-%d", i), config.Spec{})
			if err != nil {
				return nil, err
			}
			// Fire at every whole second plus the job's phase: a fixed rate
			// of 1s, all jobs aligned on the same instants (or spread).
			plan := schedule.PlanFunc("every second", func(prev schedule.Round) (time.Time, bool) {
				return prev.Start.Add(-off).Truncate(time.Second).Add(time.Second + off), true
			})
			// The task takes its lateness as every contender's job does. It
			// is named after its schedule, as fom names a job's Run task.
			task := schedule.TaskFunc(fmt.Sprintf("job-%d", i), func(context.Context) (any, error) {
				now := time.Now()
				l.add(now, latenessOf(now, off))
				return nil, nil
			})
			// One fixed task, as fom builds a job with a Run method.
			job := schedule.Job{Fixed: []schedule.Task{task}, Plan: plan}
			c, err := schedule.New(cfg, job, schedule.Options{Conflicts: conflicts, Wheel: wheels[i%len(wheels)], Runners: runners[i%len(wheels)]})
			if err != nil {
				return nil, err
			}
			if err := c.Startup(); err != nil {
				return nil, err
			}
			ctxs = append(ctxs, c)
		}
		return func() {
			var wg sync.WaitGroup
			for _, c := range ctxs {
				wg.Add(1)
				go func() { defer wg.Done(); c.Close(context.Background()) }()
			}
			wg.Wait()
			for _, rs := range runners {
				rs.Close()
			}
		}, nil
	}}
}

func robfigCron() periodicLib {
	return periodicLib{name: "robfig/cron v3", canSpread: false, start: func(n int, spread bool, l *lateness) (func(), error) {
		c := cron.New(cron.WithSeconds())
		for range n {
			c.Schedule(cron.Every(time.Second), cron.FuncJob(func() {
				now := time.Now()
				l.add(now, latenessOf(now, 0))
			}))
		}
		c.Start()
		return func() { <-c.Stop().Done() }, nil
	}}
}

func goCron() periodicLib {
	return periodicLib{name: "gocron v2", canSpread: true, start: func(n int, spread bool, l *lateness) (func(), error) {
		s, err := gocron.NewScheduler()
		if err != nil {
			return nil, err
		}
		first := time.Now().Truncate(time.Second).Add(2 * time.Second)
		for i := range n {
			off := offset(i, n, spread)
			_, err := s.NewJob(gocron.DurationJob(time.Second), gocron.NewTask(func() {
				now := time.Now()
				l.add(now, latenessOf(now, off))
			}), gocron.WithStartAt(gocron.WithStartDateTime(first.Add(off))))
			if err != nil {
				s.Shutdown()
				return nil, err
			}
		}
		s.Start()
		return func() { s.Shutdown() }, nil
	}}
}

func runtimeTicker() periodicLib {
	return periodicLib{name: "Go runtime timers (time.AfterFunc, re-armed)", canSpread: true, start: func(n int, spread bool, l *lateness) (func(), error) {
		var mu sync.Mutex
		stopped := false
		timers := make([]*time.Timer, n)
		for i := range n {
			off := offset(i, n, spread)
			var fire func()
			fire = func() {
				now := time.Now()
				l.add(now, latenessOf(now, off))
				next := now.Add(-off).Truncate(time.Second).Add(time.Second + off)
				mu.Lock()
				if !stopped {
					timers[i].Reset(time.Until(next))
				}
				mu.Unlock()
			}
			mu.Lock()
			timers[i] = time.AfterFunc(time.Until(time.Now().Add(-off).Truncate(time.Second).Add(time.Second+off)), fire)
			mu.Unlock()
		}
		return func() {
			mu.Lock()
			stopped = true
			for _, t := range timers {
				t.Stop()
			}
			mu.Unlock()
		}, nil
	}}
}

// gcCycles is the number of garbage collections completed so far, the
// bytes allocated on the heap so far, and the goroutines created so far.
func gcCycles() (cycles, allocated, created uint64) {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/allocs:bytes"}, {Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64()
}

// measurePeriodic runs lib with n jobs for the warm-up second, warmup more,
// then window.
func measurePeriodic(lib periodicLib, n int, spread bool, warmup, window time.Duration) periodicRun {
	runtime.GC()
	l := newLateness(n, window)
	stop, err := lib.start(n, spread, l)
	if err != nil {
		return periodicRun{n: n, setupError: err.Error()}
	}
	// Skip to the start of the next whole second plus one warm-up second
	// and warmup.
	from := time.Now().Truncate(time.Second).Add(2*time.Second + warmup)
	l.window(from, window)
	time.Sleep(time.Until(from))
	if lib.profile != "" {
		f, _ := os.Create(fmt.Sprintf("%s-%d-%v", lib.profile, n, spread))
		// 100 Hz gives too few samples of a window to tell the buckets
		// apart; StartCPUProfile then complains once that the rate is set.
		runtime.SetCPUProfileRate(2000)
		pprof.StartCPUProfile(f)
		runtime.GC() // the allocs profile is as of the last collection
		if f, err := os.Create(fmt.Sprintf("%s-%d-%v.allocs0", lib.profile, n, spread)); err == nil {
			pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
		defer f.Close()
	}
	cpu0, sw0 := usage()
	gc0, alloc0, gor0 := gcCycles()
	time.Sleep(window)
	cpu1, sw1 := usage()
	gc1, alloc1, gor1 := gcCycles()
	time.Sleep(200 * time.Millisecond) // the window's last fires finish
	if lib.profile != "" {
		pprof.StopCPUProfile()
		runtime.GC()
		// What the window allocated, by site: go tool pprof
		// -sample_index=alloc_space -diff_base FILE.allocs0 FILE.allocs.
		if f, err := os.Create(fmt.Sprintf("%s-%d-%v.allocs", lib.profile, n, spread)); err == nil {
			pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	stop()
	samples, ok := l.samples()
	if !ok {
		return periodicRun{n: n, setupError: "more fires than n a second"}
	}
	r := periodicRun{n: n, rounds: len(samples), p99: percentile(samples, 0.99), gcs: gc1 - gc0}
	if r.rounds > 0 {
		// The whole process's CPU in the window: the jobs, their wake-ups,
		// and the runtime's own work for them.
		r.cpuPerRun = (cpu1 - cpu0) / time.Duration(r.rounds)
		r.allocPer = (alloc1 - alloc0) / uint64(r.rounds)
		r.goPer = float64(gor1-gor0) / float64(r.rounds)
		r.swPer = float64(sw1-sw0) / float64(r.rounds)
	}
	// A job that never fired in the window counts as infinitely late.
	if expected := n * int(window/time.Second); r.rounds < expected*9/10 {
		r.p99 = time.Hour
	}
	return r
}

// largestN climbs a ladder of N until p99 lateness reaches the limit in
// every one of trials tries. This VM loses its CPUs to the hypervisor for
// tens of milliseconds now and then (steal time), which only ever makes a
// try later; a step passes when one try stays under the limit, so the
// ladder measures the library rather than the neighbours. Every library
// gets the same number of tries.
func largestN(lib periodicLib, spread bool, ladder []int, limit, window time.Duration, trials int, log func(string)) (best periodicRun, all []periodicRun) {
	for _, n := range ladder {
		passed := false
		for try := 1; try <= trials && !passed; try++ {
			steal0 := stealTime()
			r := measurePeriodic(lib, n, spread, 0, window)
			all = append(all, r)
			log(fmt.Sprintf("  %-48s spread=%-5v N=%-6d try %d: p99=%-10s runs=%-7d cpu/run=%-10s steal=%s %s", lib.name, spread, n, try, ms(r.p99), r.rounds, us(r.cpuPerRun), ms(stealTime()-steal0), r.setupError))
			if r.setupError != "" {
				return best, all
			}
			if r.p99 < limit {
				passed = true
				best = r
			}
		}
		if !passed {
			break
		}
	}
	return best, all
}

// idleMemory is heap plus stacks per started, idle fom schedule, set up as
// an App does (shared wheel and runners).
func idleMemory(n int) float64 {
	conflicts := schedule.NewConflicts()
	w, _ := wheel.New()
	defer w.Stop()
	runners := schedule.NewRunners(0, 0)
	defer runners.Close()
	h0, s0 := heapInUse()
	ctxs := make([]*schedule.Context, 0, n)
	for i := range n {
		cfg, _ := config.New(fmt.Sprintf("idle-%d", i), config.Spec{Tags: map[string]string{"cron": "0 0 * * * *"}})
		c, _ := schedule.New(cfg, schedule.Job{Tasks: func(context.Context) ([]schedule.Task, error) { return nil, nil }}, schedule.Options{Conflicts: conflicts, Wheel: w, Runners: runners})
		c.Startup()
		ctxs = append(ctxs, c)
	}
	h1, s1 := heapInUse()
	for _, c := range ctxs {
		c.Close(context.Background())
	}
	return float64(h1+s1-h0-s0) / float64(n)
}
