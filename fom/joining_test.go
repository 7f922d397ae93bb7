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
// declaration, the step of Start between the coordinator's start and the
// schedules', until it has taken a lease and a while more.
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

// TestALeaseTakenBeforeItsScheduleStartsContinuesFromItsLastFire: an
// instance that joins is counted in the others' shares from its
// registration and may take leases while its App still declares its
// schedules, before any has started. Such a schedule starts from the
// lease's last fire, in one step: the fires due between the give-back and
// its start run as its catch-up round, here (the instance holds the
// lease, nobody else may run them), and no fire runs twice. The
// declaration is held 2.2 s after the take, so that whole seconds fall in
// between whatever the timing.
func TestALeaseTakenBeforeItsScheduleStartsContinuesFromItsLastFire(t *testing.T) {
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
	// None twice; of the seconds the declaration was held, the first runs
	// as the catch-up (below) and the rest are folded into it.
	fires := log.check(t, from, to, 2)
	t.Logf("%d fires; the joining instance took %v while its App declared, until %s", fires, held, started.Format("15:04:05.000"))

	log.mu.Lock()
	defer log.mu.Unlock()
	for _, name := range held {
		caughtUp := false
		for planned, insts := range log.runs[name] {
			if planned.Before(started) && insts[0] == "joins" {
				caughtUp = true
			}
		}
		if !caughtUp {
			t.Errorf("%s: the joining instance, holding its lease from before its start (%s), ran no fire due before it (its catch-up)",
				name, started.Format("15:04:05.000"))
		}
	}
}
