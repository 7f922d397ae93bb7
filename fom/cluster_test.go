package fom

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"
	"go.uber.org/zap/zapcore"

	"github.com/fom-go/fom/internal/pgtest"
	"github.com/fom-go/fom/store/postgres"
)

// fireLog records every round any instance ran, by (schedule, planned).
type fireLog struct {
	mu   sync.Mutex
	runs map[string]map[time.Time][]string // schedule -> planned -> instances
}

func newFireLog() *fireLog { return &fireLog{runs: map[string]map[time.Time][]string{}} }

func (l *fireLog) add(schedule string, planned time.Time, instance string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.runs[schedule] == nil {
		l.runs[schedule] = map[time.Time][]string{}
	}
	p := planned.Round(0).UTC()
	l.runs[schedule][p] = append(l.runs[schedule][p], instance)
}

// check fails on a fire run twice, and for every-second cron schedules on a
// whole second in [from, to) that no instance ran, beyond `coalesced` per
// schedule: fires missed while no instance held the lease run as one
// catch-up round (planned at the first of them), never as a burst.
func (l *fireLog) check(t *testing.T, from, to time.Time, coalesced int) (fires int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for s, byPlanned := range l.runs {
		for p, insts := range byPlanned {
			if len(insts) > 1 {
				t.Errorf("%s fire %s ran %d times: %v", s, p.Format("15:04:05.000"), len(insts), insts)
			}
			fires++
		}
		if len(s) < 4 || s[:4] != "cron" {
			continue
		}
		var missing []string
		for sec := from.Truncate(time.Second).Add(time.Second); sec.Before(to); sec = sec.Add(time.Second) {
			if len(byPlanned[sec.UTC()]) == 0 {
				missing = append(missing, sec.Format("15:04:05"))
			}
		}
		if len(missing) > coalesced {
			var got []string
			for p := range byPlanned {
				got = append(got, p.Format("15:04:05"))
			}
			sort.Strings(got)
			t.Errorf("%s: no instance ran the fires of %v (ran %v)", s, missing, got)
		}
	}
	return fires
}

// everySecond is n every-second cron schedules, cron-0, cron-1, ...
func everySecond(n int) map[string]map[string]string {
	jobs := map[string]map[string]string{}
	for i := range n {
		jobs[fmt.Sprintf("cron-%d", i)] = map[string]string{"cron": "* * * * * *"}
	}
	return jobs
}

// clusterJob runs every second and logs which instance ran which fire.
type clusterJob struct {
	Schedule
	log      *fireLog
	instance string
}

func (*clusterJob) Run(context.Context) (any, error) { return nil, nil }

func (j *clusterJob) OnComplete(ctx context.Context, r Round) {
	j.log.add(FromContext(ctx).Name(), r.Planned, j.instance)
}

// startInstance starts an App on the shared schema with the given jobs,
// its leases lasting 1.5 s.
func startInstance(t *testing.T, schema, id string, log *fireLog, jobs map[string]map[string]string) *App {
	t.Helper()
	return startInstanceTTL(t, schema, id, log, jobs, 1500*time.Millisecond)
}

// startInstanceTTL is startInstance with leases lasting ttl.
func startInstanceTTL(t *testing.T, schema, id string, log *fireLog, jobs map[string]map[string]string, ttl time.Duration) *App {
	t.Helper()
	app, err := New(WithStore(storeOn(t, schema)), WithInstanceID(id), WithLeaseTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	stopAtCleanup(t, app)
	names := make([]string, 0, len(jobs))
	for n := range jobs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		sc, err := app.Register(&clusterJob{log: log, instance: id}, Named(name))
		if err != nil {
			t.Fatal(err)
		}
		if err := sc.Config().Apply(jobs[name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return app
}

// storeOn opens a PostgreSQL store on schema, closed at the test's end.
func storeOn(t *testing.T, schema string) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), pgtest.DSN(), postgres.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// startInstances starts n instances named prefix1, prefix2, ...
func startInstances(t *testing.T, schema, prefix string, n int, log *fireLog, jobs map[string]map[string]string) []*App {
	t.Helper()
	return startInstancesTTL(t, schema, prefix, n, log, jobs, 1500*time.Millisecond)
}

// startInstancesTTL is startInstances with leases lasting ttl.
func startInstancesTTL(t *testing.T, schema, prefix string, n int, log *fireLog, jobs map[string]map[string]string, ttl time.Duration) []*App {
	t.Helper()
	apps := make([]*App, n)
	for i := range apps {
		apps[i] = startInstanceTTL(t, schema, fmt.Sprintf("%s%d", prefix, i+1), log, jobs, ttl)
	}
	return apps
}

// waitListening waits until every instance hears notifications.
func waitListening(t *testing.T, apps []*App) {
	t.Helper()
	for _, a := range apps {
		for deadline := time.Now().Add(5 * time.Second); !a.coord.Listening(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s is not listening", a.InstanceID())
			}
		}
	}
}

// stopAtCleanup stops app when t ends, before the store it was opened
// on is closed (cleanups run last first): a test that fails before it
// stops an instance must not leave the store's Close waiting for the
// connections the running instance holds.
func stopAtCleanup(t *testing.T, app *App) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		app.Stop(ctx)
	})
}

func stopInstance(t *testing.T, app *App) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := app.Stop(ctx); err != nil {
		t.Error(err)
	}
}

// stopAndCheck notes the leases each instance holds, stops them, and
// checks the fires from from to a moment ago (fires still under way are
// not judged): none twice, no every-second fire missing.
func stopAndCheck(t *testing.T, apps []*App, log *fireLog, from time.Time) (fires int, owned []int) {
	t.Helper()
	to := time.Now().Add(-1500 * time.Millisecond)
	for _, a := range apps {
		owned = append(owned, a.coord.Owned())
	}
	for _, a := range apps {
		stopInstance(t, a)
	}
	return log.check(t, from, to, 0), owned
}

// TestClusterRunsEachFireOnce: three instances on one database, 51
// schedules of every plan kind, 20 seconds: no fire runs twice, no
// every-second cron fire is lost (leases handed over while rebalancing
// included), and the leases end up spread.
func TestClusterRunsEachFireOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs for several seconds")
	}
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	jobs := map[string]map[string]string{}
	for i := range 17 {
		jobs[fmt.Sprintf("cron-%d", i)] = map[string]string{"cron": "* * * * * *"}
		jobs[fmt.Sprintf("rate-%d", i)] = map[string]string{"fixedRate": "1s"}
		jobs[fmt.Sprintf("delay-%d", i)] = map[string]string{"fixedDelay": "500ms"}
	}
	log := newFireLog()
	// Leases of 3 s: an instance refuses its fires while it cannot
	// confirm them (renewed every TTL/3, trusted until TTL less a fifth
	// after a renewal was sent), and a record statement waits at most
	// TTL/3. With 1.5 s, a stall of under a second (a loaded machine
	// under the race detector) can cost an instance one second's fires,
	// and once did: by design, but not what this test is about.
	apps := startInstancesTTL(t, schema, "i", 3, log, jobs, 3*time.Second)
	from := time.Now()
	time.Sleep(20 * time.Second)
	fires, owned := stopAndCheck(t, apps, log, from)
	t.Logf("%d fires in 20 s on 3 instances, leases held at the end: %v", fires, owned)
	for i, n := range owned {
		if n < 15 || n > 19 {
			t.Errorf("instance %d holds %d of 51 leases: not spread (%v)", i+1, n, owned)
		}
	}
}

// TestClusterRollingRestart: three instances with 90 every-second
// schedules (enough that each instance records a second's fires ahead,
// in one statement), restarted one after the other as a rolling deploy
// does (a graceful stop, then a new instance): every fire of every second
// runs once, none missed or folded into a catch-up round, though the
// leases move at each stop and each start.
func TestClusterRollingRestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs for twenty seconds")
	}
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	jobs := everySecond(90)
	log := newFireLog()
	apps := startInstancesTTL(t, schema, "i", 3, log, jobs, 3*time.Second)
	waitListening(t, apps)
	from := time.Now()
	for i := range apps {
		time.Sleep(3 * time.Second)
		stopInstance(t, apps[i])
		apps[i] = startInstanceTTL(t, schema, fmt.Sprintf("i%d-new", i+1), log, jobs, 3*time.Second)
		waitListening(t, apps[i:i+1])
	}
	time.Sleep(6 * time.Second) // the new instances' share comes at the others' next renewal
	fires, owned := stopAndCheck(t, apps, log, from)
	t.Logf("%d fires over three restarts, leases held at the end: %v", fires, owned)
	for i, n := range owned {
		if n == 0 {
			t.Errorf("instance %d holds no lease after the restarts (%v)", i+1, owned)
		}
	}
}

// TestClusterGracefulStopHandsTheLeasesOverAtOnce: an instance stopped
// gracefully hands its leases over before it stops its schedules, and
// tells the other, which takes them at once (not at its next renewal,
// seconds later with the default lease): no every-second fire is missed
// or folded.
func TestClusterGracefulStopHandsTheLeasesOverAtOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs for several seconds")
	}
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	jobs := everySecond(20)
	log := newFireLog()
	const ttl = 15 * time.Second // renewals every 5 s: they do not hand the leases over in time
	a := startInstanceTTL(t, schema, "stops", log, jobs, ttl)
	b := startInstanceTTL(t, schema, "stays", log, jobs, ttl)
	waitListening(t, []*App{a, b})
	for deadline := time.Now().Add(10 * time.Second); a.coord.Owned() == 0 || b.coord.Owned() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("leases not spread: %d and %d", a.coord.Owned(), b.coord.Owned())
		}
	}
	from := time.Now()
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1300 * time.Millisecond)))
	held := a.coord.Owned()
	stopped := time.Now()
	stopInstance(t, a)
	for deadline := time.Now().Add(3 * time.Second); b.coord.Owned() < len(jobs); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the other instance holds %d of %d leases %s after the stop", b.coord.Owned(), len(jobs), time.Since(stopped))
		}
	}
	took := time.Since(stopped)
	time.Sleep(3 * time.Second)
	fires, _ := stopAndCheck(t, []*App{b}, log, from)
	t.Logf("the stopped instance held %d leases; the other held all %s after the stop began; %d fires", held, took.Round(time.Millisecond), fires)
}

// hourlyOnAFakeClock is an App of instance id in a schema of its own, on a
// fake clock at at, with one hourly schedule registered, not started.
func hourlyOnAFakeClock(t *testing.T, id string, at time.Time) (*pgxpool.Pool, string, *clockwork.FakeClock, *App) {
	t.Helper()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	clk := clockwork.NewFakeClockAt(at)
	app, err := New(WithStore(storeOn(t, schema)), WithInstanceID(id), WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := app.Register(&clusterJob{log: newFireLog(), instance: id}, Named("hourly"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Config().Apply(map[string]string{"cron": "0 0 * * * *"}); err != nil {
		t.Fatal(err)
	}
	return pool, schema, clk, app
}

// returned is what a call, which sends it on ch, returned once the fake
// clock clk has let it go; the test fails, naming what and clk's time, if
// it still waits 10 s later.
func returned(t *testing.T, clk *clockwork.FakeClock, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still waits at %s", what, clk.Now().Format("15:04:05.000"))
		return nil
	}
}

// TestAGracefulStopHandsOverInTheCalmPartOfASecond: a clustered App
// asked to stop just before a whole second, where cron's aligned fires
// fall, keeps its leases (and runs that second's fires itself) until the
// handover fits before the next one; its clock is a fake, so nothing but
// the clock's advance lets it go.
func TestAGracefulStopHandsOverInTheCalmPartOfASecond(t *testing.T) {
	t.Parallel()
	pool, schema, clk, app := hourlyOnAFakeClock(t, "calm", time.Date(2026, 3, 2, 10, 0, 0, 300_000_000, time.UTC))
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); app.coord.Owned() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the lease was not taken")
		}
	}
	clk.Advance(650 * time.Millisecond) // 10:00:00.950
	stopped := make(chan error, 1)
	go func() { stopped <- app.Stop(context.Background()) }()
	marked := func() bool {
		t.Helper()
		var b bool
		if err := pool.QueryRow(context.Background(), "SELECT stopped FROM "+schema+".instances WHERE id = 'calm'").Scan(&b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if marked() || app.coord.Owned() == 0 {
			t.Fatal("the stop handed its lease over at 10:00:00.950, just before a whole second")
		}
	}
	clk.Advance(200 * time.Millisecond) // 10:00:01.150
	if err := returned(t, clk, stopped, "the stop"); err != nil {
		t.Fatal(err)
	}
	if !marked() {
		t.Fatal("the instance was not marked stopped")
	}
}

// TestAStartingInstanceJoinsInTheCalmPartOfASecond: a clustered App
// started just before a whole second, where the other instances' aligned
// fires fall, begins its cluster work (its instance row, its leases, its
// declarations) only in the calm part of the next one; its clock is a
// fake, so nothing but the clock's advance lets it go.
func TestAStartingInstanceJoinsInTheCalmPartOfASecond(t *testing.T) {
	t.Parallel()
	pool, schema, clk, app := hourlyOnAFakeClock(t, "joins", time.Date(2026, 3, 2, 10, 0, 0, 950_000_000, time.UTC))
	started := make(chan error, 1)
	go func() { started <- app.Start(context.Background()) }()
	var startErr error
	t.Cleanup(func() {
		for started != nil { // failed before the start returned: let it
			select {
			case startErr = <-started:
				started = nil
			case <-time.After(50 * time.Millisecond):
				clk.Advance(time.Second)
			}
		}
		// The stop hands the lease over in a calm part too: 0.15 s into
		// the next second.
		now := clk.Now()
		clk.Advance(now.Truncate(time.Second).Add(1150 * time.Millisecond).Sub(now))
		app.Stop(context.Background())
	})
	joined := func() bool {
		t.Helper()
		var n int
		if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+schema+".instances WHERE id = 'joins'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if joined() {
			t.Fatal("the instance joined at 10:00:00.950, just before a whole second")
		}
	}
	clk.Advance(200 * time.Millisecond) // 10:00:01.150
	startErr = returned(t, clk, started, "the start")
	started = nil
	if startErr != nil {
		t.Fatal(startErr)
	}
	if !joined() {
		t.Fatal("started, and no instance row")
	}
}

// TestClusterFailover: an instance vanishes without giving its leases back
// (a crash): the survivors take its schedules after the lease TTL, run the
// fires missed meanwhile once, and never twice.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs for several seconds")
	}
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	jobs := everySecond(6)
	log := newFireLog()
	a1 := startInstance(t, schema, "crashes", log, jobs)
	a2 := startInstance(t, schema, "survives", log, jobs)
	from := time.Now()
	deadline := time.Now().Add(5 * time.Second)
	for a1.coord.Owned() == 0 || a2.coord.Owned() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("leases not spread: %d and %d", a1.coord.Owned(), a2.coord.Owned())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond)
	crashedWith := a1.coord.Owned()
	a1.coord.Abandon()  // no heartbeat, leases left to expire
	stopInstance(t, a1) // its schedules stop; the leases are not given back
	crashed := time.Now()
	deadline = time.Now().Add(5 * time.Second)
	for a2.coord.Owned() < 6 {
		if time.Now().After(deadline) {
			t.Fatalf("the survivor holds %d of 6 leases %s after the crash", a2.coord.Owned(), time.Since(crashed))
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(crashed)
	time.Sleep(2 * time.Second)
	to := time.Now().Add(-1500 * time.Millisecond)
	stopInstance(t, a2)
	// The lease outlives the crash by up to its TTL: up to two fires fall in
	// the gap; the first runs at the takeover, the second is folded into it.
	fires := log.check(t, from, to, 1)
	t.Logf("crashed instance held %d leases; the survivor held all 6 after %s; %d fires", crashedWith, took.Round(time.Millisecond), fires)
	// The lease TTL plus a renewal, with room for a loaded machine.
	if took > 1500*time.Millisecond+500*time.Millisecond+1500*time.Millisecond {
		t.Errorf("takeover took %s, more than the lease TTL plus a renewal", took)
	}
}

// TestClusterEditReachesEveryInstance: a config edit or a log level saved
// on one instance is in force on the others within a second (LISTEN/
// NOTIFY), and a change that came without a notification is picked up by
// the periodic re-read.
func TestClusterEditReachesEveryInstance(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	jobs := map[string]map[string]string{"hourly": {"cron": "0 0 * * * *"}}
	log := newFireLog()
	apps := startInstances(t, schema, "e", 3, log, jobs)
	defer func() {
		for _, a := range apps {
			stopInstance(t, a)
		}
	}()
	waitListening(t, apps) // before the edit
	start := time.Now()
	if err := apps[0].Schedule("hourly").Config().Apply(map[string]string{"threadMax": "3", "remark": "edited on e1"}); err != nil {
		t.Fatal(err)
	}
	if err := apps[0].Schedule("hourly").SetLogLevel(zapcore.WarnLevel); err != nil {
		t.Fatal(err)
	}
	for _, a := range apps[1:] {
		sc := a.Schedule("hourly")
		for sc.Config().Get("remark") != "edited on e1" || sc.Config().Get("threadMax") != "3" || sc.LogLevel() != zapcore.WarnLevel {
			if time.Since(start) > time.Second {
				t.Fatalf("%s: edit not in force after 1s: %v, level %s", a.InstanceID(), sc.Config().Values(), sc.LogLevel())
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	t.Logf("edit and log level in force on every instance after %s", time.Since(start).Round(time.Millisecond))

	// Written behind fom's back, no notification: the next re-read applies it.
	if _, err := pool.Exec(context.Background(), "UPDATE "+schema+".config_edits SET value = 'fixed by hand' WHERE schedule = 'hourly' AND key = 'remark'"); err != nil {
		t.Fatal(err)
	}
	apps[2].resync(context.Background())
	if got := apps[2].Schedule("hourly").Config().Get("remark"); got != "fixed by hand" {
		t.Fatalf("re-read: remark %q", got)
	}
}

// TestClusterControlFromAnyInstance: exec-now asked of an instance that
// does not own the schedule runs on the owner; stop and start asked of
// any instance reach every instance, and a stop outlives a restart of
// every instance.
func TestClusterControlFromAnyInstance(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	jobs := map[string]map[string]string{"hourly": {"cron": "0 0 * * * *"}}
	log := newFireLog()
	apps := startInstances(t, schema, "c", 3, log, jobs)
	var owner, other *App
	for deadline := time.Now().Add(5 * time.Second); owner == nil; time.Sleep(10 * time.Millisecond) {
		for _, a := range apps {
			if a.coord.Owner("hourly") {
				owner = a
			} else if other == nil {
				other = a
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no owner")
		}
	}
	waitListening(t, apps)
	ctx := context.Background()
	start := time.Now()
	if err := other.Act(ctx, "hourly", "exec"); err != nil {
		t.Fatalf("exec from %s: %v", other.InstanceID(), err)
	}
	for deadline := time.Now().Add(5 * time.Second); owner.Schedule("hourly").Info().Rounds != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the owner did not run the forwarded exec-now")
		}
	}
	t.Logf("exec-now from %s ran on the owner %s, answered in %s", other.InstanceID(), owner.InstanceID(), time.Since(start).Round(time.Millisecond))
	if other.Schedule("hourly").Info().Rounds != 0 {
		t.Fatal("the non-owner ran it too")
	}

	if err := other.Act(ctx, "hourly", "stop"); err != nil {
		t.Fatal(err)
	}
	waitStates := func(want ...State) {
		t.Helper()
		for _, a := range apps {
			for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				st := a.Schedule("hourly").State()
				if st == want[0] || (len(want) > 1 && st == want[1]) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: %s, want %v", a.InstanceID(), st, want)
				}
			}
		}
	}
	waitStates(Stopped)
	if err := other.Act(ctx, "hourly", "stop"); err == nil {
		t.Fatal("stopping a stopped schedule: the state machine's refusal is lost")
	}
	for _, a := range apps {
		stopInstance(t, a)
	}
	apps = startInstances(t, schema, "c", 3, log, jobs)
	for _, a := range apps {
		if st := a.Schedule("hourly").State(); st != Inited {
			t.Fatalf("%s after a restart of every instance: %s, want it still stopped (INITED)", a.InstanceID(), st)
		}
	}
	if err := apps[2].Act(ctx, "hourly", "start"); err != nil {
		t.Fatal(err)
	}
	waitStates(Sleeping, Running)
	for _, a := range apps {
		stopInstance(t, a)
	}
}

// TestClusterPartition: an instance cut off from the database (its role
// may no longer log in and its connections are terminated) stops running
// its schedules before its leases expire; the other instance takes them
// over without running any fire twice; when the database is back the
// instance rejoins and gets its share again.
func TestClusterPartition(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs for several seconds")
	}
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	role := schema + "_role"
	if _, err := pool.Exec(ctx, "CREATE ROLE "+role+" LOGIN SUPERUSER"); err != nil {
		t.Skip("cannot create a role to cut off: ", err)
	}
	t.Cleanup(func() {
		pool.Exec(context.Background(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
		pool.Exec(context.Background(), "DROP ROLE IF EXISTS "+role)
	})
	u, err := url.Parse(pgtest.DSN())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	jobs := everySecond(6)
	log := newFireLog()
	a1 := startInstance(t, schema, "connected", log, jobs)
	cutSt, err := postgres.Open(ctx, u.String(), postgres.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cutSt.Close() })
	a2, err := New(WithStore(cutSt), WithInstanceID("cut-off"), WithLeaseTTL(1500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cron-0", "cron-1", "cron-2", "cron-3", "cron-4", "cron-5"} {
		if _, err := a2.Register(&clusterJob{log: log, instance: "cut-off"}, Named(name)); err != nil {
			t.Fatal(err)
		}
		a2.Schedule(name).Config().Apply(jobs[name])
	}
	if err := a2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	from := time.Now()
	for deadline := time.Now().Add(5 * time.Second); a2.coord.Owned() == 0 || a1.coord.Owned() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("leases not spread: %d and %d", a1.coord.Owned(), a2.coord.Owned())
		}
	}
	time.Sleep(time.Second)
	if _, err := pool.Exec(ctx, "ALTER ROLE "+role+" NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	// Within the lease TTL the cut-off instance must trust none of its leases.
	for a2.coord.Owned() > 0 || a2.ownsAny() {
		if time.Since(cut) > 1500*time.Millisecond {
			t.Fatalf("the cut-off instance still trusts its leases %s after the cut", time.Since(cut))
		}
		time.Sleep(10 * time.Millisecond)
	}
	stepDown := time.Since(cut)
	if v, _, _ := a2.Cluster(ctx); v.Status.Trusted || v.Status.Error == "" {
		t.Fatalf("the cut-off instance's status says nothing: %+v", v.Status)
	}
	for deadline := time.Now().Add(5 * time.Second); a1.coord.Owned() < 6; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the connected instance holds %d of 6 leases", a1.coord.Owned())
		}
	}
	takeover := time.Since(cut)
	time.Sleep(time.Second)
	if _, err := pool.Exec(ctx, "ALTER ROLE "+role+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	for deadline := time.Now().Add(10 * time.Second); a2.coord.Owned() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the instance did not rejoin")
		}
	}
	rejoined := time.Since(back)
	time.Sleep(2 * time.Second)
	to := time.Now().Add(-1500 * time.Millisecond)
	stopInstance(t, a2)
	stopInstance(t, a1)
	fires := log.check(t, from, to, 1)
	t.Logf("stepped down %s after the cut, leases taken over after %s, rejoined %s after the database came back; %d fires, none twice",
		stepDown.Round(time.Millisecond), takeover.Round(time.Millisecond), rejoined.Round(time.Millisecond), fires)
}

// ownsAny reports whether the App's coordinator trusts any of its leases.
func (a *App) ownsAny() bool {
	for _, sc := range a.Schedules() {
		if a.coord.Owner(sc.Name()) {
			return true
		}
	}
	return false
}

// conflictPool is a managed pool whose tasks may not run twice at once.
type conflictPool struct {
	Schedule `enableTaskConflict:"true"`
}

func (*conflictPool) Run(context.Context) (any, error) { return nil, nil }

// TestClusterTaskConflicts: a task id running on one instance is a
// conflict on another, until it returns.
func TestClusterTaskConflicts(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	var apps []*App
	for _, id := range []string{"x1", "x2"} {
		st, err := postgres.Open(ctx, pgtest.DSN(), postgres.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		app, err := New(WithStore(st), WithInstanceID(id), WithLeaseTTL(1500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		stopAtCleanup(t, app)
		if _, err := app.Register(&conflictPool{}, Named("pool-"+id)); err != nil {
			t.Fatal(err)
		}
		if err := app.Start(ctx); err != nil {
			t.Fatal(err)
		}
		apps = append(apps, app)
		defer stopInstance(t, app)
	}
	release := make(chan struct{})
	started := make(chan struct{})
	long := TaskFunc("shared-id", func(context.Context) (any, error) {
		close(started)
		<-release
		return nil, nil
	})
	b1, err := apps[0].Schedule("pool-x1").Submit(ctx, long)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	quick := TaskFunc("shared-id", func(context.Context) (any, error) { return "ran", nil })
	b2, err := apps[1].Schedule("pool-x2").Submit(ctx, quick)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := b2.Wait(ctx); r.Results[0].Status != StatusConflict {
		t.Fatalf("the same id on another instance: %s, want conflict", r.Results[0].Status)
	}
	close(release)
	b1.Wait(ctx)
	claimed := func() bool { // given back after the local registry lets go of the id
		var n int
		pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".task_claims").Scan(&n)
		return n > 0
	}
	for deadline := time.Now().Add(5 * time.Second); apps[0].conflicts.Running("shared-id") || claimed(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the id stays running")
		}
	}
	b3, _ := apps[1].Schedule("pool-x2").Submit(ctx, quick)
	if r, _ := b3.Wait(ctx); r.Results[0].Status != StatusSuccess {
		t.Fatalf("after it returned: %s %v", r.Results[0].Status, r.Results[0].Err)
	}
}

// TestClusterFailoverRepeated crashes an instance twenty times in a row
// (a new one joins each time): after every crash the survivor takes over,
// no fire runs twice, and each schedule's fires follow its rate with at
// most one gap per crash (the fires of the gap run as one round).
func TestClusterFailoverRepeated(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs for half a minute")
	}
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	const ttl = 600 * time.Millisecond
	jobs := map[string]map[string]string{}
	for i := range 4 {
		jobs[fmt.Sprintf("rate-%d", i)] = map[string]string{"fixedRate": "200ms"}
	}
	log := newFireLog()
	start := func(id string) *App {
		st, err := postgres.Open(context.Background(), pgtest.DSN(), postgres.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		app, err := New(WithStore(st), WithInstanceID(id), WithLeaseTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		stopAtCleanup(t, app)
		for name, kv := range jobs {
			sc, err := app.Register(&clusterJob{log: log, instance: id}, Named(name))
			if err != nil {
				t.Fatal(err)
			}
			sc.Config().Apply(kv)
		}
		if err := app.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		return app
	}
	survivor := start("survivor")
	defer stopInstance(t, survivor)
	const crashes = 20
	for i := range crashes {
		victim := start(fmt.Sprintf("victim-%d", i))
		for deadline := time.Now().Add(5 * time.Second); victim.coord.Owned() == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				var leases string
				pool.QueryRow(context.Background(), "SELECT string_agg(l.schedule || '=' || l.owner || ' until ' || coalesce(i.leases_until::text, '-'), ', ') FROM "+schema+".leases l LEFT JOIN "+schema+".instances i ON i.id = l.owner").Scan(&leases)
				var live string
				pool.QueryRow(context.Background(), "SELECT string_agg(id || ' ' || heartbeat_at::text || ' stopped=' || stopped::text, ', ') FROM "+schema+".instances").Scan(&live)
				t.Fatalf("crash %d: the new instance got no lease; the survivor holds %d; leases: %s; instances at %s: %s", i, survivor.coord.Owned(), leases, time.Now().UTC().Format("15:04:05.000"), live)
			}
		}
		time.Sleep(300 * time.Millisecond) // it runs a few fires
		victim.coord.Abandon()
		stopInstance(t, victim)
		for deadline := time.Now().Add(5 * time.Second); survivor.coord.Owned() < len(jobs); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("crash %d: the survivor holds %d of %d leases", i, survivor.coord.Owned(), len(jobs))
			}
		}
	}
	time.Sleep(500 * time.Millisecond)
	log.mu.Lock()
	defer log.mu.Unlock()
	total := 0
	for name, byPlanned := range log.runs {
		var ps []time.Time
		for p, insts := range byPlanned {
			if len(insts) > 1 {
				t.Errorf("%s fire %s ran %d times: %v", name, p.Format("15:04:05.000"), len(insts), insts)
			}
			ps = append(ps, p)
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i].Before(ps[j]) })
		gaps := 0
		for i := 1; i < len(ps); i++ {
			if d := ps[i].Sub(ps[i-1]); d > 200*time.Millisecond {
				gaps++
				// The lease TTL, a renewal and the rate, with room for a
				// loaded machine (the race detector, tests in parallel):
				// a fresh clone's CI run saw 2.54 s against the 2.5 s this
				// allowed with 1.5 s of room.
				if d > ttl+ttl/3+200*time.Millisecond+3*time.Second {
					t.Errorf("%s: %s without a fire, from %s", name, d, ps[i-1].Format("15:04:05.000"))
				}
			}
		}
		if gaps > crashes {
			t.Errorf("%s: %d gaps for %d crashes", name, gaps, crashes)
		}
		total += len(ps)
	}
	t.Logf("%d crashes, %d fires over %d schedules, none twice", crashes, total, len(jobs))
}

// startChild starts the test binary as a child process with env set
// (which TestMain turns into the child's part), and returns it and its
// standard output; it is killed at the test's end.
func startChild(t *testing.T, env string) (*exec.Cmd, io.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, out
}

// clusterChildEnv makes the test binary an instance of the SIGKILL test:
// "schema instance-id".
const clusterChildEnv = "FOM_CLUSTER_CHILD"

func clusterChild(spec string) {
	schema, id, _ := strings.Cut(spec, " ")
	ctx := context.Background()
	st, err := postgres.Open(ctx, pgtest.DSN(), postgres.WithSchema(schema))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	app, err := New(WithStore(st), WithInstanceID(id), WithLeaseTTL(1500*time.Millisecond))
	for i := 0; err == nil && i < 4; i++ {
		var sc *ScheduleContext
		if sc, err = app.Register(&clusterJob{log: newFireLog(), instance: id}, Named(fmt.Sprintf("cron-%d", i))); err == nil {
			err = sc.Config().Apply(map[string]string{"cron": "* * * * * *"})
		}
	}
	if err == nil {
		err = app.Start(ctx)
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	select {}
}

// TestClusterSurvivesSIGKILL: an instance in a child process is killed
// with SIGKILL; the instance in the test process takes its schedules over
// within the lease TTL and a renewal, and the recorded fires have no hole
// beyond the one the takeover folds into a round.
func TestClusterSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a child process")
	}
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	jobs := everySecond(4)
	log := newFireLog()
	survivor := startInstance(t, schema, "parent", log, jobs)
	defer stopInstance(t, survivor)
	cmd, out := startChild(t, clusterChildEnv+"="+schema+" child")
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("child: %q %v", line, err)
	}
	childOwns := func() int {
		var n int
		pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".leases l JOIN "+schema+".instances i ON i.id = l.owner WHERE l.owner = 'child' AND i.leases_until > now()").Scan(&n)
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); childOwns() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the child got no lease")
		}
	}
	from := time.Now()
	time.Sleep(1500 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed := time.Now()
	for deadline := time.Now().Add(5 * time.Second); survivor.coord.Owned() < 4; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the survivor holds %d of 4 leases after the kill", survivor.coord.Owned())
		}
	}
	took := time.Since(killed)
	time.Sleep(2 * time.Second)
	to := time.Now().Add(-1500 * time.Millisecond)
	// The recorded fires: one row per fire by construction; look for holes.
	rows, err := pool.Query(ctx, "SELECT schedule, planned FROM "+schema+".fire_records WHERE planned >= $1 AND planned < $2", from.Truncate(time.Second).Add(time.Second), to)
	if err != nil {
		t.Fatal(err)
	}
	recorded := newFireLog()
	for rows.Next() {
		var s string
		var p time.Time
		rows.Scan(&s, &p)
		recorded.add(s, p, "db")
	}
	rows.Close()
	recorded.check(t, from, to, 1)
	t.Logf("killed with SIGKILL; the survivor held every lease %s later", took.Round(time.Millisecond))
	if took > 1500*time.Millisecond+500*time.Millisecond+1500*time.Millisecond {
		t.Errorf("takeover took %s, more than the lease TTL plus a renewal", took)
	}
}

// TestClusterStatisticsPerInstanceAndMerged: instances sharing a store
// keep their own day aggregates (neither overwrites the other's), and the
// cluster-wide figures sum them.
func TestClusterStatisticsPerInstanceAndMerged(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	jobs := map[string]map[string]string{"pool": {}}
	log := newFireLog()
	a1 := startInstance(t, schema, "s1", log, jobs)
	a2 := startInstance(t, schema, "s2", log, jobs)
	defer stopInstance(t, a2)
	run := func(a *App, n int) {
		task := TaskFunc("t", func(context.Context) (any, error) { return nil, nil })
		for range n {
			b, err := a.Schedule("pool").Submit(ctx, task)
			if err != nil {
				t.Fatal(err)
			}
			b.Wait(ctx)
		}
		if err := a.FlushStats(ctx); err != nil {
			t.Fatal(err)
		}
	}
	run(a1, 3)
	run(a2, 2)
	run(a1, 1) // a1 writes its day again: a2's must survive
	stored, err := a2.o.store.(clusterStore).LoadClusterDays(ctx, "pool", time.Now().AddDate(0, 0, -1))
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 2 || stored[0].Instance == stored[1].Instance {
		t.Fatalf("%d days stored for two instances (%+v), want one of each", len(stored), stored)
	}
	days, err := a2.ClusterDays(ctx, "pool")
	if err != nil {
		t.Fatal(err)
	}
	if got := days[len(days)-1].Count; got != 6 {
		t.Fatalf("cluster-wide outcomes today: %d, want 6", got)
	}
	if got := a2.Schedule("pool").Stats().Days(); got[len(got)-1].Count != 2 {
		t.Fatalf("a2's own outcomes today: %d, want 2", got[len(got)-1].Count)
	}
	stopInstance(t, a1)
	again := startInstance(t, schema, "s1", log, jobs)
	defer stopInstance(t, again)
	if got := again.Schedule("pool").Stats().Days(); got[len(got)-1].Count != 4 {
		t.Fatalf("s1 after a restart: %d of its own outcomes, want 4", got[len(got)-1].Count)
	}
}

// TestClusterScheduleContextActsOnTheSchedule: the ScheduleContext a user
// holds acts on the schedule on any instance. Shutdown on a non-owner stops
// it everywhere (and no instance keeps its lease), so the owner fires no
// more; Startup on another instance starts it everywhere and it fires
// again; ExecNow on a non-owner runs on the owner, never beside it.
func TestClusterScheduleContextActsOnTheSchedule(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	jobs := map[string]map[string]string{"cron1s": {"cron": "* * * * * *"}}
	log := newFireLog()
	apps := startInstances(t, schema, "u", 3, log, jobs)
	defer func() {
		for _, a := range apps {
			stopInstance(t, a)
		}
	}()
	waitListening(t, apps)
	owner := func() *App {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			for _, a := range apps {
				if a.coord.Owner("cron1s") {
					return a
				}
			}
			if time.Now().After(deadline) {
				t.Fatal("no owner")
			}
		}
	}
	other := func(not *App) *App {
		for _, a := range apps {
			if a != not {
				return a
			}
		}
		return nil
	}
	o := owner()
	n := other(o)
	if err := n.Schedule("cron1s").Shutdown(); err != nil {
		t.Fatalf("shutdown on the non-owner %s: %v", n.InstanceID(), err)
	}
	for _, a := range apps {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := a.Schedule("cron1s").Wait(ctx)
		cancel()
		if err != nil || a.Schedule("cron1s").State() != Stopped {
			t.Fatalf("%s after a Shutdown on %s: %s, %v", a.InstanceID(), n.InstanceID(), a.Schedule("cron1s").State(), err)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		held := 0
		for _, a := range apps {
			if a.Schedule("cron1s").State() != Stopped {
				t.Fatalf("%s: %s after a Shutdown on %s", a.InstanceID(), a.Schedule("cron1s").State(), n.InstanceID())
			}
			if a.coord.Owner("cron1s") {
				held++
			}
		}
		if held == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an instance keeps the lease of a schedule stopped everywhere")
		}
	}
	stopped := time.Now()
	time.Sleep(2500 * time.Millisecond)
	log.mu.Lock()
	for p := range log.runs["cron1s"] {
		if p.After(stopped) {
			t.Errorf("a fire planned %s ran after the schedule was stopped", p.Format("15:04:05.000"))
		}
	}
	log.mu.Unlock()
	// The non-owner's copy refuses a second Shutdown as a single process would.
	if err := n.Schedule("cron1s").Shutdown(); !errors.Is(err, ErrAlreadyStopped) {
		t.Fatalf("second shutdown: %v", err)
	}
	// Startup on a third instance: every instance follows, one owns it.
	third := apps[2]
	if third == o || third == n {
		third = apps[0]
		if third == o || third == n {
			third = apps[1]
		}
	}
	if err := third.Schedule("cron1s").Startup(); err != nil {
		t.Fatalf("startup on %s: %v", third.InstanceID(), err)
	}
	restarted := time.Now()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		log.mu.Lock()
		ran := 0
		for p := range log.runs["cron1s"] {
			if p.After(restarted) {
				ran++
			}
		}
		log.mu.Unlock()
		if ran >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no fire ran after Startup on another instance")
		}
	}
	if err := third.Schedule("cron1s").Startup(); !errors.Is(err, ErrAlreadyStarted) {
		t.Fatalf("second startup: %v", err)
	}
	// ExecNow on a non-owner: one round, on the owner.
	o = owner()
	n = other(o)
	before := map[*App]int64{}
	for _, a := range apps {
		before[a] = a.Schedule("cron1s").Info().Rounds
	}
	if err := n.Schedule("cron1s").ExecNow(); err != nil {
		t.Fatalf("exec-now on the non-owner %s: %v", n.InstanceID(), err)
	}
	time.Sleep(300 * time.Millisecond)
	for _, a := range apps {
		if a != o && a.Schedule("cron1s").Info().Rounds != before[a] {
			t.Fatalf("the non-owner %s ran a round", a.InstanceID())
		}
	}
	if o.Schedule("cron1s").Info().Rounds == before[o] {
		t.Fatal("the owner ran no round")
	}
	log.check(t, restarted, time.Now(), 1)
}
