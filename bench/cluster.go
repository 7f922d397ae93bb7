package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/store/postgres"
)

// everySecond is a job firing at every whole second that records its
// lateness (the task's start minus the planned fire).
type everySecond struct {
	fom.Schedule `cron:"* * * * * *"`
	l            *lateness
	job          int
}

func (*everySecond) Run(context.Context) (any, error) { return nil, nil }

func (j *everySecond) OnComplete(_ context.Context, r fom.Round) {
	if len(r.Results) == 1 {
		j.l.addJob(r.Results[0].Started, r.Results[0].Started.Sub(r.Planned), j.job)
	}
}

// clusterRun is one configuration at one N.
type clusterRun struct {
	label         string
	n             int
	fires         int
	p50, p99      time.Duration
	tickStmtsPerS float64         // leases and heartbeats, all instances
	fireStmtsPerS float64         // fire-record statements, all instances
	bySecond      []time.Duration // p99 of each planned second of the window
	moved         int             // schedules run by more than one instance in the window
	movedP99      time.Duration   // p99 of their fires
	stayedP99     time.Duration   // p99 of the other schedules' fires
	cpu, pgCPU    time.Duration
	err           string
}

// measureApps starts apps built by mk (one, or three on PostgreSQL), each
// registering n every-second jobs, and measures lateness over window.
// With join > 0 the last instance starts that far into the window: the
// others hand it its share of the leases while their schedules fire. With
// leave > 0 the last instance stops (gracefully) that far into it: the
// others take its share.
//
// check, when not nil, compares the fires run in the window with the
// store's records of it, and says what is wrong ("" when nothing), and
// which jobs moved between instances in the window.
func measureApps(label string, n, instances int, window, warmup, join, leave time.Duration, mk func(i int) (*fom.App, func(), error), check func(from, to time.Time, ran int) (string, map[int]bool)) clusterRun {
	r := clusterRun{label: label, n: n}
	l := newLateness(n*instances, window)
	apps := make([]*fom.App, instances)
	closers := make([]func(), instances)
	var wg sync.WaitGroup
	errs := make([]error, instances)
	for i := range instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			app, closer, err := mk(i)
			if err != nil {
				errs[i] = err
				return
			}
			apps[i], closers[i] = app, closer
			for j := 0; j < n && err == nil; j++ {
				_, err = app.Register(&everySecond{l: l, job: j}, fom.Named(fmt.Sprintf("job-%d", j)))
			}
			if err == nil && (join == 0 || i < instances-1) {
				err = app.Start(context.Background())
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	defer func() {
		for i, app := range apps {
			if app != nil {
				app.Stop(context.Background())
				closers[i]()
			}
		}
	}()
	for _, err := range errs {
		if err != nil {
			r.err = err.Error()
			return r
		}
	}
	// The warm-up (the leases spread at the instances' first renewals, 5 s
	// in: a warm-up under that has them move inside the window), then the
	// window.
	from := time.Now().Truncate(time.Second).Add(warmup + time.Second)
	l.window(from, window)
	// The counters are read half a second before the window's first
	// whole second and half a second before the end of its last, in the
	// calm part: read at the whole second (every postgres process's
	// /proc entry), they took CPU from the burst they measured. The CPU
	// counted covers the window's bursts all the same.
	const calm = 500 * time.Millisecond
	time.Sleep(time.Until(from.Add(-calm)))
	c0, cpu0, pg0 := counters(apps), cpuTime(), postgresCPU()
	joined := make(chan error, 1)
	switch {
	case join > 0:
		go func() {
			time.Sleep(time.Until(from.Add(join)))
			joined <- apps[instances-1].Start(context.Background())
		}()
	case leave > 0:
		go func() {
			time.Sleep(time.Until(from.Add(leave)))
			joined <- apps[instances-1].Stop(context.Background())
		}()
	default:
		joined <- nil
	}
	// FOM_BENCH_WINDOW_PROFILE profiles the window alone, to
	// <prefix>-cluster-<instances>-<n>.
	profile := fmt.Sprintf("cluster-%d-%d", instances, n)
	switch {
	case join > 0:
		profile += "-join"
	case leave > 0:
		profile += "-leave"
	}
	stopProfile := profileWindow(profile)
	time.Sleep(time.Until(from.Add(window - calm)))
	c1, cpu1, pg1 := counters(apps), cpuTime(), postgresCPU()
	stopProfile()
	time.Sleep(300 * time.Millisecond)
	if err := <-joined; err != nil {
		r.err = "the joining or leaving instance: " + err.Error()
		return r
	}
	samples, ok := l.samples()
	if !ok {
		r.err = "more fires than n a second per instance"
		return r
	}
	r.fires = len(samples)
	if check != nil {
		msg, moved := check(from, from.Add(window), r.fires)
		if msg != "" {
			r.err = msg
			return r
		}
		r.moved = len(moved)
		r.movedP99, r.stayedP99 = l.split(moved)
	}
	r.p50, r.p99 = percentile(samples, 0.5), percentile(samples, 0.99)
	r.bySecond = l.bySecond()
	secs := window.Seconds()
	r.tickStmtsPerS = float64(c1[0]-c0[0]) / secs
	r.fireStmtsPerS = float64(c1[1]-c0[1]) / secs
	if r.fires > 0 {
		r.cpu = (cpu1 - cpu0) / time.Duration(r.fires)
		if instances > 1 {
			r.pgCPU = (pg1 - pg0) / time.Duration(r.fires)
		}
	}
	return r
}

// counters sums the instances' lease and heartbeat statements, and their
// fire-record statements.
func counters(apps []*fom.App) [2]int64 {
	var out [2]int64
	for _, a := range apps {
		if c, ok := a.ClusterCounters(); ok {
			out[0] += c.TickStatements
			out[1] += c.FireStatements
		}
	}
	return out
}

// clusterScenario compares one App on SQLite with three on PostgreSQL.
// rows names those measured (one, three, start, join, leave).
func clusterScenario(dsn string, ns []int, rows []string, window, warmup time.Duration, passes int, log func(string)) string {
	var out strings.Builder
	out.WriteString("### Cluster: N jobs every second, one App on SQLite against three on PostgreSQL\n\n")
	admin, err := pgxpool.New(context.Background(), dsn)
	if err == nil {
		err = admin.Ping(context.Background())
	}
	if err != nil {
		fmt.Fprintf(&out, "no PostgreSQL at %s: %v\n\n", dsn, err)
		return out.String()
	}
	defer admin.Close()
	out.WriteString("| setup | N | fires / planned | lateness p50 | p99 | CPU µs per fire (process) | PostgreSQL CPU µs per fire | fire-record statements/s | lease and heartbeat statements/s |\n|---|---|---|---|---|---|---|---|---|\n")
	for pass := 0; pass < passes; pass++ {
		for _, n := range ns {
			var runs []clusterRun
			if slices.Contains(rows, "one") {
				runs = append(runs, measureApps("one App, SQLite", n, 1, window, warmup, 0, 0, func(int) (*fom.App, func(), error) {
					dir, err := os.MkdirTemp("", "fom-bench-cluster")
					if err != nil {
						return nil, nil, err
					}
					app, err := fom.New(fom.WithDataDir(dir))
					return app, func() { os.RemoveAll(dir) }, err
				}, nil))
			}
			onPostgres := func(label string, warmup, join, leave time.Duration) clusterRun {
				b := make([]byte, 4)
				rand.Read(b)
				schema := "fombench_" + hex.EncodeToString(b)
				defer admin.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
				return measureApps(label, n, 3, window, warmup, join, leave, func(i int) (*fom.App, func(), error) {
					st, err := postgres.Open(context.Background(), dsn, postgres.WithSchema(schema))
					if err != nil {
						return nil, nil, err
					}
					id := fmt.Sprintf("bench-%d", i+1)
					// The instances' warnings go to stderr: a fire not run
					// says why there.
					// Three instances in one process share its collector:
					// one paces it (WithGCPacing), as three processes
					// would each pace their own.
					app, err := fom.New(fom.WithStore(st), fom.WithInstanceID(id), fom.WithLogger(warnings(id)), fom.WithGCPacing(i == 0))
					return app, func() { st.Close() }, err
				}, func(from, to time.Time, ran int) (string, map[int]bool) {
					// Every fire run was recorded once, before it ran.
					var recorded, distinct int
					err := admin.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT (schedule, planned)) FROM "+schema+".fire_records WHERE planned >= $1 AND planned < $2", from, to).Scan(&recorded, &distinct)
					switch {
					case err != nil:
						return "reading the fire records: " + err.Error(), nil
					case recorded != distinct:
						return fmt.Sprintf("%d fires recorded twice", recorded-distinct), nil
					case recorded != ran:
						return fmt.Sprintf("%d fires recorded, %d ran", recorded, ran), nil
					case ran < n*int(to.Sub(from)/time.Second):
						log("  fires short of the plan; recorded by second and instance: " + recordsBySecond(admin, schema, from, to))
					}
					moved, err := movedJobs(admin, schema, from, to)
					if err != nil {
						return "reading the fire records: " + err.Error(), nil
					}
					return "", moved
				})
			}
			if slices.Contains(rows, "three") {
				runs = append(runs, onPostgres("three Apps, PostgreSQL", warmup, 0, 0))
			}
			if slices.Contains(rows, "start") {
				// The window a second after the three start together: their
				// first seconds, heaps growing and first flushes (their
				// leases spread as they say they run, before the window).
				runs = append(runs, onPostgres("three Apps, PostgreSQL, started together", 0, 0, 0))
			}
			if slices.Contains(rows, "join") {
				runs = append(runs, onPostgres("three Apps, PostgreSQL, the third started mid-window", warmup, window/2+300*time.Millisecond, 0))
			}
			if slices.Contains(rows, "leave") {
				runs = append(runs, onPostgres("three Apps, PostgreSQL, the third stopped mid-window", warmup, 0, window/2+300*time.Millisecond))
			}
			for _, r := range runs {
				planned := r.n * int(window/time.Second)
				pg := "—"
				if r.pgCPU > 0 {
					pg = fmt.Sprintf("%.1f", float64(r.pgCPU.Nanoseconds())/1000)
				}
				bySecond := make([]string, len(r.bySecond))
				for i, d := range r.bySecond {
					bySecond[i] = ms(d)
				}
				log(fmt.Sprintf("  %-24s N=%-6d fires=%d/%d p50=%-9s p99=%-9s cpu/fire=%.1fus pg/fire=%s fire stmts/s=%.1f lease stmts/s=%.1f p99 by second: %s; %d schedules moved, p99 %s, the others %s %s", r.label, r.n, r.fires, planned, ms(r.p50), ms(r.p99), float64(r.cpu.Nanoseconds())/1000, pg, r.fireStmtsPerS, r.tickStmtsPerS, strings.Join(bySecond, ", "), r.moved, ms(r.movedP99), ms(r.stayedP99), r.err))
				if r.err != "" {
					fmt.Fprintf(&out, "| %s | %d | failed: %s | | | | | | |\n", r.label, r.n, r.err)
					continue
				}
				fmt.Fprintf(&out, "| %s | %d | %d / %d | %s | %s | %.1f | %s | %.1f | %.1f |\n", r.label, r.n, r.fires, planned, ms(r.p50), ms(r.p99), float64(r.cpu.Nanoseconds())/1000, pg, r.fireStmtsPerS, r.tickStmtsPerS)
			}
		}
	}
	out.WriteString("\nLease and heartbeat statements do not grow with N (five per instance per renewal interval, more while leases move). Fires announced ahead are recorded a slot (100 ms) at a time, by one statement per instance; PostgreSQL's CPU is every postgres process's on this machine over the window.\n\n")
	return out.String()
}

// warnings is a logger of an instance's warnings and errors, to stderr.
func warnings(instance string) *zap.Logger {
	enc := zap.NewDevelopmentEncoderConfig()
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(os.Stderr), zapcore.WarnLevel)
	return zap.New(core).With(zap.String("instance", instance))
}

// movedJobs is the set of jobs (job-<i>) whose fires in [from, to) were
// recorded by more than one instance.
func movedJobs(admin *pgxpool.Pool, schema string, from, to time.Time) (map[int]bool, error) {
	rows, err := admin.Query(context.Background(), "SELECT substr(schedule, 5)::int FROM "+schema+".fire_records WHERE planned >= $1 AND planned < $2 AND schedule LIKE 'job-%' GROUP BY schedule HAVING count(DISTINCT owner) > 1", from, to)
	if err != nil {
		return nil, err
	}
	jobs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, err
	}
	moved := make(map[int]bool, len(jobs))
	for _, j := range jobs {
		moved[j] = true
	}
	return moved, nil
}

// recordsBySecond lists the fires recorded in [from, to) by planned
// second and owner.
func recordsBySecond(admin *pgxpool.Pool, schema string, from, to time.Time) string {
	rows, err := admin.Query(context.Background(), "SELECT to_char(date_trunc('second', planned), 'HH24:MI:SS') || ' ' || owner || ' ' || count(*) FROM "+schema+".fire_records WHERE planned >= $1 AND planned < $2 GROUP BY date_trunc('second', planned), owner ORDER BY 1", from, to)
	if err != nil {
		return err.Error()
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err.Error()
	}
	return strings.Join(out, "; ")
}
