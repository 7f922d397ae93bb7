package fom

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/fom-go/fom/cluster"
	"github.com/fom-go/fom/config"
	"github.com/fom-go/fom/schedule"
	"github.com/fom-go/fom/schedule/wheel"
	"github.com/fom-go/fom/statistics"
	"github.com/fom-go/fom/store"
	"github.com/fom-go/fom/store/postgres"
	"github.com/fom-go/fom/store/sqlite"
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
	coord     *cluster.Coordinator // on a PostgreSQL store: this instance's part in the cluster
	missed    map[string]time.Time // last fires of schedules taken before they started; guarded by mu
	desired   map[string]bool      // desired states last applied (cluster); guarded by mu
	running   bool
	releasing chan struct{} // closed once the tasks a timed-out Stop left have returned and the store is released
	flushStop chan struct{} // closes the statistics flush loop
	flushDone chan struct{}

	flushMu   sync.Mutex // one flush at a time
	lastPrune time.Time  // guarded by flushMu
	// What a flush builds, kept for the next one (guarded by flushMu): a
	// flush of thousands of schedules would otherwise grow these slices
	// anew, copying, every time.
	flushChunk []*statistics.Changes
	flushBatch store.StatsBatch
	// The schedules' changes themselves, a few hundred bytes each, are
	// taken into an array kept behind a weak pointer: reused by every
	// flush until a garbage collection finds it unused, and never counted
	// as the app's memory.
	flushTaken weak.Pointer[[]statistics.Changes]
	flushes    uint64 // flushes so far: a flush's batches carry its number
	flushRows  int    // flushRows; tests make it smaller
	yielding   func() // tests: called when a flush begins to wait for rounds
}

// Statistics persistence. A flush takes every schedule's changes (bounded:
// changed days plus at most the last `failures` failures of each) and
// writes them in transactions of at most flushRows rows, each with its
// own deadline, so a backlog is written in pieces and one slow piece does
// not starve the rest. Retention by age is applied for every schedule in
// one transaction at most once per pruneInterval; a schedule that wrote
// failures has them cut to its count in the same flush, so a failure storm
// cannot grow the table between two prunes.
const (
	flushInterval = 5 * time.Second // how often statistics are written
	flushRows     = 20000           // rows per transaction
	pruneInterval = time.Hour
)

// A flush gives way to rounds: while rounds wait for a runner (schedules
// due together, more than the runners run at once), it pauses between
// schedules, up to flushYield in all. A flush of ten thousand schedules
// is tens of milliseconds of one core, and, landing on their whole-second
// burst, it took that core from the burst: the burst's p99 lateness
// doubled, or not, by the phase of the flush against the second. The
// pause is in real time: it shares the processor, it does not time
// anything the clock drives.
const (
	flushYield     = time.Second
	flushYieldStep = 200 * time.Microsecond
	yieldEvery     = 64 // schedules taken between two looks at the runners
)

// New builds an app. It allocates only: no goroutine runs and no file is
// opened until the first Register.
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
	if pg, ok := o.store.(*postgres.Store); ok {
		coord, err := cluster.New(pg.Pool(), pg.Schema(), cluster.Options{
			InstanceID: o.instanceID, LeaseTTL: o.leaseTTL, Logger: o.logger,
			Acquired: a.acquired, Busy: a.busy,
			Channel: pg.Channel(), Notified: a.notified, Resync: a.resync,
			DesiredChanged: a.desiredChanged, Execute: a.actLocally,
		})
		if err != nil {
			return nil, fmt.Errorf("fom: new app: %w", err)
		}
		a.coord = coord
		a.conflicts.SetClaims(coord) // enableTaskConflict holds across instances
		if err := pg.BindInstance(coord.ID()); err != nil {
			return nil, fmt.Errorf("fom: new app: %w", err)
		}
	}
	return a, nil
}

// acquired continues a schedule whose lease this instance just took from
// the last fire the cluster recorded; a schedule not started yet does so
// when it starts.
func (a *App) acquired(name string, last time.Time) {
	if last.IsZero() {
		return
	}
	sc := a.Schedule(name)
	if sc != nil && sc.Resume(last, sc.Config().Current().Misfire != config.MisfireSkip) {
		return
	}
	a.mu.Lock()
	a.missed[name] = last
	a.mu.Unlock()
}

// resumeMissed applies the last fires noted before their schedules started.
func (a *App) resumeMissed() {
	a.mu.Lock()
	missed := a.missed
	a.missed = map[string]time.Time{}
	a.mu.Unlock()
	for name, last := range missed {
		if sc := a.Schedule(name); sc != nil {
			sc.Resume(last, sc.Config().Current().Misfire != config.MisfireSkip)
		}
	}
}

// notified applies an edit another instance saved: a schedule's config
// edits or its settings (log level, statistics settings).
func (a *App) notified(payload string) {
	pg, _ := a.o.store.(*postgres.Store)
	kind, name := "", ""
	for _, k := range []string{postgres.NotifyConfig, postgres.NotifySettings} {
		if rest, ok := strings.CutPrefix(payload, k); ok {
			kind, name = k, rest
		}
	}
	sc := a.Schedule(name)
	if pg == nil || sc == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	switch kind {
	case postgres.NotifyConfig:
		edits, err := pg.LoadConfig(ctx, name)
		if err != nil {
			a.log.Warn("reloading an edit saved elsewhere failed", zap.String("schedule", name), zap.Error(err))
			return
		}
		a.reload(sc, edits)
	case postgres.NotifySettings:
		if v, ok, err := pg.GetSetting(ctx, name, settingLogLevel); err == nil && ok {
			a.applyLevel(sc, v)
		}
		if err := sc.Stats().ReloadSettings(ctx, pg); err != nil {
			a.log.Warn("reloading statistics settings saved elsewhere failed", zap.String("schedule", name), zap.Error(err))
		}
	}
}

// resync re-reads every schedule's edits and log level in two queries:
// the fallback for a notification lost while not listening.
func (a *App) resync(ctx context.Context) {
	pg, _ := a.o.store.(*postgres.Store)
	scs := a.Schedules()
	if pg == nil || len(scs) == 0 {
		return
	}
	names := make([]string, len(scs))
	for i, sc := range scs {
		names[i] = sc.Name()
	}
	configs, err := pg.LoadConfigs(ctx, names)
	if err != nil {
		a.log.Warn("re-reading edits failed", zap.Error(err))
		return
	}
	levels, err := pg.LoadSettings(ctx, settingLogLevel, names)
	if err != nil {
		a.log.Warn("re-reading log levels failed", zap.Error(err))
		return
	}
	if desired, err := a.coord.Desired(ctx, names); err == nil {
		for name, running := range desired {
			a.follow(name, running)
		}
	}
	for _, sc := range scs {
		edits := configs[sc.Name()]
		if edits == nil {
			edits = map[string]string{}
		}
		if !maps.Equal(edits, sc.Config().Edits()) {
			a.reload(sc, edits)
		}
		if v, ok := levels[sc.Name()]; ok {
			a.applyLevel(sc, v)
		}
	}
}

func (a *App) reload(sc *ScheduleContext, edits map[string]string) {
	warnings, err := sc.Config().Reload(edits)
	for _, w := range warnings {
		a.log.Warn(w)
	}
	if err != nil {
		a.log.Warn("an edit saved elsewhere does not hold here; ignored", zap.String("schedule", sc.Name()), zap.Error(err))
	}
}

func (a *App) applyLevel(sc *ScheduleContext, v string) {
	var l zapcore.Level
	if err := l.Set(v); err == nil && l != sc.LogLevel() {
		sc.ApplyLogLevel(l)
	}
}

func (a *App) busy(name string) bool {
	sc := a.Schedule(name)
	return sc != nil && sc.State() == schedule.Running
}

// Act carries out an operator's action on a schedule: "start", "stop" or
// "exec" (a round now). On a PostgreSQL store start and stop become the
// schedule's desired state on every instance (kept across restarts), and
// exec goes to the instance that owns the schedule, whose answer is
// returned. The state machine's refusals (ErrAlreadyStarted, ...) come
// back as errors.
func (a *App) Act(ctx context.Context, name, action string) error {
	switch action {
	case "start", "stop":
		if err := a.actLocally(name, action, schedule.ActorOf(ctx)); err != nil {
			return err
		}
		if a.coord != nil {
			a.mu.Lock()
			a.desired[name] = action == "start"
			a.mu.Unlock()
			return a.coord.SetDesired(ctx, name, action == "start")
		}
		return nil
	case "exec":
		if a.coord != nil && a.Schedule(name) != nil && !a.coord.Owner(name) {
			return a.coord.Forward(ctx, name, action, schedule.ActorOf(ctx))
		}
		return a.actLocally(name, action, schedule.ActorOf(ctx))
	}
	return fmt.Errorf("fom: unknown action %q (start, stop or exec)", action)
}

// actLocally carries out an action on this instance's schedule context,
// on behalf of by.
func (a *App) actLocally(name, action, by string) error {
	sc := a.Schedule(name)
	if sc == nil {
		return fmt.Errorf("fom: %w: %s", ErrUnknownSchedule, name)
	}
	switch action {
	case "start":
		return sc.Startup()
	case "stop":
		return sc.Shutdown()
	case "exec":
		return sc.ExecNowBy(by)
	}
	return fmt.Errorf("fom: unknown action %q (start, stop or exec)", action)
}

// desiredChanged follows a desired state another instance saved.
func (a *App) desiredChanged(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := a.coord.Desired(ctx, []string{name})
	if err != nil {
		a.log.Warn("reading a desired state failed", zap.String("schedule", name), zap.Error(err))
		return
	}
	if running, ok := d[name]; ok {
		a.follow(name, running)
	}
}

// follow brings a schedule to its desired state, once per change.
func (a *App) follow(name string, running bool) {
	a.mu.Lock()
	prev, known := a.desired[name]
	a.desired[name] = running
	up := a.running
	a.mu.Unlock()
	if (known && prev == running) || !up {
		return
	}
	sc := a.Schedule(name)
	if sc == nil {
		return
	}
	var err error
	switch st := sc.State(); {
	case running && st != schedule.Running && st != schedule.Sleeping:
		err = sc.Startup()
	case !running && (st == schedule.Running || st == schedule.Sleeping):
		err = sc.Shutdown()
	}
	if err != nil && !errors.Is(err, schedule.ErrAlreadyStarted) && !errors.Is(err, schedule.ErrStopping) {
		a.log.Warn("following the desired state failed", zap.String("schedule", name), zap.Bool("running", running), zap.Error(err))
	}
}

// ClusterView is what an App on a PostgreSQL store knows of its cluster.
type ClusterView struct {
	Instance  string             `json:"instance"`  // this App's id
	Status    cluster.Status     `json:"status"`    // this App's standing
	Instances []cluster.Instance `json:"instances"` // live ones first
	Owners    map[string]string  `json:"owners"`    // schedule -> instance holding its lease
	// Orphaned are schedules no live instance registered (apps with
	// different job sets on one database, or every instance that had them
	// gone): nothing runs them. They are shown, never dropped.
	Orphaned []string `json:"orphaned"`
}

// Cluster returns the cluster's instances and owners; ok is false when the
// App's store is not shared.
func (a *App) Cluster(ctx context.Context) (v ClusterView, ok bool, err error) {
	if a.coord == nil {
		return v, false, nil
	}
	v.Instance, v.Status = a.coord.ID(), a.coord.Status()
	if v.Instances, err = a.coord.Instances(ctx); err != nil {
		return v, true, err
	}
	all, err := a.coord.AllSchedules(ctx)
	if err != nil {
		return v, true, err
	}
	if v.Owners, err = a.coord.Owners(ctx, all); err != nil {
		return v, true, err
	}
	runnable := map[string]bool{}
	for _, in := range v.Instances {
		for _, s := range in.Schedules {
			runnable[s] = runnable[s] || in.Live
		}
	}
	for _, s := range all {
		if !runnable[s] {
			v.Orphaned = append(v.Orphaned, s)
		}
	}
	return v, true, nil
}

// ClusterCounters returns what this instance's coordinator sent to the
// database; ok is false when the App is not one of a cluster.
func (a *App) ClusterCounters() (c cluster.Counters, ok bool) {
	if a.coord == nil {
		return c, false
	}
	return a.coord.Counters(), true
}

// ClusterDays returns a schedule's daily statistics summed over every
// instance that ran it (the same as its Stats().Days() when the store is
// not shared).
func (a *App) ClusterDays(ctx context.Context, name string) ([]statistics.DaySummary, error) {
	sc := a.Schedule(name)
	if sc == nil {
		return nil, fmt.Errorf("fom: %w: %s", ErrUnknownSchedule, name)
	}
	pg, ok := a.o.store.(*postgres.Store)
	if !ok {
		return sc.Stats().Days(), nil
	}
	set := sc.Stats().Settings()
	today := a.o.clock.Now()
	from := today.AddDate(0, 0, -(set.RetentionDays - 1))
	days, err := pg.LoadClusterDays(ctx, name, from)
	if err != nil {
		return nil, err
	}
	others := days[:0] // this instance's own count live, not as last written
	for _, d := range days {
		if d.Instance != a.coord.ID() {
			others = append(others, d)
		}
	}
	return statistics.MergedDays(sc.Stats(), others, today)
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
	so := schedule.Options{Clock: a.o.clock, Logger: a.o.logger, Conflicts: a.conflicts, Stats: stats, Wheel: a.wheels[len(a.schedules)%len(a.wheels)], Runners: a.runners[len(a.schedules)%len(a.wheels)]}
	if a.coord != nil {
		so.Gate = a.coord
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
	if a.running && cfg.Settings().Enable {
		if err := sc.Startup(); err != nil && !errors.Is(err, schedule.ErrPastDeadTime) {
			return sc, err
		}
	}
	return sc, nil
}

// Start starts every enabled schedule. It does not block. On a PostgreSQL
// store it first joins the cluster and takes this instance's leases.
func (a *App) Start(ctx context.Context) error {
	if _, err := a.store(ctx); err != nil {
		return err
	}
	if a.coord != nil {
		// Leases first, so that the schedules this instance owns run from
		// their first fire.
		if err := a.coord.Start(ctx); err != nil && !errors.Is(err, cluster.ErrStarted) {
			return err
		}
	}
	var desired map[string]bool
	if a.coord != nil {
		d, err := a.coord.Desired(ctx, a.names())
		if err != nil {
			return err
		}
		desired = d
	}
	a.mu.Lock()
	a.running = true
	if a.flushStop == nil {
		a.flushStop, a.flushDone = make(chan struct{}), make(chan struct{})
		// The period counts from Start, not from whenever the loop's
		// goroutine first runs: the ticker is made here.
		go a.flushLoop(a.o.clock.NewTicker(a.flushEvery()), a.flushStop, a.flushDone)
	}
	var errs []error
	for _, sc := range a.schedules {
		run, ok := desired[sc.Name()] // an operator's start or stop in the cluster outlives restarts
		if ok {
			a.desired[sc.Name()] = run
		} else {
			run = sc.Config().Current().Enable
		}
		if !run {
			a.log.Info("not started", zap.String("schedule", sc.Name()), zap.Bool("stoppedByOperator", ok))
			continue
		}
		// A deadTime already past leaves the schedule STOPPED with its
		// reason (Info.StopReason, logged): a campaign that ended is no
		// reason for the app not to start.
		if err := sc.Startup(); err != nil && !errors.Is(err, schedule.ErrAlreadyStarted) && !errors.Is(err, schedule.ErrPastDeadTime) {
			errs = append(errs, err)
		}
	}
	a.mu.Unlock()
	a.resumeMissed()
	return errors.Join(errs...)
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
	a.mu.Unlock()
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
	if a.coord != nil { // every schedule stopped: give the leases back
		if err := a.coord.Stop(context.WithoutCancel(ctx)); err != nil {
			errs = append(errs, err)
		}
	}
	a.mu.Lock()
	stop, done := a.flushStop, a.flushDone
	a.flushStop, a.flushDone = nil, nil
	a.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
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

// flushEvery is how often statistics are written.
func (a *App) flushEvery() time.Duration {
	if a.o.flushEvery > 0 {
		return a.o.flushEvery
	}
	return flushInterval
}

// flushLoop writes statistics on every tick of t until stop is closed,
// then stops t.
func (a *App) flushLoop(t clockwork.Ticker, stop, done chan struct{}) {
	defer close(done)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.Chan():
			if err := a.flush(context.Background(), a.flushEvery()); err != nil {
				a.log.Warn("statistics flush failed; will retry", zap.Error(err))
			}
		}
	}
}

// FlushStats writes every schedule's statistics to the store now, as the
// app does every 5 s and at Stop.
func (a *App) FlushStats(ctx context.Context) error {
	return a.flush(ctx, flushInterval)
}

// flush writes every schedule's pending statistics, each transaction
// within per; what fails to be written is kept for the next flush.
func (a *App) flush(ctx context.Context, per time.Duration) error {
	a.flushMu.Lock()
	defer a.flushMu.Unlock()
	a.mu.Lock()
	st := a.st
	scs := append([]*ScheduleContext(nil), a.schedules...)
	a.mu.Unlock()
	if st == nil {
		return nil
	}
	var errs []error
	chunk, batch := a.flushChunk[:0], a.flushBatch
	a.flushes++
	batch.Flush = a.flushes
	taken := a.flushTaken.Value()
	if taken == nil || cap(*taken) < len(scs) {
		taken = &[]statistics.Changes{}
		*taken = make([]statistics.Changes, len(scs))
	}
	slab := (*taken)[:len(scs)]
	defer func() {
		for i := range slab {
			slab[i].Reset() // what they held goes, their encodings' room stays
		}
		a.flushTaken = weak.Make(taken)
	}()
	var byCount []store.Retention // schedules that wrote failures
	yieldUntil := time.Now().Add(flushYield)
	write := func() {
		if len(chunk) == 0 {
			return
		}
		a.yieldToRounds(yieldUntil)
		wctx, cancel := context.WithTimeout(ctx, per)
		err := st.SaveStats(wctx, batch)
		cancel()
		for _, ch := range chunk {
			if err != nil {
				ch.Failed()
			} else {
				ch.Done()
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("save statistics of %d schedules: %w", len(chunk), err))
		}
		// Emptied, not dropped, for the next chunk and flush; cleared, so
		// that they hold no data until then.
		clear(chunk)
		clear(batch.Days)
		clear(batch.Failures)
		clear(batch.Rounds)
		chunk = chunk[:0]
		batch = store.StatsBatch{Days: batch.Days[:0], Failures: batch.Failures[:0], Rounds: batch.Rounds[:0], Flush: batch.Flush}
	}
	for i, sc := range scs {
		if i%yieldEvery == 0 {
			a.yieldToRounds(yieldUntil)
		}
		ch := &slab[i]
		sc.Stats().TakeInto(ch)
		if ch.Empty() {
			continue
		}
		chunk = append(chunk, ch)
		if len(ch.Failures) > 0 {
			r := sc.Stats().Retention()
			r.Before, r.KeepRounds = time.Time{}, 0 // rounds are bounded by their slots
			byCount = append(byCount, r)
		}
		batch.Days = append(batch.Days, ch.Days...)
		batch.Failures = append(batch.Failures, ch.Failures...)
		batch.Rounds = append(batch.Rounds, ch.Rounds...)
		if len(batch.Days)+len(batch.Failures)+len(batch.Rounds) >= a.flushRows {
			write()
		}
	}
	write()
	a.flushChunk, a.flushBatch = chunk, batch
	rules := byCount
	now := a.o.clock.Now()
	byAge := a.lastPrune.IsZero() || now.Sub(a.lastPrune) >= pruneInterval
	if byAge {
		rules = make([]store.Retention, len(scs))
		for i, sc := range scs {
			rules[i] = sc.Stats().Retention()
		}
	}
	if len(rules) > 0 {
		pctx, cancel := context.WithTimeout(ctx, per)
		err := st.Prune(pctx, rules)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("apply statistics retention: %w", err))
		} else if byAge {
			a.lastPrune = now
		}
	}
	return errors.Join(errs...)
}

// yieldToRounds pauses a flush while rounds wait for a runner, until
// until at the latest.
func (a *App) yieldToRounds(until time.Time) { yieldWhile(a.roundsQueued, until, a.yielding) }

// yieldWhile sleeps a step at a time while busy holds, until until at the
// latest, calling yielding (if set) before each step.
func yieldWhile(busy func() bool, until time.Time, yielding func()) {
	for busy() && time.Now().Before(until) {
		if yielding != nil {
			yielding()
		}
		time.Sleep(flushYieldStep)
	}
}

// roundsQueued reports whether rounds wait for a runner.
func (a *App) roundsQueued() bool {
	for _, rs := range a.runners {
		if rs.Queued() > 0 {
			return true
		}
	}
	return false
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
