package fom

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fom-go/fom/cluster"
	"github.com/fom-go/fom/internal/pgtest"
	"github.com/fom-go/fom/store/postgres"
)

// heldStore is a PostgreSQL store whose coordinator holds the App's
// declaration, the step of Start after the coordinator's start, until it
// has taken a lease and a while more.
type heldStore struct {
	*postgres.Store
	hold  time.Duration
	coord *heldCoordinator
}

func (s *heldStore) Coordinate(o cluster.Options) (cluster.Coordinator, error) {
	c, err := s.Store.Coordinate(o)
	if err != nil {
		return nil, err
	}
	s.coord = &heldCoordinator{Coordinator: c, hold: s.hold}
	return s.coord, nil
}

type heldCoordinator struct {
	cluster.Coordinator
	hold time.Duration

	mu      sync.Mutex
	held    []string  // schedules whose leases it took while Start declared
	started time.Time // when Start went on to the schedules
	err     error
}

func (c *heldCoordinator) Declare(ctx context.Context, decls map[string]map[string]string, replace bool) error {
	if replace { // Start's declaration of every schedule
		err := fmt.Errorf("no lease taken within 10 s of the coordinator's start")
		var held []string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if c.Owned() > 0 {
				for name := range decls {
					if c.Holds(name) {
						held = append(held, name)
					}
				}
				err = nil
				break
			}
		}
		time.Sleep(c.hold)
		c.mu.Lock()
		c.held, c.started, c.err = held, time.Now(), err
		c.mu.Unlock()
	}
	return c.Coordinator.Declare(ctx, decls, replace)
}

// TestALeaseTakenWhileAJoiningAppDeclaresRunsEveryFire: an instance that
// joins is counted in the others' shares from its registration and may
// take leases while its App still declares its schedules (ten thousand
// declarations, and the calm part of a second waited for, take up to a
// second). Its schedules started before it registered: such a lease
// resumes its schedule at once, here, and every fire from the give-back on
// runs, none twice, none missed and folded into a late catch-up round. The
// declaration is held 2.2 s after the take, so that whole seconds fall in
// between whatever the timing.
func TestALeaseTakenWhileAJoiningAppDeclaresRunsEveryFire(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs for several seconds")
	}
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	jobs := everySecond(12)
	log := newFireLog()
	a := startInstance(t, schema, "first", log, jobs)
	waitListening(t, []*App{a})
	for deadline := time.Now().Add(10 * time.Second); a.coord.Owned() < len(jobs); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the first instance holds %d of %d leases", a.coord.Owned(), len(jobs))
		}
	}
	from := time.Now()

	st := &heldStore{Store: storeOn(t, schema), hold: 2200 * time.Millisecond}
	b, err := New(WithStore(st), WithInstanceID("joins"), WithLeaseTTL(1500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	stopAtCleanup(t, b)
	for name, cfg := range jobs {
		sc, err := b.Register(&clusterJob{log: log, instance: "joins"}, Named(name))
		if err != nil {
			t.Fatal(err)
		}
		if err := sc.Config().Apply(cfg); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := st.coord
	c.mu.Lock()
	held, started, herr := c.held, c.started, c.err
	c.mu.Unlock()
	if herr != nil {
		t.Fatal(herr)
	}
	if len(held) == 0 {
		t.Fatal("the joining instance held no lease while its App declared")
	}
	time.Sleep(3 * time.Second)
	to := time.Now().Add(-1500 * time.Millisecond)
	for _, app := range []*App{a, b} {
		stopInstance(t, app)
	}
	fires := log.check(t, from, to, 0) // none twice, none missed
	t.Logf("%d fires; the joining instance took %v while its App declared, until %s", fires, held, started.Format("15:04:05.000"))

	log.mu.Lock()
	defer log.mu.Unlock()
	for _, name := range held {
		ranHere := false
		for planned, insts := range log.runs[name] {
			if planned.Before(started) && insts[0] == "joins" {
				ranHere = true
			}
		}
		if !ranHere {
			t.Errorf("%s: the joining instance, holding its lease while its App declared (until %s), ran none of its fires then",
				name, started.Format("15:04:05.000"))
		}
	}
}

// TestAPinnedScheduleTakenAtStartContinuesFromItsLastFire: a schedule
// whose first round is pinned (initialDelay) starts after its instance
// took its first leases, so that the instance holding the lease runs that
// round; one whose lease it took then, from an instance that crashed,
// starts from the lease's last fire (StartupFrom): the fires missed since
// the crash run as one catch-up round at once, not the pinned round a
// second later, and none runs twice.
func TestAPinnedScheduleTakenAtStartContinuesFromItsLastFire(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs for several seconds")
	}
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	log := newFireLog()
	a := startPinned(t, schema, "crashes", log)
	from := time.Now()
	time.Sleep(2500 * time.Millisecond)
	a.coord.Abandon()           // no heartbeat, leases left to end
	stopInstance(t, a)          // its schedules stop; the lease is not given back
	time.Sleep(2 * time.Second) // the lease ends (1.5 s)
	b := startPinned(t, schema, "restarts", log)
	started := time.Now()
	if b.coord.Owned() != 1 {
		t.Fatalf("the instance started after the crash holds %d leases, want the one ended", b.coord.Owned())
	}
	time.Sleep(2 * time.Second)
	to := time.Now().Add(-1500 * time.Millisecond)
	stopInstance(t, b)
	fires := log.check(t, from, to, 5) // none twice; the crash's seconds folded into the catch-up
	log.mu.Lock()
	defer log.mu.Unlock()
	caughtUp := false
	for planned, insts := range log.runs["cron-pinned"] {
		if planned.Before(started) && insts[0] == "restarts" {
			caughtUp = true
		}
	}
	t.Logf("%d fires: %v", fires, log.runs["cron-pinned"])
	if !caughtUp {
		t.Errorf("the instance started after the crash ran no fire missed before its start (%s): its pinned round came first", started.Format("15:04:05.000"))
	}
}

// pinnedJob runs every second, its first round a second after its start.
type pinnedJob struct {
	Schedule `name:"cron-pinned" cron:"* * * * * *" initialDelay:"1s"`
	clusterJob
}

// startPinned starts an App of instance id with a pinnedJob.
func startPinned(t *testing.T, schema, id string, log *fireLog) *App {
	t.Helper()
	app, err := New(WithStore(storeOn(t, schema)), WithInstanceID(id), WithLeaseTTL(1500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	stopAtCleanup(t, app)
	if _, err := app.Register(&pinnedJob{clusterJob: clusterJob{log: log, instance: id}}); err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return app
}
