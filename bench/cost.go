package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/statistics"
)

// appJob is a job as a user declares it: a tagged struct with Run, a plan
// of its own (every whole second plus its phase, as the other contenders
// do) and OnComplete to report lateness.
type appJob struct {
	fom.Schedule
	off time.Duration
	l   *lateness
}

// Run takes its lateness as every contender's job does.
func (j *appJob) Run(context.Context) (any, error) {
	now := time.Now()
	j.l.add(now, latenessOf(now, j.off))
	return nil, nil
}

func (j *appJob) Next(prev fom.Round) (time.Time, bool) {
	return prev.Start.Add(-j.off).Truncate(time.Second).Add(time.Second + j.off), true
}

// fomApp is fom as users run it: fom.New with a data directory (the
// SQLite store), schedules registered from tagged structs, statistics
// recorded and persisted.
//
// It runs on a store that the same app left, as a service does after its
// first minutes or a restart: each (n, spread) gets a data directory the
// first time, in which the app ran a lap of its run history on a fake
// clock, flushing after every round, so that every history slot of every
// schedule exists. Its flushes then rewrite rows, as a running app's do,
// rather than inserting each schedule's first page in each slot: that
// first lap costs a flush several times more (the flush scenario's live
// figures give both) and lasts a minute of a new schedule's life. The
// returned cleanup removes the directories.
func fomApp() (lib periodicLib, cleanup func()) {
	dirs := map[string]string{}
	cleanup = func() {
		for _, d := range dirs {
			os.RemoveAll(d)
		}
	}
	register := func(app *fom.App, n int, spread bool, l *lateness) error {
		for i := range n {
			if _, err := app.Register(&appJob{off: offset(i, n, spread), l: l}, fom.Named(fmt.Sprintf("job-%d", i))); err != nil {
				return err
			}
		}
		return nil
	}
	lib = periodicLib{name: "fom default App (SQLite store, statistics persisted)", canSpread: true, start: func(n int, spread bool, l *lateness) (func(), error) {
		key := fmt.Sprintf("%d-%v", n, spread)
		if dirs[key] == "" {
			dir, err := os.MkdirTemp("", "fom-bench-app")
			if err != nil {
				return nil, err
			}
			dirs[key] = dir
			if err := appHistoryLap(dir, n, spread, register); err != nil {
				return nil, fmt.Errorf("write a lap of the history: %w", err)
			}
		}
		app, err := fom.New(fom.WithDataDir(dirs[key]))
		if err != nil {
			return nil, err
		}
		if err := register(app, n, spread, l); err != nil {
			return nil, err
		}
		if err := app.Start(context.Background()); err != nil {
			return nil, err
		}
		// An app's first flush also applies the statistics retention,
		// then hourly; a run shorter than an hour would count that once-
		// an-hour cost in full. It is paid here, before the window, which
		// then holds the regular flushes of a running app.
		if err := app.FlushStats(context.Background()); err != nil {
			app.Stop(context.Background())
			return nil, err
		}
		return func() { app.Stop(context.Background()) }, nil
	}}
	return lib, cleanup
}

// appHistoryLap runs the app's schedules for one lap of their run history
// (statistics.DefaultSettings().Rounds rounds) on a fake clock that ends
// now, flushing after every round, so that each round's page lands in a
// slot of its own: every slot then exists.
func appHistoryLap(dir string, n int, spread bool, register func(*fom.App, int, bool, *lateness) error) error {
	laps := statistics.DefaultSettings().Rounds
	clk := clockwork.NewFakeClockAt(time.Now().Add(-time.Duration(laps+1) * time.Second))
	app, err := fom.New(fom.WithDataDir(dir), fom.WithClock(clk), fom.WithFlushInterval(time.Hour))
	if err != nil {
		return err
	}
	if err := register(app, n, spread, &lateness{}); err != nil { // no window: nothing recorded
		return err
	}
	if err := app.Start(context.Background()); err != nil {
		return err
	}
	defer app.Stop(context.Background())
	for range laps {
		if err := waitAsleep(app, clk); err != nil {
			return err
		}
		clk.Advance(time.Second)
		if err := waitAsleep(app, clk); err != nil {
			return err
		}
		if err := app.FlushStats(context.Background()); err != nil {
			return err
		}
	}
	return nil
}

// costRow is one contender at one N and mode over every pass.
type costRow struct {
	lib    string
	n      int
	spread bool
	runs   []periodicRun
	steals []time.Duration
}

func (r *costRow) cpu() (lo, med, hi time.Duration) {
	xs := make([]time.Duration, 0, len(r.runs))
	for _, x := range r.runs {
		xs = append(xs, x.cpuPerRun)
	}
	slices.Sort(xs)
	return xs[0], xs[len(xs)/2], xs[len(xs)-1]
}

func (r *costRow) p99() time.Duration {
	xs := make([]time.Duration, 0, len(r.runs))
	for _, x := range r.runs {
		xs = append(xs, x.p99)
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// costScenario measures CPU per fire at fixed N, the contenders taking
// turns within each pass (interleaved), passes times.
// keep, when not empty, selects contenders by short name (runtime, robfig,
// fom, app); the runtime is always measured, as the baseline. modes holds
// the job placements measured: aligned, spread or both.
func costScenario(ns []int, modes []bool, passes int, warmup, window time.Duration, keep map[string]bool, log func(string)) string {
	app, cleanup := fomApp()
	defer cleanup()
	all := []periodicLib{runtimeTicker(), robfigCron(), fomSchedules(), app}
	all[2].name = "fom engine, store off"
	var libs []periodicLib
	for i, short := range []string{"runtime", "robfig", "fom", "app"} {
		if i == 0 || len(keep) == 0 || keep[short] {
			libs = append(libs, all[i])
		}
	}
	rows := map[string]*costRow{}
	var order []string
	for pass := 1; pass <= passes; pass++ {
		for _, n := range ns {
			for _, spread := range modes {
				for _, lib := range libs {
					if spread && !lib.canSpread {
						continue
					}
					key := fmt.Sprintf("%s|%d|%v", lib.name, n, spread)
					row := rows[key]
					if row == nil {
						row = &costRow{lib: lib.name, n: n, spread: spread}
						rows[key] = row
						order = append(order, key)
					}
					steal0 := stealTime()
					r := measurePeriodic(lib, n, spread, warmup, window)
					steal := stealTime() - steal0
					row.runs = append(row.runs, r)
					row.steals = append(row.steals, steal)
					log(fmt.Sprintf("  pass %d %-52s N=%-6d spread=%-5v cpu/fire=%-10s p99=%-10s fires=%-7d steal=%s gcs=%d alloc/fire=%d B goroutines/fire=%.3f switches/fire=%.2f %s", pass, lib.name, n, spread, us(r.cpuPerRun), ms(r.p99), r.rounds, ms(steal), r.gcs, r.allocPer, r.goPer, r.swPer, r.setupError))
				}
			}
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "### CPU per fire at fixed N (process CPU over %s windows after %s of running, %d interleaved passes: min / median / max)\n\n", window, time.Second+warmup, passes)
	out.WriteString("| contender | N | jobs | CPU per fire | ×runtime (median) | p99 lateness (median) | steal per pass |\n|---|---|---|---|---|---|---|\n")
	for _, key := range order {
		r := rows[key]
		if len(r.runs) == 0 || r.runs[0].setupError != "" {
			continue
		}
		lo, med, hi := r.cpu()
		base := rows[fmt.Sprintf("%s|%d|%v", libs[0].name, r.n, r.spread)]
		_, bmed, _ := base.cpu()
		mode := "aligned"
		if r.spread {
			mode = "spread"
		}
		var steals []string
		for _, s := range r.steals {
			steals = append(steals, ms(s))
		}
		fmt.Fprintf(&out, "| %s | %d | %s | %s / %s / %s | %.1f× | %s | %s |\n", r.lib, r.n, mode, us(lo), us(med), us(hi),
			float64(med)/float64(max(bmed, 1)), ms(r.p99()), strings.Join(steals, ", "))
	}
	out.WriteString("\nTargets (issue 12): default App ≤ 2× the runtime, store off ≤ 1.5×; aligned p99 ≤ robfig's.\n\n")
	return out.String()
}
