package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/fom-go/fom/fom"
)

// appJob is a job as a user declares it: a tagged struct with Run, a plan
// of its own (every whole second plus its phase, as the other contenders
// do) and OnComplete to report lateness.
type appJob struct {
	fom.Schedule
	off time.Duration
	l   *lateness
}

func (j *appJob) Run(context.Context) (any, error) { return nil, nil }

func (j *appJob) Next(prev fom.Round) (time.Time, bool) {
	return prev.Start.Add(-j.off).Truncate(time.Second).Add(time.Second + j.off), true
}

func (j *appJob) OnComplete(_ context.Context, r fom.Round) {
	if len(r.Results) == 1 {
		j.l.add(r.Results[0].Started, r.Results[0].Started.Sub(r.Planned))
	}
}

// fomApp is fom as users run it: fom.New with a data directory (the
// SQLite store), schedules registered from tagged structs, statistics
// recorded and persisted.
func fomApp() periodicLib {
	return periodicLib{name: "fom default App (SQLite store, statistics persisted)", canSpread: true, start: func(n int, spread bool, l *lateness) (func(), error) {
		dir, err := os.MkdirTemp("", "fom-bench-app")
		if err != nil {
			return nil, err
		}
		app, err := fom.New(fom.WithDataDir(dir))
		if err != nil {
			return nil, err
		}
		for i := range n {
			if _, err := app.Register(&appJob{off: offset(i, n, spread), l: l}, fom.Named(fmt.Sprintf("job-%d", i))); err != nil {
				return nil, err
			}
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
		return func() {
			app.Stop(context.Background())
			os.RemoveAll(dir)
		}, nil
	}}
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
// fom, app); the runtime is always measured, as the baseline.
func costScenario(ns []int, passes int, window time.Duration, keep map[string]bool, log func(string)) string {
	all := []periodicLib{runtimeTicker(), robfigCron(), fomSchedules(), fomApp()}
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
			for _, spread := range []bool{false, true} {
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
					r := measurePeriodic(lib, n, spread, window)
					steal := stealTime() - steal0
					row.runs = append(row.runs, r)
					row.steals = append(row.steals, steal)
					log(fmt.Sprintf("  pass %d %-52s N=%-6d spread=%-5v cpu/fire=%-10s p99=%-10s fires=%-7d steal=%s %s", pass, lib.name, n, spread, us(r.cpuPerRun), ms(r.p99), r.rounds, ms(steal), r.setupError))
				}
			}
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "### CPU per fire at fixed N (process CPU over %s windows, %d interleaved passes: min / median / max)\n\n", window, passes)
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
