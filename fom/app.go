package fom

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/fom-go/fom/cluster"
	"github.com/fom-go/fom/config"
	"github.com/fom-go/fom/internal/clockx"
	"github.com/fom-go/fom/internal/gcpace"
	"github.com/fom-go/fom/schedule"
	"github.com/fom-go/fom/schedule/wheel"
	"github.com/fom-go/fom/statistics"
	"github.com/fom-go/fom/store"
	"github.com/fom-go/fom/store/sqlite"
	"github.com/fom-go/fom/timer"
)

// settingLogLevel is the store setting that keeps a schedule's log level.
const settingLogLevel = "logLevel"

// App owns a set of schedules, their shared conflict registry and their
// store. Build it with New, add jobs with Register, then Start and Stop.
type App struct {
	o         options
	log       *zap.Logger
	conflicts *schedule.Conflicts
	wheels    []*wheel.Wheel      // time the schedules' fires and delayed batches, round-robin
	runners   []*schedule.Runners // round goroutines, one set per wheel
	types     sync.Map            // reflect.Type -> *jobType

	mu        sync.Mutex
	st        store.Store
	ownStore  bool
	schedules []*ScheduleContext
	byName    map[string]*ScheduleContext
	typeOf    map[string]string    // schedule name -> job type, for messages
	keys      *config.Keys         // built-in key definitions, shared by every schedule
	coord     cluster.Coordinator  // on a PostgreSQL store: this instance's part in the cluster
	missed    map[string]time.Time // last fires of schedules taken before they started; guarded by mu
	desired   map[string]bool      // desired states last applied (cluster); guarded by mu
	disagree  string               // the declarations' differences last logged (cluster); guarded by mu
	running   bool
	noting    bool           // Start notes the leases taken before their schedules start (missed); guarded by mu
	timers    *timer.Service // made by Timers
	releasing chan struct{}  // closed once the tasks a timed-out Stop left have returned and the store is released
	flushStop chan struct{}  // closes the statistics flush loop
	flushDone chan struct{}
	pacer     *gcpace.Pacer // while running, unless WithGCPacing(false)

	flushMu   sync.Mutex // one flush at a time
	lastPrune time.Time  // guarded by flushMu
	// What a flush builds, kept for the next one (guarded by flushMu): a
	// flush of thousands of schedules would otherwise grow these slices
	// anew, copying, every time.
	flushChunk []*statistics.Changes
	flushBatch store.StatsBatch
	// The schedules' changes themselves, a few hundred bytes each, are
	// taken into slots kept for the next flush (changeSlots).
	flushSlots changeSlots
	flushes    uint64 // flushes so far: a flush's batches carry its number
	flushRows  int    // flushRows; tests make it smaller
	yielding   func() // tests: called when a flush begins to wait for rounds
}

// New builds an app and opens its embedded store (unless WithStore gave
// one): a data directory another process holds, or a file that is not a
// fom store, is refused here. No schedule runs until Start; Stop closes
// the store.
func New(opts ...Option) (*App, error) {
	o := options{dataDir: DefaultDataDir}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("fom: new app: %w", schedule.ErrNilOption)
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.logger == nil {
		o.logger = zap.NewNop()
	}
	coalesce := DefaultFireCoalescing
	if o.clock == nil {
		o.clock = clockwork.NewRealClock()
	} else {
		coalesce = 0 // a test's clock: a fire comes at its instant (WithFireCoalescing)
	}
	if o.coalesce != nil {
		coalesce = *o.coalesce
	}
	// Schedules share a few wheels (one per P, so that no lock is global):
	// those due at the same instant are woken by a few timers rather than
	// one runtime timer each. A wheel holds goroutines only while something
	// is pending.
	wheels := make([]*wheel.Wheel, runtime.GOMAXPROCS(0))
	for i := range wheels {
		w, err := wheel.New(wheel.WithClock(o.clock), wheel.WithDispatchers(1), wheel.WithCoalesce(coalesce))
		if err != nil {
			return nil, fmt.Errorf("fom: new app: %w", err)
		}
		wheels[i] = w
	}
	// And one set of round goroutines per wheel, four at once each.
	runners := make([]*schedule.Runners, len(wheels))
	for i := range runners {
		runners[i] = schedule.NewRunners(0, 4)
	}
	a := &App{
		o: o, log: o.logger.Named("fom"), conflicts: schedule.NewConflicts(), wheels: wheels,
		runners: runners,
		byName:  map[string]*ScheduleContext{}, typeOf: map[string]string{}, st: o.store, keys: config.NewKeys(),
		missed: map[string]time.Time{}, desired: map[string]bool{}, flushRows: flushRows,
	}
	if cs, ok := o.store.(clusterStore); ok {
		coord, err := cs.Coordinate(cluster.Options{
			InstanceID: o.instanceID, LeaseTTL: o.leaseTTL, Logger: o.logger,
			Acquired: a.acquired, Busy: a.busy, Wants: a.wants,
			Notified: a.notified, Resync: a.resync,
			DesiredChanged: a.desiredChanged, Execute: a.actHere,
		})
		if err != nil {
			return nil, fmt.Errorf("fom: new app: %w", err)
		}
		a.coord = coord
		a.conflicts.SetClaims(coord) // enableTaskConflict holds across instances
	}
	if o.store == nil && !o.lazyStore {
		// The embedded store is opened here, so that a data dir another
		// process holds is said once, by New, rather than as the failure
		// of the first Register.
		if _, err := a.store(context.Background()); err != nil {
			return nil, fmt.Errorf("fom: new app: %w", err)
		}
	}
	return a, nil
}

// Audit records an operator's action on a schedule in the store (the
// admin page and API do so for every action they carry out or refuse).
// A zero At is now.
func (a *App) Audit(ctx context.Context, e store.AuditEntry) error {
	if e.At.IsZero() {
		e.At = a.o.clock.Now()
	}
	st, err := a.store(ctx)
	if err != nil {
		return err
	}
	return st.AppendAudit(ctx, e)
}

// AuditLog returns a schedule's most recent audit entries, newest first.
func (a *App) AuditLog(ctx context.Context, schedule string, limit int) ([]store.AuditEntry, error) {
	st, err := a.store(ctx)
	if err != nil {
		return nil, err
	}
	return st.LoadAudit(ctx, schedule, limit)
}

// History returns a schedule's most recent rounds and batches, newest
// first, at most limit: cause, who asked, times, lateness and counts by
// status. On a shared store the rounds of every instance are listed.
func (a *App) History(ctx context.Context, name string, limit int) ([]statistics.RoundRecord, error) {
	sc := a.Schedule(name)
	if sc == nil {
		return nil, fmt.Errorf("fom: %w: %s", ErrUnknownSchedule, name)
	}
	a.mu.Lock()
	st := a.st
	a.mu.Unlock()
	return sc.Stats().History(ctx, st, limit)
}

// Round returns one round of a schedule's history with its tasks'
// results: seq as History listed it, of instance ("" for this one).
func (a *App) Round(ctx context.Context, name, instance string, seq int64) (statistics.RoundRecord, bool, error) {
	sc := a.Schedule(name)
	if sc == nil {
		return statistics.RoundRecord{}, false, fmt.Errorf("fom: %w: %s", ErrUnknownSchedule, name)
	}
	if instance == a.InstanceID() {
		instance = ""
	}
	a.mu.Lock()
	st := a.st
	a.mu.Unlock()
	return sc.Stats().Round(ctx, st, instance, seq)
}

// InstanceID returns this App's id among the instances of a cluster, or
// "" when its store is not shared (SQLite).
func (a *App) InstanceID() string {
	if a.coord == nil {
		return ""
	}
	return a.coord.ID()
}

// store returns the app's store, opening the embedded one on first use.
func (a *App) store(ctx context.Context) (store.Store, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.storeLocked(ctx)
}

func (a *App) storeLocked(ctx context.Context) (store.Store, error) {
	if a.st != nil {
		return a.st, nil
	}
	s, err := sqlite.Open(ctx, a.o.dataDir)
	if err != nil {
		return nil, err
	}
	a.st, a.ownStore = s, true
	return s, nil
}

// Store returns the app's store, opening the embedded one if needed.
func (a *App) Store() (store.Store, error) { return a.store(context.Background()) }

// persister forwards config saves to whatever store the app has now, so a
// store reopened after Stop keeps serving the same configs.
type persister struct{ a *App }

func (p persister) SaveConfig(ctx context.Context, schedule string, edits map[string]string) error {
	s, err := p.a.store(ctx)
	if err != nil {
		return err
	}
	return s.SaveConfig(ctx, schedule, edits)
}

// Register declares a job: a pointer to a struct embedding fom.Schedule.
// Every problem of the declaration is reported in one *RegistrationError
// naming the type, the keys and the values. If the app is running and the
// job is enabled, it starts at once.
func (a *App) Register(job any, opts ...RegisterOption) (*ScheduleContext, error) {
	if job == nil {
		return nil, ErrNilJob
	}
	var ro registerOptions
	for _, o := range opts {
		if o != nil {
			o(&ro)
		}
	}
	t := reflect.TypeOf(job)
	cached, ok := a.types.Load(t)
	if !ok {
		cached, _ = a.types.LoadOrStore(t, analyze(t))
	}
	jt := cached.(*jobType)
	d, problems := jt.declare(job, ro.name)
	var sentinels []error
	fail := func(extra ...string) error {
		return &RegistrationError{Type: jt.typeName, Problems: append(problems, extra...), Errs: sentinels}
	}
	if len(jt.problems) > 0 && jt.defName == "" {
		return nil, fail()
	}

	ctx := context.Background()
	a.mu.Lock()
	defer a.mu.Unlock()
	if other, dup := a.typeOf[d.name]; dup {
		problems = append(problems, fmt.Sprintf("key \"name\" value %q: duplicate schedule name: %s is already registered under it; give one of them another name", d.name, other))
		sentinels = append(sentinels, ErrDuplicateName)
	}
	st, err := a.storeLocked(ctx)
	if err != nil {
		return nil, fmt.Errorf("fom: register %s: %w", jt.typeName, err)
	}
	persisted, err := st.LoadConfig(ctx, d.name)
	if err != nil {
		return nil, fmt.Errorf("fom: register %s: %w", jt.typeName, err)
	}
	cfg, err := config.New(d.name, config.Spec{Tags: d.tags, Custom: d.custom, Persisted: persisted, Persister: persister{a}, Keys: a.keys})
	if err != nil {
		problems = append(problems, configProblems(err)...)
	}
	if len(problems) > 0 {
		return nil, fail()
	}
	for _, w := range cfg.Warnings() {
		a.log.Warn(w)
	}
	stats, err := statistics.New(d.name, a.o.clock, statistics.DefaultSettings())
	if err != nil {
		return nil, fmt.Errorf("fom: register %s: %w", jt.typeName, err)
	}
	warnings, err := stats.Load(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("fom: register %s: load statistics: %w", jt.typeName, err)
	}
	for _, w := range warnings {
		a.log.Warn(w)
	}
	so := schedule.Options{Clock: a.o.clock, Logger: a.o.logger, Conflicts: a.conflicts, Stats: stats, Wheel: a.wheels[len(a.schedules)%len(a.wheels)], Runners: a.runners[len(a.schedules)%len(a.wheels)], Tracer: a.o.tracer}
	if a.coord != nil {
		so.Gate, so.Control = a.coord.GateOf(d.name), appControl{a}
		if err := a.coord.Add(ctx, d.name); err != nil {
			return nil, fmt.Errorf("fom: register %s: %w", jt.typeName, err)
		}
	}
	sc, err := schedule.New(cfg, d.job, so)
	if err != nil {
		return nil, fmt.Errorf("fom: register %s: %w", jt.typeName, err)
	}
	// Value fields: set now, and again on every edit of their key.
	for key, set := range d.setter {
		if err := set(cfg.Get(key)); err != nil {
			return nil, fmt.Errorf("fom: register %s: key %q: %w", jt.typeName, key, err)
		}
	}
	if setters := d.setter; len(setters) > 0 { // only the setters stay referenced, not the declaration
		cfg.Subscribe(func(ch config.Change) {
			for _, k := range ch.Changed {
				if set, ok := setters[k]; ok {
					_ = set(ch.Values[k]) // validated by config
				}
			}
		})
	}
	level := zapcore.InfoLevel
	if v, ok, err := st.GetSetting(ctx, d.name, settingLogLevel); err != nil {
		return nil, fmt.Errorf("fom: register %s: %w", jt.typeName, err)
	} else if ok {
		if err := level.Set(v); err != nil {
			a.log.Warn("persisted log level ignored", zap.String("schedule", d.name), zap.String("value", v))
			level = zapcore.InfoLevel
		}
	}
	name := d.name
	sc.BindLogLevel(level, func(l zapcore.Level) error {
		s, err := a.store(context.Background())
		if err != nil {
			return err
		}
		return s.PutSetting(context.Background(), name, settingLogLevel, l.String())
	})
	a.schedules = append(a.schedules, sc)
	a.byName[d.name] = sc
	a.typeOf[d.name] = jt.typeName
	a.log.Info("registered", zap.String("schedule", d.name), zap.String("type", jt.typeName), zap.String("plan", sc.Info().Plan))
	if a.running && a.coord != nil {
		// This one schedule's declaration; the next resync compares.
		if err := a.coord.Declare(ctx, map[string]map[string]string{d.name: declarationOf(sc)}, false); err != nil {
			a.log.Warn("recording the schedule's declaration failed", zap.String("schedule", d.name), zap.Error(err))
		}
	}
	if a.running && cfg.Settings().Enable {
		if err := sc.StartupHere(); err != nil && !errors.Is(err, schedule.ErrPastDeadTime) {
			return sc, err
		}
	}
	return sc, nil
}

// Start starts every enabled schedule. It does not block. On a PostgreSQL
// store the schedules start before the instance joins the cluster, each
// parked until its lease comes (see startCluster).
func (a *App) Start(ctx context.Context) error {
	if _, err := a.store(ctx); err != nil {
		return err
	}
	if a.coord == nil {
		a.mu.Lock()
		a.running = true
		a.startLoopsLocked()
		errs := a.startSchedulesLocked(nil, func(*ScheduleContext) bool { return true })
		timers := a.timers
		a.mu.Unlock()
		return errors.Join(append(errs, a.startTimers(ctx, timers))...)
	}
	return a.startCluster(ctx)
}

// startCluster starts an App on a PostgreSQL store. The schedules start
// before the instance registers: from its registration the others count
// it in their shares and may hand it leases (theirs given back at their
// next renewal, or free ones at its own first), and a lease that comes to
// a schedule already started resumes it at once from the lease's last
// fire. Taken before the schedule started, the fires due until it starts
// (the declarations of ten thousand schedules, the calm part of a second
// waited for: up to a second) would be missed, and run late as one
// catch-up round. Each starts parked (its gate holds none of its fires:
// no wait armed) until its lease comes. A schedule whose first round is
// pinned (execOnLoad, initialDelay) starts after the instance has taken
// its first leases, so that the instance holding the lease runs that
// round; one taken before it started starts from the lease's last fire
// (StartupFrom).
func (a *App) startCluster(ctx context.Context) error {
	// All of a starting instance's cluster work (the desired states,
	// its leases, its declarations) begins in the calm part of a
	// second: besides its statements, it allocates for every schedule,
	// and a collection that sets off just before a whole second marks
	// through the other instances' burst (the cluster benchmark's join
	// row: a mark of 165–175 ms begun 6–30 ms before the second after
	// the join, which read 93 ms at p99).
	names := a.names()
	a.awaitCalm(ctx, time.Duration(len(names))*bulkPerSchedule)
	// The desired states first: they decide which schedules run here,
	// and so which leases this instance takes (wants).
	desired, err := a.coord.Desired(ctx, names)
	if err != nil {
		return err
	}
	a.mu.Lock()
	maps.Copy(a.desired, desired)
	a.running, a.noting = true, true
	errs := a.startSchedulesLocked(desired, func(sc *ScheduleContext) bool { return !pinned(sc) })
	a.mu.Unlock()
	if err := a.coord.Start(ctx); err != nil && !errors.Is(err, cluster.ErrStarted) {
		// Nothing ran: the schedules started wait, parked, for leases
		// this instance did not take.
		a.mu.Lock()
		a.running, a.noting = false, false
		clear(a.missed)
		scs := append([]*ScheduleContext(nil), a.schedules...)
		a.mu.Unlock()
		for _, sc := range scs {
			_ = sc.ShutdownHere()
		}
		return err
	}
	a.mu.Lock()
	a.startLoopsLocked()
	errs = append(errs, a.startSchedulesLocked(desired, pinned)...)
	// What is left is of schedules that did not start (stopped, past
	// their deadTime): started later, they run from then on.
	a.noting = false
	clear(a.missed)
	timers := a.timers
	a.mu.Unlock()
	a.declare(ctx)
	errs = append(errs, a.startTimers(ctx, timers))
	// Its schedules run: the other instances hand it its share now.
	a.coord.Ready()
	return errors.Join(errs...)
}

// pinned reports whether a schedule's first round is not its plan's
// (execOnLoad, initialDelay).
func pinned(sc *ScheduleContext) bool {
	s := sc.Config().Current()
	return s.ExecOnLoad || s.InitialDelay > 0
}

// startLoopsLocked starts the statistics flush loop, and the collector's
// pacer, once. With a.mu held.
func (a *App) startLoopsLocked() {
	if a.pacer == nil && !a.o.noPacing {
		// The real clock whatever the App's: it paces the process's
		// collector, in real time.
		a.pacer = gcpace.StartRuntime(clockwork.NewRealClock())
	}
	if a.flushStop != nil {
		return
	}
	a.flushStop, a.flushDone = make(chan struct{}), make(chan struct{})
	// The period counts from Start, not from whenever the loop's
	// goroutine first runs.
	go a.flushLoop(clockx.OffBeat(a.o.clock.Now(), a.flushEvery()), a.flushStop, a.flushDone)
}

// startSchedulesLocked starts the schedules that which picks and that run
// here: in a cluster, those whose desired state (an operator's start or
// stop, which outlives restarts) says so, else those enabled. With a.mu
// held.
func (a *App) startSchedulesLocked(desired map[string]bool, which func(*ScheduleContext) bool) []error {
	var errs []error
	for _, sc := range a.schedules {
		if !which(sc) {
			continue
		}
		run, ok := desired[sc.Name()]
		if ok {
			a.desired[sc.Name()] = run
		} else {
			run = sc.Config().Current().Enable
		}
		if !run {
			a.log.Info("not started", zap.String("schedule", sc.Name()), zap.Bool("stoppedByOperator", ok))
			continue
		}
		// A lease taken before the schedule started starts it from the
		// lease's last fire, in one step: started from now and resumed
		// after, a fire due in between could run, and run again from the
		// resume.
		var err error
		if last, ok := a.missed[sc.Name()]; ok {
			delete(a.missed, sc.Name())
			err = sc.StartupFrom(last, sc.Config().Current().Misfire != config.MisfireSkip)
		} else {
			err = sc.StartupHere()
		}
		// A deadTime already past leaves the schedule STOPPED with its
		// reason (Info.StopReason, logged): a campaign that ended is no
		// reason for the app not to start.
		if err != nil && !errors.Is(err, schedule.ErrAlreadyStarted) && !errors.Is(err, schedule.ErrPastDeadTime) {
			errs = append(errs, err)
		}
	}
	return errs
}

// startTimers starts the durable timers' service, if the App has one.
func (a *App) startTimers(ctx context.Context, timers *timer.Service) error {
	if timers == nil {
		return nil
	}
	return timers.Start(ctx)
}

// Stop stops every schedule, concurrently and gracefully: running tasks are
// canceled (after their OnCancel hooks), queued ones are recorded as
// canceled, and Stop waits for every task to return. If ctx ends first, the
// error names the schedules and tasks that did not return. An embedded
// store is closed once everything stopped.
func (a *App) Stop(ctx context.Context) error {
	a.mu.Lock()
	a.running = false
	scs := append([]*ScheduleContext(nil), a.schedules...)
	timers := a.timers
	a.mu.Unlock()
	var terr error
	if timers != nil { // deliveries end, or are left to their leases, before the store closes
		terr = timers.Stop(ctx)
	}
	if a.coord != nil { // the schedules' fires from now on run elsewhere, on time
		if n := a.coord.Owned(); n > 0 {
			a.awaitCalm(ctx, time.Duration(n)*handoverPerLease)
		}
		a.coord.Drain(context.WithoutCancel(ctx))
	}
	errs := make([]error, len(scs))
	var wg sync.WaitGroup
	for i, sc := range scs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = sc.Close(ctx)
		}()
	}
	wg.Wait()
	for _, rs := range a.runners {
		rs.Close()
	}
	if terr != nil {
		errs = append(errs, terr)
	}
	if a.coord != nil { // every schedule stopped: give the leases back
		if err := a.coord.Stop(context.WithoutCancel(ctx)); err != nil {
			errs = append(errs, err)
		}
	}
	a.mu.Lock()
	stop, done := a.flushStop, a.flushDone
	a.flushStop, a.flushDone = nil, nil
	pacer := a.pacer
	a.pacer = nil
	a.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	if pacer != nil {
		pacer.Stop()
	}
	// The last flush gets deadlines of its own: statistics are worth saving
	// even when the caller's context ran out waiting for a stuck task.
	if err := errors.Join(errs...); err != nil {
		// A task did not return: what is known is flushed now, and the
		// embedded store stays open until the last such task returns,
		// then takes its outcome and is closed (releaseWhenDone), so that
		// another App may open the data dir.
		if ferr := a.flush(context.WithoutCancel(ctx), 10*time.Second); ferr != nil {
			err = errors.Join(err, ferr)
		}
		a.releaseWhenDone(scs)
		return fmt.Errorf("fom: stop: %w", err)
	}
	if a.coord != nil {
		a.awaitCalm(ctx, time.Duration(len(scs))*bulkPerSchedule)
	}
	// Everything stopped: a failed last flush is reported, and the
	// embedded store is closed either way (nothing could write it later).
	if err := a.flushAndRelease(ctx); err != nil {
		return fmt.Errorf("fom: stop: %w", err)
	}
	return nil
}

// flushAndRelease writes the last statistics and closes the embedded store
// unless the App was started again meanwhile.
func (a *App) flushAndRelease(ctx context.Context) error {
	ferr := a.flush(context.WithoutCancel(ctx), 10*time.Second)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ownStore && a.st != nil && !a.running {
		cerr := a.st.Close()
		a.st, a.ownStore = nil, false
		if cerr != nil {
			ferr = errors.Join(ferr, fmt.Errorf("close store: %w", cerr))
		}
	}
	return ferr
}

// releaseWhenDone waits, on a goroutine that lives as long as the tasks
// a timed-out Stop left running, for every schedule to end, then flushes
// and closes the embedded store. A later Stop waits for it.
func (a *App) releaseWhenDone(scs []*ScheduleContext) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.releasing != nil {
		return
	}
	done := make(chan struct{})
	a.releasing = done
	go func() {
		defer close(done)
		for _, sc := range scs {
			_ = sc.Close(context.Background()) // returns when its last task has
		}
		if err := a.flushAndRelease(context.Background()); err != nil {
			a.log.Warn("the last flush after a timed-out stop failed", zap.Error(err))
		} else {
			a.log.Info("the tasks a timed-out stop left running have returned; store released")
		}
		a.mu.Lock()
		a.releasing = nil
		a.mu.Unlock()
	}()
}

// Schedule returns the schedule with this name, or nil.
func (a *App) Schedule(name string) *ScheduleContext {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.byName[name]
}

func (a *App) names() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, len(a.schedules))
	for i, sc := range a.schedules {
		out[i] = sc.Name()
	}
	return out
}

// Schedules returns every schedule in registration order.
func (a *App) Schedules() []*ScheduleContext {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*ScheduleContext(nil), a.schedules...)
}
