package fom

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fom-go/fom/config"
	"github.com/fom-go/fom/statistics"
	"github.com/fom-go/fom/store"
)

type knobJob struct {
	Schedule  `name:"knob" fixedRate:"1h" threadMax:"2" remark:"has knobs"`
	BatchSize Value[int]           `fom:"batchSize" default:"500"`
	Pause     Value[time.Duration] `fom:"pause" default:"1s"`
	Mode      Value[string]        `fom:"mode" default:"fast"`
}

func (j *knobJob) Run(context.Context) (any, error) { return j.BatchSize.Get(), nil }

func TestConfigEditsPersistAcrossRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()

	app1, err := New(WithDataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	job1 := &knobJob{}
	sc, err := app1.Register(job1)
	if err != nil {
		t.Fatal(err)
	}
	if job1.BatchSize.Get() != 500 || job1.Pause.Get() != time.Second {
		t.Fatalf("defaults not bound: %d %v", job1.BatchSize.Get(), job1.Pause.Get())
	}
	if err := app1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sc.Config().Apply(map[string]string{"batchSize": "42", "threadMax": "6", "fixedRate": "", "cron": "0 */5 * * * *"}); err != nil {
		t.Fatal(err)
	}
	if job1.BatchSize.Get() != 42 || sc.Info().Plan != "cron 0 */5 * * * *" {
		t.Fatalf("edit not live: %d %s", job1.BatchSize.Get(), sc.Info().Plan)
	}
	if err := sc.SetLogLevel(zapcore.DebugLevel); err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(dir, "fom.db")
	before := readDB(t, app1)

	// A failed edit changes nothing, in memory or on disk.
	err = sc.Config().Apply(map[string]string{"batchSize": "7", "threadMax": "0", "name": "other"})
	var ve *config.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 2 {
		t.Fatalf("got %v", err)
	}
	if want := `fom: config of schedule "knob": key "name" value "other": is not editable at runtime; key "threadMax" value "0": must be between 1 and 10000, got 0`; err.Error() != want {
		t.Fatalf("message\n got %s\nwant %s", err, want)
	}
	if job1.BatchSize.Get() != 42 || sc.Config().Get("threadMax") != "6" {
		t.Fatal("a failed edit was half-applied")
	}
	if after := readDB(t, app1); !maps.Equal(after, before) {
		t.Fatalf("a failed edit changed the store: %v -> %v", before, after)
	}
	if err := app1.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	// A new app on the same data dir finds the edits over the tags.
	app2, err := New(WithDataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer app2.Stop(ctx)
	job2 := &knobJob{}
	sc2, err := app2.Register(job2)
	if err != nil {
		t.Fatal(err)
	}
	if job2.BatchSize.Get() != 42 || sc2.Config().Get("threadMax") != "6" || sc2.Info().Plan != "cron 0 */5 * * * *" {
		t.Fatalf("edits lost: %v", sc2.Config().Values())
	}
	if sc2.LogLevel() != zapcore.DebugLevel {
		t.Fatalf("log level %s", sc2.LogLevel())
	}
	sources := map[string]config.Source{}
	for _, e := range sc2.Config().Entries() {
		sources[e.Key] = e.Source
	}
	if sources["batchSize"] != config.SourcePersisted || sources["remark"] != config.SourceTag || sources["queueSize"] != config.SourceDefault {
		t.Fatalf("sources %v", sources)
	}
	// Reset returns to the code default (the tag) and forgets the edit.
	if err := sc2.Config().Reset("threadMax", "batchSize"); err != nil {
		t.Fatal(err)
	}
	if sc2.Config().Get("threadMax") != "2" || job2.BatchSize.Get() != 500 {
		t.Fatalf("after reset %v", sc2.Config().Values())
	}
	st, _ := app2.Store()
	edits, _ := st.LoadConfig(ctx, "knob")
	if _, ok := edits["threadMax"]; ok || edits["cron"] == "" {
		t.Fatalf("store after reset %v", edits)
	}
	_ = dbPath
}

func readDB(t *testing.T, a *App) map[string]string {
	t.Helper()
	st, err := a.Store()
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.LoadConfig(context.Background(), "knob")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCorruptStoreIsReportedAndUntouched(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "fom.db")
	junk := []byte("definitely not sqlite, but someone's notes file...")
	if err := os.WriteFile(path, junk, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(WithDataDir(dir))
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("got %v", err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, junk) {
		t.Fatal("corrupt file modified")
	}
}

func TestValueGetRacesApply(t *testing.T) {
	t.Parallel()
	app := newTestApp(t)
	job := &knobJob{}
	sc, err := app.Register(job)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var seen atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if v := job.BatchSize.Get(); v < 500 || v > 600 {
					t.Errorf("torn or foreign value %d", v)
					return
				}
				_ = job.Mode.Get()
				seen.Add(1)
			}
		}()
	}
	for i := range 100 {
		if err := sc.Config().Apply(map[string]string{"batchSize": itoa(500 + i), "mode": "m" + itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if job.BatchSize.Get() != 599 || job.Mode.Get() != "m99" || seen.Load() == 0 {
		t.Fatalf("final %d %q", job.BatchSize.Get(), job.Mode.Get())
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

type multiJob struct {
	Schedule  `name:"multi" methods:"SyncUsers,SyncOrders" execOnLoad:"true"`
	completes chan Round
	results   atomic.Int32
}

func (j *multiJob) Tasks(context.Context) ([]Task, error) {
	return []Task{TaskFunc("extra", func(ctx context.Context) (any, error) {
		Logger(ctx).Info("extra runs")
		return FromContext(ctx).Name(), nil
	})}, nil
}
func (j *multiJob) Run(context.Context) (any, error)       { return "run", nil }
func (j *multiJob) SyncUsers(context.Context) (any, error) { return 3, nil }
func (j *multiJob) SyncOrders(context.Context) error       { return errors.New("orders api down") }
func (j *multiJob) OnComplete(_ context.Context, r Round)  { j.completes <- r }
func (j *multiJob) OnResult(Result)                        { j.results.Add(1) }

func TestWorkFromAllSources(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.DebugLevel)
	app := newTestApp(t, WithLogger(zap.New(core)))
	job := &multiJob{completes: make(chan Round, 1)}
	sc, err := app.Register(job)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := <-job.completes
	ids := map[string]Result{}
	for _, res := range r.Results {
		ids[res.TaskID] = res
	}
	if len(ids) != 4 || ids["extra"].Value != "multi" || ids["multi"].Value != "run" || ids["multi.SyncUsers"].Value != 3 ||
		ids["multi.SyncOrders"].Status != StatusFailed || job.results.Load() != 4 {
		t.Fatalf("results %+v", r.Results)
	}
	if sc.State() == Stopped {
		t.Fatal("stopped")
	}
	if logs.FilterMessage("extra runs").FilterField(zap.String("task", "extra")).Len() != 1 {
		t.Fatalf("task log not found in %v", logs.All())
	}
	if logs.Filter(func(e observer.LoggedEntry) bool { return e.LoggerName == "multi" }).Len() == 0 {
		t.Fatal("no log from the schedule's named logger")
	}
}

// TestNamedSchedulesNameTheirTasks: a job type registered under several
// names (Named) names each schedule's Run and methods tasks after that
// schedule, as it does a schedule named by its tag.
func TestNamedSchedulesNameTheirTasks(t *testing.T) {
	t.Parallel()
	app := newTestApp(t)
	jobs := map[string]*multiJob{}
	for _, name := range []string{"multi-a", "multi-b"} {
		jobs[name] = &multiJob{completes: make(chan Round, 1)}
		if _, err := app.Register(jobs[name], Named(name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, job := range jobs {
		r := <-job.completes
		var ids []string
		for _, res := range r.Results {
			ids = append(ids, res.TaskID)
		}
		slices.Sort(ids)
		if want := []string{"extra", name, name + ".SyncOrders", name + ".SyncUsers"}; !slices.Equal(ids, want) {
			t.Errorf("schedule %s ran tasks %q, want %q", name, ids, want)
		}
	}
}

type stuckJob struct {
	Schedule `name:"stuck" execOnLoad:"true" fixedRate:"1h"`
	started  chan struct{}
	release  chan struct{}
}

func (j *stuckJob) Run(context.Context) (any, error) {
	close(j.started)
	<-j.release // ignores its context
	return nil, nil
}

func TestStopNamesWhatDidNotReturn(t *testing.T) {
	t.Parallel()
	app := newTestApp(t)
	job := &stuckJob{started: make(chan struct{}), release: make(chan struct{})}
	defer close(job.release)
	if _, err := app.Register(job); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Register(&runJob{}); err != nil {
		t.Fatal(err)
	}
	app.Start(context.Background())
	<-job.started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := app.Stop(ctx)
	if err == nil || !strings.Contains(err.Error(), "schedule stuck did not stop, tasks still running: [stuck (running") {
		t.Fatalf("got %v", err)
	}
	if strings.Contains(err.Error(), "runJob") {
		t.Fatalf("a schedule that stopped is named: %v", err)
	}
}

func TestDisabledJobDoesNotStart(t *testing.T) {
	t.Parallel()
	app := newTestApp(t, WithClock(clockwork.NewFakeClock()))
	sc, err := app.Register(&runJob{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Config().Apply(map[string]string{"enable": "false"}); err != nil {
		t.Fatal(err)
	}
	app.Start(context.Background())
	if sc.State() != Inited {
		t.Fatalf("state %s", sc.State())
	}
}

func TestOptionsAreValidated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		opt  Option
		want error
	}{
		{WithDataDir(""), ErrEmptyDataDir}, {WithStore(nil), ErrNilStore},
		{WithLogger(nil), ErrNilLogger}, {WithClock(nil), ErrNilClock},
	} {
		if _, err := New(tc.opt); !errors.Is(err, tc.want) {
			t.Errorf("got %v, want %v", err, tc.want)
		}
	}
	app, err := New(WithDataDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	app.Stop(context.Background())
}

func TestStatisticsSurviveRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	clk := clockwork.NewFakeClockAt(time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC))
	app1, _ := New(WithDataDir(dir), WithClock(clk))
	sc, err := app1.Register(&runJob{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := sc.Submit(ctx, TaskFunc("a", func(context.Context) (any, error) { return nil, nil }),
		TaskFunc("b", func(context.Context) (any, error) { return nil, errors.New("nope") }))
	b.Wait(ctx)
	if err := app1.Stop(ctx); err != nil { // flushes
		t.Fatal(err)
	}
	clk.Advance(24 * time.Hour)
	app2, _ := New(WithDataDir(dir), WithClock(clk))
	defer app2.Stop(ctx)
	sc2, err := app2.Register(&runJob{})
	if err != nil {
		t.Fatal(err)
	}
	days := sc2.Stats().Days()
	yesterday := days[len(days)-2]
	if yesterday.Count != 2 || yesterday.ByStatus["failed"] != 1 || days[len(days)-1].Count != 0 {
		t.Fatalf("days %+v", days)
	}
	if f := sc2.Stats().Failures(); len(f) != 1 || f[0].Error != "nope" {
		t.Fatalf("failures %+v", f)
	}
}

func TestRegisterAfterStartAndIdempotentStartStop(t *testing.T) {
	t.Parallel()
	app := newTestApp(t, WithClock(clockwork.NewFakeClock()))
	ctx := context.Background()
	if err := app.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := app.Start(ctx); err != nil {
		t.Fatalf("second Start: %v", err)
	}
	sc, err := app.Register(&runJob{}) // a running app starts what it registers
	if err != nil {
		t.Fatal(err)
	}
	if sc.State() != Sleeping {
		t.Fatalf("state %s", sc.State())
	}
	if err := app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := app.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if sc.State() != Stopped {
		t.Fatalf("after Stop %s", sc.State())
	}
	if err := app.Start(ctx); err != nil { // and again after a stop
		t.Fatal(err)
	}
	if sc.State() != Sleeping {
		t.Fatalf("after restart %s", sc.State())
	}
}

type everyHour struct {
	Schedule `name:"hourly" execOnLoad:"true" fixedRate:"1h"`
}

func (*everyHour) Run(context.Context) (any, error) { return nil, nil }

// TestFlushInterval: WithFlushInterval is bounded, and the app writes its
// statistics and run history on that period of its clock, half-way
// between two whole seconds.
func TestFlushInterval(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{time.Millisecond, 2 * time.Hour} {
		if _, err := New(WithFlushInterval(d)); err == nil || !strings.Contains(err.Error(), "flush interval "+d.String()+": from 100ms to 1h") {
			t.Errorf("%s: %v", d, err)
		}
	}
	clk := clockwork.NewFakeClockAt(time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)) // a whole second
	app, err := New(WithDataDir(t.TempDir()), WithClock(clk), WithFlushInterval(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := app.Register(&everyHour{})
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer app.Stop(context.Background())
	st, err := app.Store()
	if err != nil {
		t.Fatal(err)
	}
	stored := func() int {
		rs, err := st.LoadRounds(context.Background(), "hourly", 10)
		if err != nil {
			t.Fatal(err)
		}
		return len(rs)
	}
	deadline := time.Now().Add(10 * time.Second)
	for sc.Info().Rounds < 1 || sc.State() != Sleeping {
		if time.Now().After(deadline) {
			t.Fatal("the first round did not complete")
		}
		time.Sleep(time.Millisecond)
	}
	clk.Advance(59 * time.Second)
	time.Sleep(20 * time.Millisecond) // a flush, had one been due, would have started
	if n := stored(); n != 0 {
		t.Fatalf("%d rounds written before the interval", n)
	}
	// Due half a second before the minute: flushes fall between whole
	// seconds, where cron's aligned bursts do not.
	clk.Advance(500 * time.Millisecond)
	for stored() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the round was not written half a second before the interval")
		}
		time.Sleep(time.Millisecond)
	}
}

type quickJob struct {
	Schedule `name:"quick" fixedDelay:"13ms"`
}

func (j *quickJob) Run(context.Context) (any, error) { return nil, nil }

// TestFiresAreCoalescedToTheMillisecond: on the real clock an App wakes a
// schedule at the first whole millisecond at or after its planned fire,
// never before; on a test's clock it wakes it at its instant, unless
// WithFireCoalescing says otherwise (coalescedOnATestClock); a bad value
// is refused with an error that names it.
func TestFiresAreCoalescedToTheMillisecond(t *testing.T) {
	t.Parallel()
	for _, bad := range []time.Duration{-time.Millisecond, 2 * time.Second} {
		if _, err := New(WithFireCoalescing(bad)); err == nil || !strings.Contains(err.Error(), bad.String()) {
			t.Errorf("WithFireCoalescing(%s): error %v, want one naming the value", bad, err)
		}
	}
	rounds := func() []statistics.RoundRecord {
		t.Helper()
		sc := startJob(t, &quickJob{})
		deadline := time.Now().Add(10 * time.Second)
		for len(sc.Stats().RecentRounds()) < 20 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		return sc.Stats().RecentRounds()
	}
	// A fire planned off the grid (a fixed delay counts from each round's
	// end, so planned fires fall anywhere in a millisecond), woken before
	// the next whole millisecond: what a wheel without coalescing does most
	// of the time (its tick is 100µs), and never one that coalesces.
	early := func(rs []statistics.RoundRecord) (n int) {
		for _, r := range rs {
			if r.Cause != "plan" {
				continue
			}
			if r.Start.Before(r.Planned) {
				t.Errorf("round %d started at %v, before its planned %v", r.Number, r.Start, r.Planned)
			}
			if grid := r.Planned.Truncate(time.Millisecond); grid != r.Planned && r.Start.Before(grid.Add(time.Millisecond)) {
				n++
			}
		}
		return n
	}
	rs := rounds()
	if len(rs) < 10 {
		t.Fatalf("%d rounds in 10s of a 13ms schedule", len(rs))
	}
	if n := early(rs); n != 0 {
		t.Errorf("%d of %d rounds started before the first whole millisecond after their planned fire", n, len(rs))
	}
	// Whether a round without coalescing starts within its own
	// millisecond on the real clock depends on the machine's load (under
	// -race, with every package's tests running, it seldom does): the
	// difference is shown on a test's clock instead.
	if start, planned := coalescedOnATestClock(t, nil, 10*time.Second); !start.Equal(planned) {
		t.Errorf("on a test's clock the round started at %v, want its planned %v", start, planned)
	}
	if start, planned := coalescedOnATestClock(t, WithFireCoalescing(time.Millisecond), 50*time.Millisecond); !start.Equal(planned.Truncate(time.Millisecond).Add(time.Millisecond)) {
		t.Errorf("coalesced to the millisecond, the round planned at %v started at %v", planned, start)
	}
}

// rateJob fires every second from the app's start.
type rateJob struct {
	Schedule `name:"rate" fixedRate:"1s"`
}

func (j *rateJob) Run(context.Context) (any, error) { return nil, nil }

// coalescedOnATestClock starts an App (with opt, if any) on a fake clock
// 0.3 ms past a whole millisecond, moves the clock to the first fire of a
// 1 s fixedRate schedule, off the millisecond grid, gives the app up to
// grace to run it there, then moves the clock to the next whole
// millisecond, and returns the round's start and planned fire.
func coalescedOnATestClock(t *testing.T, opt Option, grace time.Duration) (start, planned time.Time) {
	t.Helper()
	clk := clockwork.NewFakeClockAt(time.Date(2026, 5, 4, 12, 0, 0, 300_000, time.UTC))
	opts := []Option{WithClock(clk)}
	if opt != nil {
		opts = append(opts, opt)
	}
	sc := startJob(t, &rateJob{}, opts...)
	for sc.State() != Sleeping {
		time.Sleep(time.Millisecond)
	}
	clk.Advance(time.Second) // to the planned fire
	ran := func() bool { return len(sc.Stats().RecentRounds()) > 0 }
	for wait := time.Now().Add(grace); !ran() && time.Now().Before(wait); { // a wake-up due now runs now
		time.Sleep(time.Millisecond)
	}
	clk.Advance(700 * time.Microsecond) // to the next whole millisecond
	for deadline := time.Now().Add(10 * time.Second); !ran(); {
		if time.Now().After(deadline) {
			t.Fatal("the first round did not run")
		}
		time.Sleep(time.Millisecond)
	}
	r := sc.Stats().RecentRounds()[0]
	return r.Start, r.Planned
}

// startJob starts a test app (newTestApp) with job registered, and
// returns the job's schedule.
func startJob(t *testing.T, job any, opts ...Option) *ScheduleContext {
	t.Helper()
	app := newTestApp(t, opts...)
	sc, err := app.Register(job)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return sc
}

// After a Stop that timed out on a task ignoring its context, the data dir
// is released once that task returns: a new App in the same process opens
// it, and finds the stuck round's outcome saved.
func TestTimedOutStopReleasesTheStoreWhenTheTaskReturns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	app, err := New(WithDataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	job := &stuckJob{started: make(chan struct{}), release: make(chan struct{})}
	if _, err := app.Register(job); err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-job.started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := app.Stop(ctx); err == nil {
		t.Fatal("stop returned while a task was stuck")
	}
	// While the task runs the store is still this App's.
	if _, err := New(WithDataDir(dir)); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a second App opened the store while a task of the first could still write: %v", err)
	}
	close(job.release)
	// No second Stop: the store is released once the task returned.
	var next *App
	var sc *ScheduleContext
	for deadline := time.Now().Add(5 * time.Second); ; {
		if next, err = New(WithDataDir(dir)); err == nil {
			if sc, err = next.Register(&stuckJob{started: make(chan struct{}), release: make(chan struct{})}); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("a new App after the task returned: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := app.Stop(context.Background()); err != nil {
		t.Fatalf("a later stop of the first App: %v", err)
	}
	if n := sc.Stats().Days(); len(n) == 0 || n[len(n)-1].Count != 1 {
		t.Fatalf("the stuck round's outcome was not saved: %+v", n)
	}
	if err := next.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestTheCollectorsPacerRunsWhileTheAppRuns: a started App paces the
// process's collector (internal/gcpace) until it stops, unless
// WithGCPacing(false); a stopped App leaves no pacer behind (goleak).
func TestTheCollectorsPacerRunsWhileTheAppRuns(t *testing.T) {
	for _, on := range []bool{true, false} {
		app, err := New(WithDataDir(t.TempDir()), WithGCPacing(on))
		if err != nil {
			t.Fatal(err)
		}
		if err := app.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		app.mu.Lock()
		running := app.pacer != nil
		app.mu.Unlock()
		if running != on {
			t.Errorf("WithGCPacing(%v): a pacer runs: %v", on, running)
		}
		if err := app.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if app.pacer != nil {
			t.Errorf("WithGCPacing(%v): the pacer outlives Stop", on)
		}
	}
}
