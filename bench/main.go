// Command bench measures fom against its peers in one run and prints a
// markdown table with the ratios. `make bench` runs the short version;
// see README.md for what each scenario means and the latest results.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	full := flag.Bool("full", false, "longer windows and a longer ladder")
	only := flag.String("only", "oneshot,periodic,cost,flush,memory,throughput", "scenarios to run")
	pending := flag.Int("pending", 1_000_000, "timers in the one-shot scenario")
	wheelSize := flag.Int("wheel-size", 512, "buckets per wheel level in the one-shot scenario")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile here; the cost scenario measures each contender in a child process, whose profile goes to this name with -contender-N-spread added")
	memprofile := flag.String("memprofile", "", "write a heap profile here at the end, sampling one allocation per 4 KiB")
	ladderFlag := flag.String("ladder", "", "comma-separated N values for the periodic scenario")
	libsFlag := flag.String("libs", "", "comma-separated libraries to run (periodic: fom, runtime, robfig, gocron; cost: runtime, robfig, fom, app; timers: sqlite, pg1, pg3, river); default all")
	trials := flag.Int("trials", 3, "tries per step of the periodic ladder; a step passes when one try does")
	windowFlag := flag.Duration("window", 0, "measurement window per try of the periodic ladder (default 2s, 5s with -full)")
	tick := flag.Duration("tick", 100*time.Microsecond, "tick of fom's wheels in the periodic scenario")
	jobsFlag := flag.String("jobs", "aligned,spread", "placements of the cost scenario's jobs: aligned (all on the same instant), spread (over the second), or both")
	passes := flag.Int("passes", 3, "interleaved passes of the cost scenario")
	costWindow := flag.Duration("cost-window", 10*time.Second, "measurement window of the cost scenario (20s with -full)")
	costWarmup := flag.Duration("cost-warmup", 0, "how long the cost scenario's contenders run before the window, past its one warm-up second (a schedule's statistics settle after about a minute)")
	liveFlush := flag.Int("live-flush", 1000, "schedules of the running App whose flush the flush scenario also measures (about 75 s; 0: skip; one of 100, 1000, 10000)")
	oneShotChild := flag.Int("oneshot-lib", -1, "internal: run one try of one-shot library k in this process and print it as JSON")
	costChildLib := flag.String("cost-lib", "", "internal: run one measurement of the cost scenario's contender (runtime, robfig, fom, app) in this process and print it as JSON")
	costN := flag.Int("cost-n", 1000, "internal: jobs of a -cost-lib measurement")
	costSpread := flag.Bool("cost-spread", false, "internal: a -cost-lib measurement's jobs are spread over the second")
	costDir := flag.String("cost-dir", "", "internal: the app's data directory of a -cost-lib measurement (none: the child prepares one)")
	clusterRows := flag.String("cluster-rows", "one,three,start,join,leave", "rows of the cluster scenario: one (App on SQLite), three (Apps on PostgreSQL, settled), start (the three started together, the window a second after: their first seconds), join (the third started mid-window), leave (the third stopped mid-window)")
	clusterWarmup := flag.Duration("cluster-warmup", 8*time.Second, "how long the cluster scenario's instances run before its window (but the start row's)")
	clusterWindow := flag.Duration("cluster-window", 10*time.Second, "the cluster scenario's window")
	timersBurst := flag.Bool("timers-burst", false, "the timers scenario's timers all fall due at one instant, 2 s plus 40 µs a timer after the inserts begin (a backlog drained: deliveries a second count from that instant)")
	failoverChildSpec := flag.String("failover-child", "", "internal: run the failover scenario's victim on <schema>:<ttl>")
	failoverN := flag.Int("failover-n", 1000, "schedules of the failover scenario")
	failoverTTLs := flag.String("failover-ttls", "15s,3s", "lease TTLs the failover scenario measures")
	fomdN := flag.Int("fomd-n", 100_000, "timers of the fomd scenario")
	fomdSpread := flag.Duration("fomd-spread", time.Minute, "the window the fomd scenario's timers fall due over")
	flag.Parse()
	// Each measurement window of the periodic scenarios is profiled to
	// files with this prefix when it is set.
	windowProfile := os.Getenv("FOM_BENCH_WINDOW_PROFILE")
	oneShotLibs := []func() timerLib{runtimeTimers, func() timerLib { return wheelTimers(*wheelSize) },
		func() timerLib { return appSubmitAfter(false) }, func() timerLib { return appSubmitAfter(true) }}
	if *oneShotChild >= 0 {
		r := oneShot(oneShotLibs[*oneShotChild](), *pending)
		if err := json.NewEncoder(os.Stdout).Encode(r.wire()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	for _, k := range strings.Split(*libsFlag, ",") { // a misspelt name would otherwise measure nothing of it
		if k = strings.TrimSpace(k); k != "" && !slices.Contains([]string{"fom", "runtime", "robfig", "gocron", "app", "sqlite", "pg1", "pg3", "river"}, k) {
			fmt.Fprintf(os.Stderr, "-libs: %q is none of fom, runtime, robfig, gocron (periodic), app (cost), sqlite, pg1, pg3 and river (timers)\n", k)
			os.Exit(2)
		}
	}
	if *clusterWindow < 2*time.Second || *clusterWindow%time.Second != 0 {
		fmt.Fprintf(os.Stderr, "-cluster-window: %s is not a whole number of seconds, at least 2\n", *clusterWindow)
		os.Exit(2)
	}
	rows := strings.Split(*clusterRows, ",")
	for i, r := range rows {
		if rows[i] = strings.TrimSpace(r); !slices.Contains([]string{"one", "three", "start", "join", "leave"}, rows[i]) {
			fmt.Fprintf(os.Stderr, "-cluster-rows: %q is none of one, three, start, join and leave\n", r)
			os.Exit(2)
		}
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			panic(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if *memprofile != "" {
		runtime.MemProfileRate = 4096
		defer func() {
			f, err := os.Create(*memprofile)
			if err != nil {
				panic(err)
			}
			defer f.Close()
			runtime.GC() // the profile is as of the last collection: this one counts all
			if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
				panic(err)
			}
		}()
	}
	if *failoverChildSpec != "" {
		if err := failoverChild(*failoverChildSpec, *failoverN); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if *costChildLib != "" {
		if err := costChild(*costChildLib, *costN, *costSpread, *costDir, *costWarmup, *costWindow, *tick, windowProfile); err != nil {
			pprof.StopCPUProfile()
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}

	window := 2 * time.Second
	ladder := []int{100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000}
	if *full {
		window = 5 * time.Second
		ladder = append(ladder, 100000)
	}
	if *windowFlag > 0 {
		window = *windowFlag
	}
	if *ladderFlag != "" {
		ladder = nil
		for _, f := range strings.Split(*ladderFlag, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				panic(err)
			}
			ladder = append(ladder, n)
		}
	}
	log := func(s string) { fmt.Fprintln(os.Stderr, s) }
	var out strings.Builder
	fmt.Fprintf(&out, "Machine: %s/%s, %d CPUs (GOMAXPROCS %d), %s.\n\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version())

	if strings.Contains(*only, "oneshot") {
		log("one-shot timers: " + strconv.Itoa(*pending) + " pending, delays 1–5 s, half canceled")
		// The libraries take turns, trials times each, each try in a
		// process of its own: a process keeps the runtime's timer heaps at
		// their peak size, so a second try in the same process would find
		// them grown and the runtime's figures would depend on the order.
		// Each library's figures are its median over the tries; each ratio
		// is taken within a try (one library right after the other) and
		// the worst try's is the one held against the target.
		runs := make([][]oneShotResult, len(oneShotLibs))
		for try := 1; try <= *trials; try++ {
			for k := range oneShotLibs {
				steal0 := stealTime()
				r, err := oneShotProcess(k, *pending, *wheelSize)
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				log(fmt.Sprintf("  %-50s try %d: %s adds/s, %.0f B, p50 %s, p99 %s, max %s, exact %v %s, steal=%s", r.name, try, human(r.addsPerSec), r.bytesPerPen, ms(r.p50), ms(r.p99), ms(r.maxLate), r.exact, r.detail, ms(stealTime()-steal0)))
				runs[k] = append(runs[k], r)
			}
		}
		fmt.Fprintf(&out, "### One-shot timers: %d pending, delays 1–5 s, half canceled (median of %d tries; ratios within each try)\n\n", *pending, *trials)
		out.WriteString("| | adds+cancels per s | heap per pending timer | lateness p50 | p99 | max | exactly once, never early |\n|---|---|---|---|---|---|---|\n")
		for _, rs := range runs {
			r := medianOneShot(rs)
			fmt.Fprintf(&out, "| %s | %s | %.0f B | %s | %s | %s | %v %s |\n", r.name, human(r.addsPerSec), r.bytesPerPen, ms(r.p50), ms(r.p99), ms(r.maxLate), r.exact, r.detail)
		}
		ratio := func(label string, k int, addsTarget, bytesTarget string, p99 string) {
			adds, bytes, wa, wb := oneShotRatios(runs[k], runs[0])
			fmt.Fprintf(&out, "| **%s** | **%.2f×** worst (%s; target %s) | **%.2f×** worst (%s; target %s) | | %s | | |\n",
				label, wa, times(adds), addsTarget, wb, times(bytes), bytesTarget, p99)
		}
		ratio("fom wheel / runtime", 1, "≥ 2×", "≤ 0.5×", fmt.Sprintf("p99 %s (target ≤ 2 ms)", ms(medianOneShot(runs[1]).p99)))
		ratio("App SubmitAfter(Task) / runtime", 2, "≥ 1×", "≤ 1×", fmt.Sprintf("p99 %s", ms(medianOneShot(runs[2]).p99)))
		ratio("App SubmitAfter(TaskFunc) / runtime", 3, "≥ 1×", "≤ 1×", fmt.Sprintf("p99 %s", ms(medianOneShot(runs[3]).p99)))
		out.WriteString("\n")
		runtime.GC()
	}

	if strings.Contains(*only, "periodic") {
		const limit = 10 * time.Millisecond
		libs := []periodicLib{fomSchedules(*tick), runtimeTicker(), robfigCron(), goCron()}
		if *libsFlag != "" {
			keep := map[string]bool{}
			for _, k := range strings.Split(*libsFlag, ",") {
				keep[strings.TrimSpace(k)] = true
			}
			var sel []periodicLib
			for i, k := range []string{"fom", "runtime", "robfig", "gocron"} {
				if keep[k] {
					sel = append(sel, libs[i])
				}
			}
			libs = sel
		}
		for i := range libs {
			libs[i].profile = windowProfile
		}
		type row struct {
			name            string
			aligned, spread periodicRun
			canSpread       bool
			spreadAll       []periodicRun
		}
		var rows []row
		for _, lib := range libs {
			log("periodic jobs every second: " + lib.name)
			a, _ := largestN(lib, false, ladder, limit, window, *trials, log)
			var s periodicRun
			var sAll []periodicRun
			if lib.canSpread {
				s, sAll = largestN(lib, true, ladder, limit, window, *trials, log)
			}
			rows = append(rows, row{lib.name, a, s, lib.canSpread, sAll})
			runtime.GC()
		}
		fmt.Fprintf(&out, "### N jobs every second: largest N with p99 fire lateness under %s (ladder %v, %s per try, best of %d tries)\n\n", ms(limit), ladder, window, *trials)
		out.WriteString("| | aligned: largest N | CPU per run there | spread over the second: largest N | CPU per run there |\n|---|---|---|---|---|\n")
		for _, r := range rows {
			spread := "cannot spread"
			cpuS := ""
			if r.canSpread {
				spread, cpuS = strconv.Itoa(r.spread.n), us(r.spread.cpuPerRun)
			}
			fmt.Fprintf(&out, "| %s | %d | %s | %s | %s |\n", r.name, r.aligned.n, us(r.aligned.cpuPerRun), spread, cpuS)
		}
		if len(rows) < 4 {
			fmt.Print(out.String())
			return
		}
		f, rt, rb, gc := rows[0], rows[1], rows[2], rows[3]
		fmt.Fprintf(&out, "| **fom / robfig** (aligned) | **%s** (target ≥ 5×) | | | |\n", ratio(f.aligned.n, rb.aligned.n))
		fmt.Fprintf(&out, "| **fom / gocron** (aligned; spread) | **%s** (target ≥ 20×) | | **%s** | |\n", ratio(f.aligned.n, gc.aligned.n), ratio(f.spread.n, gc.spread.n))
		// CPU per run falls with N (waking an idle process is paid per
		// fire when fires are far apart), so compare at the same N: the
		// largest both passed.
		common := min(f.spread.n, rt.spread.n)
		fc, rc := cpuAt(f.spreadAll, common, limit), cpuAt(rt.spreadAll, common, limit)
		fmt.Fprintf(&out, "| **fom CPU per round / runtime timer CPU per run** (spread, both at N=%d: %s vs %s) | | | | **%.1f×** (target ≤ 2×) |\n\n", common, us(fc), us(rc), float64(fc)/float64(max(rc, 1)))
		mem := idleMemory(10000)
		fmt.Fprintf(&out, "Memory per idle, started fom schedule (heap + goroutine stacks, 10 000 schedules): %.1f KiB.\n\n", mem/1024)
		runtime.GC()
	}

	if strings.Contains(*only, "cost") {
		ns := []int{1000, 10000}
		if *ladderFlag != "" {
			ns = ladder
		}
		w := *costWindow
		if *full {
			w = 20 * time.Second
		}
		log("CPU per fire at fixed N")
		keep := map[string]bool{}
		for _, k := range strings.Split(*libsFlag, ",") {
			if k = strings.TrimSpace(k); k != "" {
				keep[k] = true
			}
		}
		var modes []bool
		for _, m := range strings.Split(*jobsFlag, ",") {
			switch strings.TrimSpace(m) {
			case "aligned":
				modes = append(modes, false)
			case "spread":
				modes = append(modes, true)
			default:
				fmt.Fprintf(os.Stderr, "-jobs: %q is neither aligned nor spread\n", m)
				os.Exit(2)
			}
		}
		out.WriteString(costScenario(ns, modes, *passes, *costWarmup, w, *tick, keep, *cpuprofile, log))
		runtime.GC()
	}

	if strings.Contains(*only, "cluster") {
		dsn := databaseURL()
		ns := []int{1000, 10000}
		if *ladderFlag != "" {
			ns = ladder
		}
		log("cluster")
		out.WriteString(clusterScenario(dsn, ns, rows, *clusterWindow, *clusterWarmup, *passes, log))
		runtime.GC()
	}

	if strings.Contains(*only, "failover") {
		var ttls []time.Duration
		for _, f := range strings.Split(*failoverTTLs, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(f))
			if err != nil || d < time.Second {
				fmt.Fprintf(os.Stderr, "-failover-ttls: %q is not a duration of at least 1s\n", f)
				os.Exit(2)
			}
			ttls = append(ttls, d)
		}
		log("failover")
		out.WriteString(failoverScenario(databaseURL(), *failoverN, ttls, log))
		runtime.GC()
	}

	if strings.Contains(*only, "timers") {
		dsn := databaseURL()
		ns := []int{10000, 100000}
		if *ladderFlag != "" {
			ns = ladder
		}
		log("durable timers")
		out.WriteString(timersScenario(dsn, ns, *passes, *libsFlag, *timersBurst, log))
		runtime.GC()
	}

	if strings.Contains(*only, "fomd") {
		log("fomd")
		out.WriteString(fomdScenario(databaseURL(), *fomdN, *fomdSpread, log))
		runtime.GC()
	}

	if strings.Contains(*only, "flush") {
		log("statistics flush")
		out.WriteString(flushScenario([]int{100, 1000, 10000, 20000}, *liveFlush, log))
		runtime.GC()
	}

	if strings.Contains(*only, "memory") {
		const n, rounds = 1000, 1000
		log("memory per schedule of a default App")
		before, after, week, err := appMemory(n, rounds)
		if err != nil {
			fmt.Fprintf(&out, "memory scenario failed: %v\n\n", err)
		} else {
			fmt.Fprintf(&out, "### Memory per schedule of a default App (%d schedules, heap + stacks)\n\n| | per schedule | target |\n|---|---|---|\n", n)
			fmt.Fprintf(&out, "| sleeping, before its first round | %.0f B | ≤ 4 000 B |\n| after %d rounds | %.0f B | ≤ 8 000 B |\n", before, rounds, after)
			fmt.Fprintf(&out, "| after a week (%d rounds, then a few on each of six more days) | %.0f B | ≤ 8 000 B |\n\n", rounds, week)
		}
		runtime.GC()
	}

	if strings.Contains(*only, "throughput") {
		d := time.Second
		if *full {
			d = 3 * time.Second
		}
		log("ad-hoc throughput")
		rs := []throughputResult{throughputFom(d), throughputGoroutines(d), throughputAnts(d)}
		fmt.Fprintf(&out, "### Trivial ad-hoc tasks, batches of %d\n\n| | tasks per s | allocations per task |\n|---|---|---|\n", batchSize)
		for _, r := range rs {
			fmt.Fprintf(&out, "| %s | %s | %.1f |\n", r.name, human(r.tasksPerSec), r.allocsPerTask)
		}
		fmt.Fprintf(&out, "| **fom / goroutines** | **%.2f×** | |\n| **fom / ants** | **%.2f×** | |\n\n", rs[0].tasksPerSec/rs[1].tasksPerSec, rs[0].tasksPerSec/rs[2].tasksPerSec)
	}
	fmt.Print(out.String())
}

// cpuAt is the CPU per run of the passing try at N=n.
func cpuAt(runs []periodicRun, n int, limit time.Duration) time.Duration {
	for _, r := range runs {
		if r.n == n && r.p99 < limit {
			return r.cpuPerRun
		}
	}
	return 0
}

func ratio(a, b int) string {
	if b == 0 {
		return fmt.Sprintf("%d vs 0 (peer failed the smallest N)", a)
	}
	return fmt.Sprintf("%.1f×", float64(a)/float64(b))
}

func human(v float64) string {
	switch {
	case v >= 1e6:
		return trimFloat(v/1e6, 2) + "M"
	case v >= 1e3:
		return trimFloat(v/1e3, 1) + "k"
	}
	return trimFloat(v, 0)
}

func trimFloat(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }

func itoa(n int) string { return strconv.Itoa(n) }

// times lists ratios as "1.23×, 2.34×".
func times(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.2f×", x)
	}
	return strings.Join(s, ", ")
}

// databaseURL is the PostgreSQL of the cluster and timers scenarios:
// FOM_TEST_DATABASE_URL, as the tests read it, else the local server.
func databaseURL() string {
	if dsn := os.Getenv("FOM_TEST_DATABASE_URL"); dsn != "" {
		return dsn
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}
