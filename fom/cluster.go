package fom

// Cluster wiring: what an App on a PostgreSQL store does for its
// coordinator (leases taken, edits and desired states saved elsewhere,
// actions forwarded to the owner) and what it shows of the cluster.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/fom-go/fom/cluster"
	"github.com/fom-go/fom/config"
	"github.com/fom-go/fom/internal/clockx"
	"github.com/fom-go/fom/schedule"
	"github.com/fom-go/fom/statistics"
	"github.com/fom-go/fom/store"
)

// acquired continues a schedule whose lease this instance just took from
// the last fire the cluster recorded (a schedule not started yet does so
// when it starts), or, with none recorded, from its next fire: a copy
// parked while another instance held the lease is armed again.
func (a *App) acquired(name string, last time.Time) {
	if last.IsZero() {
		if sc := a.Schedule(name); sc != nil {
			sc.Unpark()
		}
		return
	}
	// Under the App's lock, which Start holds while it starts the
	// schedules, those noted here from their last fire: a schedule is
	// resumed now (started), or noted before Start comes to it (not
	// started yet), never noted after Start started it (it would run its
	// next fire, and a late resume run it again).
	a.mu.Lock()
	defer a.mu.Unlock()
	sc := a.byName[name]
	if sc != nil && sc.Resume(last, sc.Config().Current().Misfire != config.MisfireSkip) {
		return
	}
	if a.noting { // once started, a schedule not running runs from its next start
		a.missed[name] = last
	}
}

// clusterStore is a store the instances of an App share (store/postgres):
// it builds the App's part in the cluster, and reads what every instance
// wrote. The App finds it by these methods, so that an App on another
// store links none of the cluster.
type clusterStore interface {
	store.Store
	Coordinate(o cluster.Options) (cluster.Coordinator, error)
	LoadConfig(ctx context.Context, schedule string) (map[string]string, error)
	LoadConfigs(ctx context.Context, schedules []string) (map[string]map[string]string, error)
	LoadSettings(ctx context.Context, key string, schedules []string) (map[string]string, error)
	LoadClusterDays(ctx context.Context, schedule string, from time.Time) ([]store.Day, error)
	LoadClusterDaysOf(ctx context.Context, schedules []string, from time.Time) (map[string][]store.Day, error)
}

// notified applies an edit another instance saved: a schedule's config
// edits or its settings (log level, statistics settings).
func (a *App) notified(payload string) {
	pg, _ := a.o.store.(clusterStore)
	kind, name := "", ""
	for _, k := range []string{cluster.NotifyConfig, cluster.NotifySettings} {
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
	case cluster.NotifyConfig:
		edits, err := pg.LoadConfig(ctx, name)
		if err != nil {
			a.log.Warn("reloading an edit saved elsewhere failed", zap.String("schedule", name), zap.Error(err))
			return
		}
		a.reload(sc, edits)
	case cluster.NotifySettings:
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
	pg, _ := a.o.store.(clusterStore)
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
	a.checkDeclarations(ctx)
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
		if !sc.Config().HasEdits(edits) {
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
// back as errors. A ScheduleContext's Startup, Shutdown and ExecNow do
// the same, on any instance.
func (a *App) Act(ctx context.Context, name, action string) error {
	return a.control(ctx, name, action, schedule.ActorOf(ctx))
}

// appControl is the schedule.Control of an App's schedules on a shared
// store: their Startup, Shutdown and ExecNow act on the cluster.
type appControl struct{ a *App }

func (c appControl) Control(name, action, by string) error {
	ctx, cancel := context.WithTimeout(context.Background(), controlTimeout)
	defer cancel()
	return c.a.control(ctx, name, action, by)
}

// controlTimeout bounds an action asked through a ScheduleContext, which
// has no context of its own: the lease TTL bounds a forwarded exec-now
// within it.
const controlTimeout = time.Minute

func (a *App) control(ctx context.Context, name, action, by string) error {
	if a.Schedule(name) == nil {
		return fmt.Errorf("fom: %w: %s", ErrUnknownSchedule, name)
	}
	if a.coord == nil {
		return a.actHere(name, action, by)
	}
	switch action {
	case schedule.ActionStart, schedule.ActionStop:
		return a.setDesired(ctx, name, action == schedule.ActionStart, by)
	case schedule.ActionExec:
		if a.coord.Owner(name) {
			return a.actHere(name, action, by)
		}
		running, err := a.desiredOf(ctx, name)
		if err != nil {
			return err
		}
		if !running { // stopped on every instance: nobody would answer
			return &schedule.Error{Schedule: name, Err: schedule.ErrNotStarted}
		}
		return a.coord.Forward(ctx, name, action, by)
	}
	return fmt.Errorf("fom: unknown action %q (start, stop or exec)", action)
}

// setDesired starts or stops a schedule on every instance: its desired
// state in the database, which every instance follows, and this instance's
// copy at once. Asked for the state it already has, the copy's refusal
// (ErrAlreadyStarted, ErrAlreadyStopped) is the answer.
func (a *App) setDesired(ctx context.Context, name string, running bool, by string) error {
	action := schedule.ActionStop
	if running {
		action = schedule.ActionStart
	}
	was, err := a.desiredOf(ctx, name)
	if err != nil {
		return err
	}
	if was == running {
		// The cluster already wants it so: this copy is brought in step,
		// or refuses as a single process would.
		return a.actHere(name, action, by)
	}
	if err := a.coord.SetDesired(ctx, name, running); err != nil {
		return err
	}
	a.mu.Lock()
	a.desired[name] = running
	a.mu.Unlock()
	err = a.actHere(name, action, by)
	// This instance's own listener may have heard the change first and
	// begun following it (a stop under way): the action took place.
	if errors.Is(err, schedule.ErrAlreadyStarted) || errors.Is(err, schedule.ErrAlreadyStopped) || errors.Is(err, schedule.ErrNotStarted) ||
		!running && errors.Is(err, schedule.ErrStopping) {
		err = nil
	}
	a.coord.Kick() // take or give back the lease now, not at the next renewal
	return err
}

// desiredOf is whether the cluster wants name to run: its desired state
// in the database, else its enable key.
func (a *App) desiredOf(ctx context.Context, name string) (bool, error) {
	d, err := a.coord.Desired(ctx, []string{name})
	if err != nil {
		return false, err
	}
	if running, ok := d[name]; ok {
		return running, nil
	}
	sc := a.Schedule(name)
	return sc != nil && sc.Config().Current().Enable, nil
}

// wants tells the coordinator which of names this instance would run
// now: those whose desired state (as last read, else their enable key) is
// running and whose copy here has not stopped by itself (a deadTime
// past). No instance holds the lease of a schedule it would not run.
func (a *App) wants(names []string) []string {
	type asked struct {
		sc             *ScheduleContext
		running, known bool
	}
	as := make([]asked, len(names))
	a.mu.Lock()
	for i, n := range names {
		as[i].sc = a.byName[n]
		as[i].running, as[i].known = a.desired[n]
	}
	a.mu.Unlock()
	out := make([]string, 0, len(names))
	for i, x := range as {
		if x.sc == nil {
			continue
		}
		if !x.known {
			x.running = x.sc.Config().Current().Enable
		}
		if st := x.sc.State(); x.running && st != schedule.Stopped && st != schedule.Stopping {
			out = append(out, names[i])
		}
	}
	return out
}

// actHere carries out an action on this instance's copy of the schedule,
// on behalf of by.
func (a *App) actHere(name, action, by string) error {
	sc := a.Schedule(name)
	if sc == nil {
		return fmt.Errorf("fom: %w: %s", ErrUnknownSchedule, name)
	}
	switch action {
	case schedule.ActionStart:
		return sc.StartupHere()
	case schedule.ActionStop:
		return sc.ShutdownHere()
	case schedule.ActionExec:
		return sc.ExecNowHere(by)
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
		err = sc.StartupHere()
	case !running && (st == schedule.Running || st == schedule.Sleeping):
		err = sc.ShutdownHere()
	}
	if err != nil && !errors.Is(err, schedule.ErrAlreadyStarted) && !errors.Is(err, schedule.ErrStopping) && !errors.Is(err, schedule.ErrPastDeadTime) {
		a.log.Warn("following the desired state failed", zap.String("schedule", name), zap.Bool("running", running), zap.Error(err))
	}
	a.coord.Kick()
}

// declarationOf is a schedule's code declaration: each key's code default.
func declarationOf(sc *ScheduleContext) map[string]string {
	return sc.Config().CodeDefaults()
}

// declare records this instance's code declaration of its schedules, in
// place of what it recorded before, and logs how live instances disagree.
func (a *App) declare(ctx context.Context) {
	scs := a.Schedules()
	// Made once the write fits, in the calm part of a second as the write
	// (a collection their allocation sets off runs there too).
	a.awaitCalm(ctx, time.Duration(len(scs))*bulkPerSchedule)
	decls := make(map[string]map[string]string, len(scs))
	for _, sc := range scs {
		decls[sc.Name()] = declarationOf(sc)
	}
	if err := a.coord.Declare(ctx, decls, true); err != nil {
		a.log.Warn("recording this instance's declarations failed", zap.Error(err))
		return
	}
	a.checkDeclarations(ctx)
}

// checkDeclarations logs the schedules that live instances declare
// differently, once per change of what differs.
func (a *App) checkDeclarations(ctx context.Context) {
	ds, err := a.coord.Disagreements(ctx)
	if err != nil {
		a.log.Warn("comparing the instances' declarations failed", zap.Error(err))
		return
	}
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(d.String())
		b.WriteByte('\n')
	}
	a.mu.Lock()
	changed := a.disagree != b.String()
	a.disagree = b.String()
	a.mu.Unlock()
	if !changed {
		return
	}
	for _, d := range ds {
		a.log.Warn(d.String()+"; the instance holding the lease runs its own, and operator edits saved in the database override every instance's",
			zap.String("schedule", d.Schedule), zap.Strings("keys", d.Keys))
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
	// Disagreements are schedules live instances declare differently
	// (different code: a rolling deploy), each with its variants.
	Disagreements []cluster.Disagreement `json:"disagreements"`
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
	if v.Disagreements, err = a.coord.Disagreements(ctx); err != nil {
		return v, true, err
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
	pg, ok := a.o.store.(clusterStore)
	if !ok {
		return sc.Stats().Days(), nil
	}
	today := a.o.clock.Now()
	days, err := pg.LoadClusterDays(ctx, name, a.retentionFrom(sc, today))
	if err != nil {
		return nil, err
	}
	return a.mergedDays(sc, days, today)
}

// retentionFrom is the first day a schedule's statistics keep.
func (a *App) retentionFrom(sc *ScheduleContext, today time.Time) time.Time {
	return today.AddDate(0, 0, -(sc.Stats().Settings().RetentionDays - 1))
}

// mergedDays sums days every instance stored with this instance's own,
// counted live rather than as last written.
func (a *App) mergedDays(sc *ScheduleContext, days []store.Day, today time.Time) ([]statistics.DaySummary, error) {
	others := days[:0]
	for _, d := range days {
		if d.Instance != a.coord.ID() {
			others = append(others, d)
		}
	}
	return statistics.MergedDays(sc.Stats(), others, today)
}

// Leases returns the leases of schedules as the cluster knows them (owner,
// its standing, when another instance takes over, the last fire
// recorded); ok is false when the App is not one of a cluster.
func (a *App) Leases(ctx context.Context, names []string) (l map[string]cluster.Lease, ok bool, err error) {
	if a.coord == nil {
		return nil, false, nil
	}
	l, err = a.coord.Leases(ctx, names)
	return l, true, err
}

// ClusterTotals are a schedule's rounds and task outcomes over its
// statistics' retention window, summed over every instance.
type ClusterTotals struct {
	Rounds, Tasks, Success int64
}

// ClusterTotals sums each named schedule's days over every instance (as
// ClusterDays does), reading the store once for all of them; ok is false
// when the App is not one of a cluster.
func (a *App) ClusterTotals(ctx context.Context, names []string) (totals map[string]ClusterTotals, ok bool, err error) {
	pg, isPG := a.o.store.(clusterStore)
	if a.coord == nil || !isPG {
		return nil, false, nil
	}
	today := a.o.clock.Now()
	var scs []*ScheduleContext
	from := today
	for _, n := range names {
		if sc := a.Schedule(n); sc != nil {
			scs = append(scs, sc)
			if f := a.retentionFrom(sc, today); f.Before(from) {
				from = f
			}
		}
	}
	byName, err := pg.LoadClusterDaysOf(ctx, names, from)
	if err != nil {
		return nil, true, err
	}
	totals = make(map[string]ClusterTotals, len(scs))
	for _, sc := range scs {
		days, err := a.mergedDays(sc, byName[sc.Name()], today)
		if err != nil {
			return nil, true, err
		}
		var t ClusterTotals
		for _, d := range days {
			t.Rounds += d.Rounds
			t.Tasks += d.Count
			t.Success += d.ByStatus["success"]
		}
		totals[sc.Name()] = t
	}
	return totals, true, nil
}

// bulkPerSchedule is what a bulk write of fom's own costs a schedule,
// under the load of an aligned burst on two CPUs: 10 000 declarations
// took 354 ms in one transaction, 3 333 schedules' last statistics about
// 100 ms (the cluster benchmark).
const bulkPerSchedule = 35 * time.Microsecond

// handoverPerLease is what handing a lease over costs at a graceful stop,
// from the drain to the taker's first fire recorded: for 3 333 leases
// under an aligned burst's load on two CPUs, the giver's statement took
// 56–138 ms, each taker's read 12–90 ms, resuming the schedules 6–50 ms
// and recording their fires 6–40 ms (the cluster benchmark's stop row).
const handoverPerLease = 100 * time.Microsecond

// awaitCalm holds a clustered App's bulk work (its cluster work at start,
// declarations included; at stop, the handover of its leases and its last
// flush) until work fits between two whole seconds (clockx.UntilCalm), or
// until ctx ends. The other instances' aligned bursts fall on whole
// seconds, and such work on one made it late: the cluster benchmark's join
// and stop rows, tens of milliseconds at p99. A handover begun just before
// a whole second made the fires of the schedules it moved late: the takers
// were still taking them; begun after the burst, the stopping instance runs
// that second's fires itself, and the takers have the rest of the second.
// Alone, an App works at once: nothing else fires while it starts or stops.
func (a *App) awaitCalm(ctx context.Context, work time.Duration) {
	d := clockx.UntilCalm(a.o.clock.Now(), work)
	if d <= 0 {
		return
	}
	select {
	case <-a.o.clock.After(d):
	case <-ctx.Done():
	}
}
