package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/store/postgres"
	"github.com/fom-go/fom/timer"
)

// The durable timers scenario: N one-shot timers, each due 1-5 s after
// it is created (inserted in bulk, 1 000 a statement), delivered to a
// handler that only notes when it ran. fom as users run it (a default App
// with its SQLite store; one App and three Apps on PostgreSQL) against
// River (jobs with ScheduledAt, on the same database, tuned for precision:
// 10 ms fetch poll, 1 000 workers). Reported: inserts a second (bulk, and
// one at a time), deliveries a second, lateness (delivery less due time)
// and process CPU per fire; every fire is checked delivered once.

// timerRun is one contender's measurement.
type timerRun struct {
	name            string
	n               int
	bulk, single    float64 // inserts a second
	delivered, dups int
	rate            float64 // deliveries a second, first to last
	p50, p99, max   time.Duration
	cpu             time.Duration // process CPU per fire, insert to last delivery
	err             string
}

// recorder notes deliveries by key.
type recorder struct {
	mu    sync.Mutex
	late  []time.Duration
	seen  map[string]bool
	dups  int
	first time.Time
	last  time.Time
	from  time.Time // a burst's instant: deliveries a second count from it
	done  chan struct{}
	want  int
	count atomic.Int64
}

func newRecorder(n int) *recorder {
	return &recorder{seen: make(map[string]bool, n), late: make([]time.Duration, 0, n), done: make(chan struct{}), want: n}
}

func (r *recorder) note(key string, due time.Time) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[key] {
		r.dups++
		return
	}
	r.seen[key] = true
	r.late = append(r.late, now.Sub(due))

	if r.first.IsZero() {
		r.first = now
	}
	r.last = now
	if len(r.late) == r.want {
		close(r.done)
	}
}

func (r *recorder) wait(d time.Duration) {
	select {
	case <-r.done:
	case <-time.After(d):
	}
}

func (r *recorder) result(run *timerRun) {
	r.mu.Lock()
	defer r.mu.Unlock()
	run.delivered, run.dups = len(r.late), r.dups
	run.p50, run.p99, run.max = percentile(r.late, 0.5), percentile(r.late, 0.99), percentile(r.late, 1)
	first := r.first
	if !r.from.IsZero() {
		first = r.from
	}
	if d := r.last.Sub(first); d > 0 {
		run.rate = float64(len(r.late)) / d.Seconds()
	}
}

func randomSchema(prefix string) string {
	b := make([]byte, 5)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// placement is when a scenario's timers fall due: spread over 1-5 s
// after each one's insert, or all at one instant (burst, set when the
// inserts begin: 2 s plus 40 µs a timer later), which measures how fast
// each contender drains a backlog.
type placement struct {
	burst bool
	at    time.Time // the burst's instant
}

// start fixes a burst's instant for n timers inserted from now.
func (p placement) start(n int) placement {
	if p.burst {
		p.at = time.Now().Add(2*time.Second + time.Duration(n)*40*time.Microsecond)
	}
	return p
}

// due is timer i's due time of n, inserted at now.
func (p placement) due(now time.Time, i, n int) time.Time {
	if p.burst {
		return p.at
	}
	return now.Add(time.Second + time.Duration(int64(4*time.Second)*int64(i)/int64(max(n, 1))))
}

// fomTimers runs N timers on apps (the first creates them); apps are
// started and stopped here.
func fomTimers(name string, apps []*fom.App, n int, pl placement) timerRun {
	run := timerRun{name: name, n: n}
	ctx := context.Background()
	rec := newRecorder(n)
	for _, a := range apps {
		t := a.Timers()
		if err := t.Handle("bench", func(_ context.Context, f timer.Fire) error {
			rec.note(f.Key, f.Planned)
			return nil
		}); err != nil {
			run.err = err.Error()
			return run
		}
		if err := a.Start(ctx); err != nil {
			run.err = err.Error()
			return run
		}
	}
	defer func() {
		for _, a := range apps {
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			a.Stop(sctx)
			cancel()
		}
	}()
	svc := apps[0].Timers()
	// One at a time: 500 timers due in an hour (deleted after).
	start := time.Now()
	var singles []string
	for i := range 500 {
		id, err := svc.Create(ctx, timer.Spec{Namespace: "single", Name: "s" + strconv.Itoa(i), Kind: "bench", At: start.Add(time.Hour)})
		if err != nil {
			run.err = err.Error()
			return run
		}
		singles = append(singles, id)
	}
	run.single = 500 / time.Since(start).Seconds()
	for _, id := range singles {
		svc.Delete(ctx, id)
	}
	stopProfile := profileWindow(fmt.Sprintf("timers-%d-%d", len(apps), n))
	cpu0 := cpuTime()
	pl = pl.start(n)
	rec.from = pl.at
	var insert time.Duration
	for i := 0; i < n; i += 1000 {
		specs := make([]timer.Spec, 0, 1000)
		now := time.Now()
		for j := i; j < min(i+1000, n); j++ {
			specs = append(specs, timer.Spec{Namespace: "bench", Name: "t" + strconv.Itoa(j), Kind: "bench", At: pl.due(now, j, n)})
		}
		t0 := time.Now()
		if _, err := svc.CreateMany(ctx, specs); err != nil {
			run.err = err.Error()
			return run
		}
		insert += time.Since(t0)
	}
	run.bulk = float64(n) / insert.Seconds()
	rec.wait(time.Duration(max(60, n/500)) * time.Second)
	stopProfile()
	if c := cpuTime() - cpu0; n > 0 {
		run.cpu = c / time.Duration(n)
	}
	rec.result(&run)
	return run
}

func fomSQLite(n int, pl placement) timerRun {
	dir, err := os.MkdirTemp("", "fom-bench-timers-")
	if err != nil {
		return timerRun{name: "fom, SQLite", err: err.Error()}
	}
	defer os.RemoveAll(dir)
	app, err := fom.New(fom.WithDataDir(dir))
	if err != nil {
		return timerRun{name: "fom, SQLite", err: err.Error()}
	}
	return fomTimers("fom, SQLite (one App)", []*fom.App{app}, n, pl)
}

func fomPostgres(dsn string, instances, n int, pl placement) timerRun {
	name := fmt.Sprintf("fom, PostgreSQL (%d App", instances)
	if instances > 1 {
		name += "s"
	}
	name += ")"
	schema := randomSchema("fombench_")
	defer dropSchema(dsn, schema)
	var apps []*fom.App
	for i := range instances {
		st, err := postgres.Open(context.Background(), dsn, postgres.WithSchema(schema))
		if err != nil {
			return timerRun{name: name, err: err.Error()}
		}
		defer st.Close()
		app, err := fom.New(fom.WithStore(st), fom.WithInstanceID("bench-"+strconv.Itoa(i)))
		if err != nil {
			return timerRun{name: name, err: err.Error()}
		}
		apps = append(apps, app)
	}
	return fomTimers(name, apps, n, pl)
}

func dropSchema(dsn, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, dsn); err == nil {
		conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		conn.Close(ctx)
	}
}

// benchArgs is River's job.
type benchArgs struct {
	Key string    `json:"key"`
	Due time.Time `json:"due"`
}

func (benchArgs) Kind() string { return "bench" }

type benchWorker struct {
	river.WorkerDefaults[benchArgs]
	rec *recorder
}

func (w *benchWorker) Work(_ context.Context, j *river.Job[benchArgs]) error {
	w.rec.note(j.Args.Key, j.Args.Due)
	return nil
}

func riverTimers(dsn string, n int, pl placement) timerRun {
	run := timerRun{name: "River v0.51.1 (10 ms fetch poll, 1 000 workers)", n: n}
	ctx := context.Background()
	schema := randomSchema("riverbench_")
	defer dropSchema(dsn, schema)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		run.err = err.Error()
		return run
	}
	conn.Exec(ctx, "CREATE SCHEMA "+schema)
	conn.Close(ctx)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		run.err = err.Error()
		return run
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		run.err = err.Error()
		return run
	}
	defer pool.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: quiet})
	if err == nil {
		_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if err != nil {
		run.err = "migrate: " + err.Error()
		return run
	}
	rec := newRecorder(n)
	workers := river.NewWorkers()
	river.AddWorker(workers, &benchWorker{rec: rec})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 1000}},
		Workers:           workers,
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 10 * time.Millisecond,
		Logger:            quiet,
	})
	if err != nil {
		run.err = err.Error()
		return run
	}
	if err := client.Start(ctx); err != nil {
		run.err = err.Error()
		return run
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		client.Stop(sctx)
		cancel()
	}()
	start := time.Now()
	for i := range 500 {
		if _, err := client.Insert(ctx, benchArgs{Key: "single-" + strconv.Itoa(i), Due: start.Add(time.Hour)}, &river.InsertOpts{ScheduledAt: start.Add(time.Hour)}); err != nil {
			run.err = err.Error()
			return run
		}
	}
	run.single = 500 / time.Since(start).Seconds()
	pool.Exec(ctx, "DELETE FROM river_job")
	stopProfile := profileWindow(fmt.Sprintf("timers-river-%d", n))
	cpu0 := cpuTime()
	pl = pl.start(n)
	rec.from = pl.at
	var insert time.Duration
	for i := 0; i < n; i += 1000 {
		params := make([]river.InsertManyParams, 0, 1000)
		now := time.Now()
		for j := i; j < min(i+1000, n); j++ {
			due := pl.due(now, j, n)
			params = append(params, river.InsertManyParams{Args: benchArgs{Key: strconv.Itoa(j), Due: due}, InsertOpts: &river.InsertOpts{ScheduledAt: due}})
		}
		t0 := time.Now()
		if _, err := client.InsertManyFast(ctx, params); err != nil {
			run.err = err.Error()
			return run
		}
		insert += time.Since(t0)
	}
	run.bulk = float64(n) / insert.Seconds()
	rec.wait(time.Duration(max(60, n/500)) * time.Second)
	stopProfile()
	run.cpu = (cpuTime() - cpu0) / time.Duration(max(n, 1))
	rec.result(&run)
	return run
}

// timersScenario runs every contender at each N, passes times
// interleaved, and prints the table.
func timersScenario(dsn string, ns []int, passes int, libs string, burst bool, log func(string)) string {
	var b strings.Builder
	pl := placement{burst: burst}
	if burst {
		b.WriteString("\n### Durable timers: N one-shot timers all due at one instant (a backlog drained)\n\n")
	} else {
		b.WriteString("\n### Durable timers: N one-shot timers due 1-5 s after insert\n\n")
	}
	b.WriteString("| contender | N | inserts/s (bulk) | inserts/s (single) | delivered | twice | delivered/s | p50 late | p99 late | max late | CPU/fire |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, n := range ns {
		for p := range passes {
			for _, c := range []struct {
				lib string
				run func() timerRun
			}{
				{"sqlite", func() timerRun { return fomSQLite(n, pl) }},
				{"pg1", func() timerRun { return fomPostgres(dsn, 1, n, pl) }},
				{"pg3", func() timerRun { return fomPostgres(dsn, 3, n, pl) }},
				{"river", func() timerRun { return riverTimers(dsn, n, pl) }},
			} {
				if libs != "" && !slices.Contains(strings.Split(libs, ","), c.lib) {
					continue
				}
				r := c.run()
				log(fmt.Sprintf("timers N=%d pass %d: %s", n, p+1, r.name))
				if r.err != "" {
					fmt.Fprintf(&b, "| %s | %d | error: %s |||||||||\n", r.name, n, r.err)
					continue
				}
				fmt.Fprintf(&b, "| %s | %d | %s | %s | %d | %d | %s | %s | %s | %s | %s |\n", r.name, n, human(r.bulk), human(r.single), r.delivered, r.dups,
					human(r.rate), ms(r.p50), ms(r.p99), ms(r.max), us(r.cpu))
			}
		}
	}
	return b.String()
}
