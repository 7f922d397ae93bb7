package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
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
// first minutes or a restart: dir is prepared by prepareAppDir, in which
// the app ran a lap of its run history on a fake clock, flushing after
// every round, so that every history slot of every schedule exists. Its
// flushes then rewrite rows, as a running app's do, rather than inserting
// each schedule's first page in each slot: that first lap costs a flush
// several times more (the flush scenario's live figures give both) and
// lasts a minute of a new schedule's life.
func fomApp(dir string) periodicLib {
	return periodicLib{name: appName, canSpread: true, start: func(n int, spread bool, l *lateness) (func(), error) {
		app, err := fom.New(fom.WithDataDir(dir))
		if err != nil {
			return nil, err
		}
		if err := registerAppJobs(app, n, spread, l); err != nil {
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
}

const appName = "fom default App (SQLite store, statistics persisted)"

// registerAppJobs registers the app's n jobs, each firing every whole
// second plus its phase.
func registerAppJobs(app *fom.App, n int, spread bool, l *lateness) error {
	for i := range n {
		if _, err := app.Register(&appJob{off: offset(i, n, spread), l: l}, fom.Named(fmt.Sprintf("job-%d", i))); err != nil {
			return err
		}
	}
	return nil
}

// prepareAppDir makes the data directory of the app with n jobs (spread
// or aligned) and writes a lap of their run history into it
// (appHistoryLap).
func prepareAppDir(n int, spread bool) (string, error) {
	dir, err := os.MkdirTemp("", "fom-bench-app")
	if err != nil {
		return "", err
	}
	if err := appHistoryLap(dir, n, spread); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("write a lap of the history: %w", err)
	}
	return dir, nil
}

// appHistoryLap runs the app's schedules for one lap of their run history
// (statistics.DefaultSettings().Rounds rounds) on a fake clock that ends
// now, flushing after every round, so that each round's page lands in a
// slot of its own: every slot then exists.
func appHistoryLap(dir string, n int, spread bool) error {
	laps := statistics.DefaultSettings().Rounds
	clk := clockwork.NewFakeClockAt(time.Now().Add(-time.Duration(laps+1) * time.Second))
	app, err := fom.New(fom.WithDataDir(dir), fom.WithClock(clk), fom.WithFlushInterval(time.Hour))
	if err != nil {
		return err
	}
	if err := registerAppJobs(app, n, spread, &lateness{}); err != nil { // no window: nothing recorded
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
// turns within each pass (interleaved), passes times, each measurement in
// a process of its own (costProcess): no contender pays for the garbage,
// the heap or the goroutines another one left, and each runs as it would
// in a service of its own.
// keep, when not empty, selects contenders by short name (runtime, robfig,
// fom, app); the runtime is always measured, as the baseline. modes holds
// the job placements measured: aligned, spread or both. profile, when set,
// names the children's CPU profiles (costProcess).
func costScenario(ns []int, modes []bool, passes int, warmup, window, tick time.Duration, keep map[string]bool, profile string, log func(string)) string {
	var shorts []string
	for i, short := range costShorts() {
		if i == 0 || len(keep) == 0 || keep[short] {
			shorts = append(shorts, short)
		}
	}
	dirs := map[string]string{} // the app's data directories by n and placement
	defer func() {
		for _, d := range dirs {
			os.RemoveAll(d)
		}
	}()
	rows := map[string]*costRow{}
	var order []string
	var baseName string
	for pass := 1; pass <= passes; pass++ {
		for _, n := range ns {
			for _, spread := range modes {
				for _, short := range shorts {
					lib := costLib(short, "", tick)
					if baseName == "" {
						baseName = lib.name
					}
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
					var r periodicRun
					dir, err := "", error(nil)
					if short == "app" {
						at := fmt.Sprintf("%d-%v", n, spread)
						if dirs[at] == "" {
							if dirs[at], err = prepareAppDir(n, spread); err != nil {
								delete(dirs, at)
							}
						}
						dir = dirs[at]
					}
					steal0 := stealTime()
					if err == nil {
						r, err = costProcess(short, n, spread, dir, warmup, window, tick, profile)
					}
					steal := stealTime() - steal0
					if err != nil {
						r = periodicRun{n: n, setupError: err.Error()}
					}
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
		base := rows[fmt.Sprintf("%s|%d|%v", baseName, r.n, r.spread)]
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

// costShorts are the cost scenario's contenders by short name, in the
// order of a pass; the first is the baseline.
func costShorts() []string { return []string{"runtime", "robfig", "fom", "app"} }

// costLib is the cost scenario's contender short, one of costShorts; dir
// is the app's data directory (prepareAppDir), tick the engine's wheels'.
func costLib(short, dir string, tick time.Duration) periodicLib {
	switch short {
	case "runtime":
		return runtimeTicker()
	case "robfig":
		return robfigCron()
	case "fom":
		lib := fomSchedules(tick)
		lib.name = "fom engine, store off"
		return lib
	default:
		return fomApp(dir)
	}
}

// costWire is a periodicRun as a child process reports it.
type costWire struct {
	N              int
	P99, CPUPerRun time.Duration
	Rounds         int
	GCs, AllocPer  uint64
	GoPer, SwPer   float64
	SetupError     string
}

func (r periodicRun) wire() costWire {
	return costWire{r.n, r.p99, r.cpuPerRun, r.rounds, r.gcs, r.allocPer, r.goPer, r.swPer, r.setupError}
}

func (w costWire) run() periodicRun {
	return periodicRun{n: w.N, p99: w.P99, cpuPerRun: w.CPUPerRun, rounds: w.Rounds, gcs: w.GCs, allocPer: w.AllocPer, goPer: w.GoPer, swPer: w.SwPer, setupError: w.SetupError}
}

// costChild is one measurement of the cost scenario in this process (the
// program run with -cost-lib), written to stdout as JSON.
func costChild(short string, n int, spread bool, dir string, warmup, window, tick time.Duration, profile string) error {
	if !slices.Contains(costShorts(), short) {
		return fmt.Errorf("-cost-lib %q: not one of %s", short, strings.Join(costShorts(), ", "))
	}
	if short == "app" && dir == "" { // run by hand, to profile it: the child prepares its store
		var err error
		if dir, err = prepareAppDir(n, spread); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	lib := costLib(short, dir, tick)
	if profile != "" {
		lib.profile = profile + "-" + short // the window's profile names its contender
	}
	r := measurePeriodic(lib, n, spread, warmup, window)
	return json.NewEncoder(os.Stdout).Encode(r.wire())
}

// costProcess runs one measurement of contender short in a child process
// (this program with -cost-lib) and reads its result. With profile set,
// the child writes its CPU profile (the whole process: setup, window and
// stop) to profile-short-n-spread, the last pass's remaining.
func costProcess(short string, n int, spread bool, dir string, warmup, window, tick time.Duration, profile string) (periodicRun, error) {
	args := []string{"-cost-lib", short, "-cost-n", strconv.Itoa(n), "-cost-spread=" + strconv.FormatBool(spread),
		"-cost-dir", dir, "-cost-warmup", warmup.String(), "-cost-window", window.String(), "-tick", tick.String()}
	if profile != "" {
		args = append(args, "-cpuprofile", fmt.Sprintf("%s-%s-%d-%v", profile, short, n, spread))
	}
	w, err := runChild[costWire]("cost of "+short, args...)
	return w.run(), err
}
