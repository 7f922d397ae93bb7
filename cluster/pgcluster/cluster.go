package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/fom-go/fom/internal/clockx"
	"github.com/fom-go/fom/internal/pgbulk"
	"github.com/fom-go/fom/internal/slots"
)

// Coordinator is one instance's part in the cluster. It implements
// schedule.Gate.
type Coordinator struct {
	pool   *pgxpool.Pool
	schema string // quoted
	o      Options
	log    *zap.Logger
	margin time.Duration

	mu    sync.Mutex
	names map[string]bool  // schedules this instance can run
	owned map[string]int64 // schedule -> term
	// ownedGen is bumped when owned loses a lease, or a lease's term
	// changes: a herald or an admission checked against owned at the
	// current generation still holds, without a second look (a map
	// lookup by name, a few a fire, was a tenth of a burst's CPU).
	ownedGen   uint64
	trustUntil time.Time // local clock; leases are trusted before it
	live       int       // live instances at the last tick
	renewed    time.Time // the last successful renewal
	renewErr   string    // why the last tick failed, "" if it did not
	listening  bool
	// heard asks the next tick for a resync: set when the listening
	// connection is (re)established (what changed while none listened)
	// and when the live instances change (what they declare).
	heard      bool
	lastResync time.Time
	members    string                // the live instances at the last tick, and when each started
	listenPID  uint32                // the listening connection's backend
	ready      bool                  // Ready was called since Start
	pending    map[int64]chan string // forwarded requests awaiting an answer
	admits     chan admission        // fires to record (admitLoop)
	kick       chan struct{}         // a tick now (Kick)
	free       chan struct{}         // leases given back elsewhere: take this instance's share now (takeFree)
	handed     chan struct{}         // leases handed to this instance: take them now (takeHanded)
	heralds    map[string]*herald    // schedule -> its next fire, announced (see heralds.go)
	// ran is each schedule's last fire admitted here when due (not
	// announced ahead: see herald's admitted): a fire not after it is
	// refused without a statement.
	ran       map[string]ranFire
	slots     *slots.Set[*herald, *time.Timer] // the heralds recorded together, by slot
	heraldWG  sync.WaitGroup                   // slots armed or recording
	rekick    *time.Timer                      // a tick after imminent fires, to give their leases back
	keptUntil time.Time                        // the last release kept leases back for their fires up to this one
	holding   bool                             // slots announced wait for unhold (an acquisition resuming its schedules)
	draining  bool                             // Drain was called: no lease is taken, and each is given back once out of its round
	// recLock is read-held by a herald batch's statement and write-held
	// by a lease given back (with the records of its unrun fires), so the
	// fires a batch records are taken out of the records, or refused, not
	// left behind.
	recLock sync.RWMutex
	// leaseMu orders this instance's reads of its leases (a tick) with
	// its own leases given back, so that the epoch and the leases it
	// knows (owned) are of one moment: a batch of fires recorded under
	// that epoch is checked against owned alone (see recordOnce).
	leaseMu sync.Mutex
	epoch   int64 // the instance's epoch read with owned; -1: none read, every batch looks its leases up
	ticks   int   // renewals since Start, for the fold (foldEvery)

	sendBuf pgbulk.Buffer // a fire batch's parameters, encoded (pgbulk.Send)

	spareBatch   []admission // the room of the last slot's batch (recordSlot), guarded by mu
	spareHeralds []*herald

	tickStatements, fires, fireStatements atomic.Int64 // counters (see Counters)
	batches                               atomic.Int64 // numbers fire batches; from the clock at New, so a restarted instance of the same id does not reuse a number

	// lostAnswer, set by tests, turns a fire batch's answer into the error
	// of a connection cut after its commit.
	lostAnswer func() error
	stop, done chan struct{}
}

// New builds a coordinator on pool, whose tables are in schema (see
// store/postgres: its migrations create them). It starts nothing.
func New(pool *pgxpool.Pool, schema string, o Options) (*Coordinator, error) {
	if pool == nil {
		return nil, errors.New("fom: cluster: pool is nil")
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.RenewEvery == 0 {
		o.RenewEvery = o.LeaseTTL / 3
	}
	if o.RenewEvery <= 0 || o.RenewEvery*2 > o.LeaseTTL {
		return nil, fmt.Errorf("fom: cluster: RenewEvery %s must be positive and at most half of LeaseTTL %s", o.RenewEvery, o.LeaseTTL)
	}
	if o.InstanceID == "" {
		host, _ := os.Hostname()
		o.InstanceID = fmt.Sprintf("%s-%d-%04x", host, os.Getpid(), rand.IntN(1<<16))
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.RecordAhead == 0 {
		o.RecordAhead = min(DefaultRecordAhead, o.RenewEvery)
	}
	if o.RecordAhead < time.Millisecond || o.RecordAhead > o.RenewEvery {
		return nil, fmt.Errorf("fom: cluster: RecordAhead %s must be between 1ms and RenewEvery %s", o.RecordAhead, o.RenewEvery)
	}
	c := &Coordinator{
		pool: pool, schema: pgx.Identifier{schema}.Sanitize(), o: o, log: o.Logger.Named("cluster").With(zap.String("fom_instance", o.InstanceID)),
		// The trust window ends this much before the lease can expire:
		// room for the local clock to run slower than the database's.
		margin: o.LeaseTTL / 5,
		names:  map[string]bool{}, owned: map[string]int64{}, pending: map[int64]chan string{},
		admits: make(chan admission, 256), kick: make(chan struct{}, 1), free: make(chan struct{}, 1), handed: make(chan struct{}, 1),
		heralds: map[string]*herald{}, ran: map[string]ranFire{}, slots: slots.New[*herald, *time.Timer](o.RecordAhead.Milliseconds()),
	}
	c.batches.Store(time.Now().UnixNano())
	c.epoch = -1
	return c, nil
}

// ID returns the instance id.
func (c *Coordinator) ID() string { return c.o.InstanceID }

func (c *Coordinator) t(name string) string { return c.schema + "." + name }

// Add makes schedules runnable by this instance (their lease rows are
// created if missing at the next tick, or at once when started).
func (c *Coordinator) Add(ctx context.Context, names ...string) error {
	c.mu.Lock()
	for _, n := range names {
		c.names[n] = true
	}
	running := c.stop != nil
	c.mu.Unlock()
	if running {
		return c.ensureLeases(ctx, names)
	}
	return nil
}

func (c *Coordinator) ensureLeases(ctx context.Context, names []string) error {
	if len(names) == 0 {
		return nil
	}
	// In one order on every instance: instances starting at once insert
	// the same rows without deadlocking each other.
	names = slices.Sorted(slices.Values(names))
	_, err := c.pool.Exec(ctx, "INSERT INTO "+c.t("leases")+" (schedule, owner, term) SELECT n, '', 0 FROM unnest($1::text[]) AS n ON CONFLICT DO NOTHING", names)
	if err != nil {
		return fmt.Errorf("fom: cluster: create leases: %w", err)
	}
	_, err = c.pool.Exec(ctx, "UPDATE "+c.t("instances")+" SET schedules = ARRAY(SELECT DISTINCT unnest(schedules || $2::text[]) ORDER BY 1) WHERE id = $1", c.o.InstanceID, names)
	if err != nil {
		return fmt.Errorf("fom: cluster: record the schedules of instance %s: %w", c.o.InstanceID, err)
	}
	return nil
}

// Start registers the instance, takes its first leases (so that the
// schedules it owns run from their first fire), and keeps heartbeating
// and renewing until Stop.
func (c *Coordinator) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.stop != nil {
		c.mu.Unlock()
		return ErrStarted
	}
	c.draining = false
	names := c.namesLocked()
	c.mu.Unlock()
	// Its leases live from here (live instances are those whose leases
	// do): the others count it in their shares from its registration.
	_, err := c.pool.Exec(ctx, "INSERT INTO "+c.t("instances")+` (id, host, version, started_at, heartbeat_at, stopped, leases_until)
		VALUES ($1, $2, $3, now(), now(), false, now() + $4::interval)
		ON CONFLICT (id) DO UPDATE SET host = excluded.host, version = excluded.version, started_at = now(), heartbeat_at = now(), stopped = false, schedules = '{}',
			leases_until = excluded.leases_until`,
		c.o.InstanceID, hostname(), c.o.Version, c.o.LeaseTTL)
	if err != nil {
		return fmt.Errorf("fom: cluster: register instance %s: %w", c.o.InstanceID, err)
	}
	if err := c.ensureLeases(ctx, names); err != nil {
		return err
	}
	// Started before the first tick: the schedules an App started before
	// it registered (parked) are resumed by the leases this tick takes,
	// and announce their first fires within it; announced to a
	// coordinator not started, they would be dropped, and their fires
	// recorded one by one when due.
	c.mu.Lock()
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	stop, done := c.stop, c.done
	c.mu.Unlock()
	c.tick(ctx)
	go c.loop(stop, done)
	return nil
}

func hostname() string { h, _ := os.Hostname(); return h }

func (c *Coordinator) namesLocked() []string {
	out := make([]string, 0, len(c.names))
	for n := range c.names {
		out = append(out, n)
	}
	return out
}

func (c *Coordinator) loop(stop, done chan struct{}) {
	defer close(done)
	admitted := make(chan struct{})
	go c.admitLoop(stop, admitted)
	defer func() { <-admitted }()
	if c.o.Channel != "" {
		listened := make(chan struct{})
		go func() {
			defer close(listened)
			c.listen(stop)
		}()
		defer func() { <-listened }()
	}
	t := time.NewTimer(c.renewalAfter(time.Now()))
	defer t.Stop()
	// Fire records are pruned every firesPruneEvery, off the renewal path.
	prune := time.NewTicker(firesPruneEvery)
	defer prune.Stop()
	pruneCtx, cancelPrune := context.WithCancel(context.Background())
	pruned := make(chan struct{}, 1)
	pruned <- struct{}{} // a token: one prune at a time
	defer func() {
		cancelPrune()
		<-pruned
	}()
	for {
		select {
		case <-prune.C:
			select {
			case <-pruned:
				go func() {
					defer func() { pruned <- struct{}{} }()
					c.pruneFires(pruneCtx)
				}()
			default: // the last one still runs
			}
		case <-stop:
			return
		case <-t.C:
			t.Reset(c.renewalAfter(time.Now()))
			ctx, cancel := context.WithTimeout(context.Background(), c.o.RenewEvery)
			c.tick(ctx)
			if c.o.Resync != nil && c.resyncDue() {
				c.o.Resync(ctx)
			}
			cancel()
		case <-c.kick:
			c.bounded(c.tick)
		case <-c.free:
			c.bounded(c.takeFree)
		case <-c.handed:
			c.bounded(c.takeHanded)
		}
	}
}

// bounded runs f with a renewal interval to finish in.
func (c *Coordinator) bounded(f func(context.Context)) {
	ctx, cancel := context.WithTimeout(context.Background(), c.o.RenewEvery)
	defer cancel()
	f(ctx)
}

// renewalAfter is how long after now the next renewal comes: RenewEvery,
// brought forward to fall between two whole seconds (clockx.OffBeat),
// away from the aligned bursts of cron fires a renewal (a statement, and a
// pass over every schedule this instance can run) would add to. Never
// later than RenewEvery, so the leases' margins hold.
func (c *Coordinator) renewalAfter(now time.Time) time.Duration {
	return clockx.OffBeat(now, c.o.RenewEvery).Sub(now)
}

// Kick asks for a tick now, rather than at the next renewal: a schedule
// this instance now wants (or no longer wants) takes (or gives back) its
// lease at once.
func (c *Coordinator) Kick() { signal(c.kick) }

// wanted filters names by Options.Wants.
func (c *Coordinator) wanted(names []string) []string {
	if c.o.Wants == nil {
		return names
	}
	return c.o.Wants(names)
}

// tick heartbeats, renews the leases held, then takes or gives back
// leases toward this instance's share. Its statements do not depend on
// the number of schedules.
func (c *Coordinator) tick(ctx context.Context) {
	sent := time.Now()
	// renewal (the heartbeat), the leases read, live count, task claims,
	// requests: five a tick, one more for a fold, one more when leases
	// are taken or given back.
	c.tickStatements.Add(5)
	c.mu.Lock()
	draining := c.draining
	c.mu.Unlock()
	c.leaseMu.Lock()
	held, fresh, epoch, err := c.renew(ctx, draining)
	if err != nil {
		c.leaseMu.Unlock()
		c.log.Warn("lease renewal failed; leases are trusted only until their window ends", zap.Error(err))
		c.failed(err)
		return
	}
	var live int
	var members string
	if err := c.pool.QueryRow(ctx, "SELECT count(*), coalesce(string_agg(id || ' ' || started_at::text, ',' ORDER BY id), '') FROM "+c.t("instances")+" WHERE NOT stopped AND leases_until > now()").Scan(&live, &members); err != nil || live < 1 {
		live = 1
	}
	owned := make(map[string]int64, len(held))
	for s, h := range held {
		owned[s] = h.term
	}
	c.mu.Lock()
	// A lease renewed that this instance did not know of was handed to
	// it (the notification lost, or not heard yet): taken now. Draining,
	// it is not taken, nor one this instance gave back while the renewal
	// ran: Stop hands over every lease held.
	if c.draining {
		for s := range fresh {
			delete(owned, s)
		}
		clear(fresh)
	}
	if members != c.members {
		// An instance started, stopped or died: what it declared, or
		// changed before it listened, is re-read at this tick.
		c.members, c.heard = members, true
	}
	lost, changed := 0, false
	for s, t := range c.owned {
		if nt, ok := owned[s]; !ok {
			lost++
		} else if nt != t {
			changed = true
		}
	}
	if lost > 0 || changed {
		c.ownedGen++
	}
	c.owned, c.live, c.epoch = owned, live, epoch
	c.leaseMu.Unlock()
	// Read below without the lock, while a drain may give leases back.
	owned = maps.Clone(owned)
	c.trustUntil = sent.Add(c.o.LeaseTTL - c.margin)
	c.renewed, c.renewErr = time.Now(), ""
	all := c.namesLocked()
	c.mu.Unlock()
	c.adopt(ctx, fresh)
	names := c.wanted(all)
	if draining {
		names = nil // every lease held is given back, none taken
	}
	share, have, unwanted := shareOf(names, owned, live)
	if lost > 0 {
		c.log.Info("leases taken by other instances", zap.Int("count", lost))
	}
	// Task ids still running here stay claimed.
	if _, err := c.pool.Exec(ctx, "UPDATE "+c.t("task_claims")+" SET expires_at = now() + $2::interval WHERE instance = $1", c.o.InstanceID, c.o.LeaseTTL); err != nil {
		c.log.Warn("renewing task claims failed", zap.Error(err))
	}
	// Answered or abandoned requests are kept an hour, for inspection.
	if _, err := c.pool.Exec(ctx, "DELETE FROM "+c.t("requests")+" WHERE created_at < now() - interval '1 hour'"); err != nil {
		c.log.Warn("pruning requests failed", zap.Error(err))
	}
	if len(unwanted) > 0 {
		c.release(ctx, unwanted, len(unwanted), "not run here")
	}
	switch {
	case have < share:
		c.acquire(ctx, names, share-have)
	case have > share:
		c.release(ctx, names, have-share, "to rebalance")
	}
}

// shareOf is this instance's share of names among live instances, how
// many of them it holds among owned, and the leases it holds that are
// not among names.
func shareOf(names []string, owned map[string]int64, live int) (share, have int, unwanted []string) {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	for s := range owned {
		if !want[s] {
			unwanted = append(unwanted, s)
		}
	}
	return (len(names) + live - 1) / live, len(owned) - len(unwanted), unwanted
}

// Counters returns the coordinator's counters.
func (c *Coordinator) Counters() Counters {
	return Counters{TickStatements: c.tickStatements.Load(), Fires: c.fires.Load(), FireStatements: c.fireStatements.Load()}
}

// acquire takes up to n free or expired leases among names: free (no
// owner), or of an owner whose leases ended (its row in instances not
// renewed in time), or of an owner with no row.
//
// In one transaction: the rows of the owners whose leases ended are
// locked first (their fire batches being recorded finish, and the ones
// that follow wait, then find the leases moved), and their epoch bumped
// (their batches look their leases up from then on); the leases are
// taken; then the fires those owners recorded and did not fold yet are
// read and written into the leases' last_fire. The last fire is read
// before this instance may admit a fire under its new term: read later,
// it could be a fire this instance admitted meanwhile, and the plan would
// resume past the fires missed during the failover.
//
// The leases that could be taken are read by their owners (an index), and
// those among names are the candidates the take picks its share from: a
// settled cluster, whose instances hold a share a lease short of the
// rounded-up one, has none to read, where looking up each of names cost a
// renewal a few times over.
func (c *Coordinator) acquire(ctx context.Context, names []string, n int) {
	c.tickStatements.Add(1)
	taken := map[string]int64{}
	from := map[string]time.Time{}
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		gone, err := c.lockEnded(ctx, tx)
		if err != nil {
			return err
		}
		owners := append(gone, "")
		rows, err := tx.Query(ctx, "SELECT schedule FROM "+c.t("leases")+" WHERE owner = ANY($1)", owners)
		if err != nil {
			return err
		}
		free, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(free) == 0 {
			return err
		}
		want := make(map[string]bool, len(names))
		for _, s := range names {
			want[s] = true
		}
		free = slices.DeleteFunc(free, func(s string) bool { return !want[s] })
		// The owner is read again under the lock: another taker may have
		// been first (its lock skipped). The share is picked among the
		// candidates under the locks (a LIMIT over SKIP LOCKED), so that
		// those another took meanwhile are made up for from the rest: a
		// rebalance's takers, told at once, take from the same free leases,
		// and an instance whose start (or renewal) came then, picking its
		// share before locking it, took a third of it; the rest stayed free
		// past their next fire, until a renewal (the cluster benchmark's
		// started-together row: 558 fires of one second run late, as
		// catch-ups).
		rows, err = tx.Query(ctx, "UPDATE "+c.t("leases")+` AS l SET owner = $1, term = l.term + 1
			FROM (SELECT schedule, owner FROM `+c.t("leases")+` WHERE schedule = ANY($2) AND owner = ANY($3)
			      ORDER BY random() LIMIT $4
			      FOR UPDATE SKIP LOCKED) AS free
			WHERE l.schedule = free.schedule
			RETURNING l.schedule, l.term, free.owner, (SELECT leases_until FROM `+c.t("instances")+` WHERE id = free.owner), l.last_fire`,
			c.o.InstanceID, free, owners, n)
		if err != nil {
			return err
		}
		var s, owner string
		var term int64
		var ended, last pgtype.Timestamptz
		var prev, fromPrev []string
		_, err = pgx.ForEachRow(rows, []any{&s, &term, &owner, &ended, &last}, func() error {
			taken[s] = term
			if p, ok := resumeFrom(last, ended); ok {
				from[s] = p
			}
			if owner != "" {
				if !slices.Contains(prev, owner) {
					prev = append(prev, owner)
				}
				fromPrev = append(fromPrev, s)
			}
			return nil
		})
		if err != nil || len(prev) == 0 {
			return err
		}
		lasts, err := c.lastFires(ctx, tx, prev, fromPrev)
		if err != nil {
			return err
		}
		for s, p := range lasts {
			from[s] = p
		}
		// Its share full, more of a dead instance's leases may wait: the
		// others take theirs now, not at their own renewals, up to a
		// renewal interval apart.
		if len(taken) == n && c.o.Channel != "" {
			_, err = tx.Exec(ctx, "SELECT pg_notify($1, $2)", c.o.Channel, notifyExpired+c.o.InstanceID)
		}
		return err
	})
	if err != nil {
		c.log.Warn("taking leases failed", zap.Error(err))
		return
	}
	c.took(taken, from)
}

// orphansEvery is how many renewals apart acquire looks for leases whose
// owner has no row in instances (none of fom's own statements leaves one:
// a row deleted by hand).
const orphansEvery = 12

// lockEnded locks, in tx, the rows of the instances whose leases ended
// and that hold leases, in the order of their ids (takers locking the same
// owners do not deadlock), and bumps their epoch; an owner that renews
// before the lock is granted is not locked (the lock reads the row
// again), and its leases stay. Every orphansEvery renewals it adds the
// owners of leases with no row. It returns the owners whose leases can
// be taken.
func (c *Coordinator) lockEnded(ctx context.Context, tx pgx.Tx) ([]string, error) {
	rows, err := tx.Query(ctx, `UPDATE `+c.t("instances")+` i SET epoch = i.epoch + 1 FROM (
			SELECT id FROM `+c.t("instances")+` e WHERE leases_until <= now() AND id <> $1
			AND EXISTS (SELECT 1 FROM `+c.t("leases")+` WHERE owner = e.id)
			ORDER BY id FOR UPDATE) AS ended
		WHERE i.id = ended.id RETURNING i.id`, c.o.InstanceID)
	if err != nil {
		return nil, err
	}
	gone, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || c.ticks%orphansEvery != 1 {
		return gone, err
	}
	rows, err = tx.Query(ctx, "SELECT DISTINCT owner FROM "+c.t("leases")+" WHERE owner <> '' AND owner NOT IN (SELECT id FROM "+c.t("instances")+")")
	if err != nil {
		return nil, err
	}
	orphans, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return append(gone, orphans...), err
}

// resumeFrom is where the plan of a lease taken resumes: its last
// recorded fire, or without one, the moment the previous owner's lease
// ended (a fire due between that and now ran nowhere). ok is false for a
// lease never owned (it ended at -infinity): the plan starts afresh.
func resumeFrom(last, ended pgtype.Timestamptz) (time.Time, bool) {
	switch {
	case last.Valid:
		return last.Time, true
	case ended.Valid && ended.InfinityModifier == pgtype.Finite:
		return ended.Time, true
	}
	return time.Time{}, false
}

// ownLocked makes s this instance's lease, in term. Called with c.mu held.
func (c *Coordinator) ownLocked(s string, term int64) {
	if t, ok := c.owned[s]; ok && t != term {
		c.ownedGen++
	}
	c.owned[s] = term
}

// termLocked is the term of the lease of s this instance holds, and
// whether it holds it: h's, when h (s's herald, or nil) was announced at
// the current generation of owned. Called with c.mu held.
func (c *Coordinator) termLocked(s string, h *herald) (int64, bool) {
	if h != nil && h.gen == c.ownedGen {
		return h.term, true
	}
	t, ok := c.owned[s]
	return t, ok
}

// took makes the leases taken (schedule -> term) this instance's, and
// resumes their schedules from their fires in from.
func (c *Coordinator) took(taken map[string]int64, from map[string]time.Time) {
	if len(taken) == 0 {
		return
	}
	acquired := make([]string, 0, len(taken))
	c.mu.Lock()
	for s, term := range taken {
		c.ownLocked(s, term)
		acquired = append(acquired, s)
		// A fire at or before the one the plan resumes from ran, or was
		// due under the previous owner: refused here at once (Admit),
		// where a batch under the epoch would not look at the lease.
		if p, ok := from[s]; ok {
			if f, had := c.ran[s]; !had || p.After(f.planned) {
				c.ran[s] = ranFire{planned: p, term: term}
			}
		}
	}
	c.mu.Unlock()
	c.log.Info("leases taken", zap.Strings("schedules", acquired))
	// The schedules resumed announce their first fires, many due at once:
	// recorded together when every one has.
	c.hold()
	defer c.unhold()
	if c.o.Acquired != nil {
		for _, s := range acquired {
			c.o.Acquired(s, from[s])
		}
	}
}

// handoverLead is how long before a fire, beyond twice RecordAhead, a
// lease given back to rebalance leaves the instance that takes it: a
// notification, the take (one statement: 120 ms under the load of an
// aligned burst of thirty thousand fires and a collection, measured by
// the cluster benchmark's joining row) and the fire recorded ahead. Given
// back at a renewal half-way through a second with twice RecordAhead, the
// fires of the next whole second ran 250–300 ms late in one joining pass
// of four.
const handoverLead = 400 * time.Millisecond

// release gives back up to n of the leases held among from that are not
// in a round here. They stop being admitted here before the database
// hears of it.
func (c *Coordinator) release(ctx context.Context, from []string, n int, why string) {
	c.mu.Lock()
	var held []string
	// A schedule whose next fire is too close for another instance to
	// take the lease and record the fire before it is due is kept for
	// now: given back, its fire would be refused here and run late by the
	// next owner. A tick right after those fires (the rekick) gives them
	// back, with the whole calm part of a second before the next. Too
	// close is within handoverLead and twice RecordAhead; at a release
	// after one that kept leases back, once the fires kept are past (the
	// rekick, or a renewal that came first), only a fire already due is:
	// a schedule firing more often than that lead always has its next
	// fire too close, and is given back then, its next fire possibly
	// late, rather than kept at every release. A release before the fires
	// kept are past (another instance ready meanwhile) keeps them again.
	// Draining, none is kept: this instance is about to stop its
	// schedules, so a fire kept would not run here, and would run late
	// elsewhere after the rekick; given back now, the next owner has until
	// its instant to take the lease and record it.
	lead := handoverLead + 2*c.o.RecordAhead
	if !c.keptUntil.IsZero() && time.Now().After(c.keptUntil) {
		lead = 0
	}
	c.keptUntil = time.Time{}
	soon := time.Now().Add(lead)
	leaving := c.draining
	if leaving {
		soon = time.Time{}
	}
	var after time.Time
	for _, s := range from {
		if _, ok := c.owned[s]; !ok {
			continue
		}
		if h := c.heralds[s]; h != nil && h.state != admitted && !h.withdrawn && h.planned.Before(soon) {
			after = maxTime(after, h.planned)
			continue
		}
		held = append(held, s)
	}
	if !after.IsZero() && len(held) < n && c.stop != nil {
		if c.rekick != nil {
			c.rekick.Stop()
		}
		c.keptUntil = after
		c.rekick = time.AfterFunc(time.Until(after)+recordRetry, c.Kick)
	}
	c.mu.Unlock()
	// Busy reaches into the App: asked without the coordinator's lock.
	var give []string
	for _, s := range held {
		if len(give) == n {
			break
		}
		if c.o.Busy == nil || !c.o.Busy(s) {
			give = append(give, s)
		}
	}
	if len(give) == 0 {
		return
	}
	// The fires recorded since the last fold are folded first, outside
	// the lock on this instance's row that the give-back holds (and its
	// batches wait on): the give-back then reads a batch or two, not
	// foldEvery renewals of them. Folded before the heralds of the leases
	// given are taken out, the fires recorded ahead and not run are still
	// kept out of the fold. A fold that fails leaves more to read.
	c.leaseMu.Lock()
	c.tickStatements.Add(1)
	if err := c.fold(ctx, nil); err != nil {
		c.log.Warn("folding the fires recorded before giving leases back failed", zap.Error(err))
	}
	c.leaseMu.Unlock()
	c.mu.Lock()
	for _, s := range give {
		delete(c.owned, s)
	}
	c.ownedGen++
	unrun := c.takeHeraldsLocked(give)
	c.mu.Unlock()
	c.tickStatements.Add(1)
	// The next owner resumes the plan from the last fire run here, or from
	// this instant when none was recorded: the fires recorded ahead and not
	// run are taken out of the records.
	c.recLock.Lock()
	defer c.recLock.Unlock()
	err := c.giveBack(ctx, give, unrun, leaving)
	if err != nil {
		c.log.Warn("giving leases back failed; the next renewal finds them held here, and takes or gives them back", zap.Error(err))
		return
	}
	c.log.Info("leases given back "+why, zap.Strings("schedules", give))
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// closed reports whether ch is closed.
func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// trusted reports whether the leases are in their trust window.
func (c *Coordinator) trusted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Before(c.trustUntil)
}

func (c *Coordinator) failed(err error) {
	c.mu.Lock()
	c.renewErr = err.Error()
	c.mu.Unlock()
}

// Status returns this instance's standing: when it cannot reach the
// database its leases end with their trust window and it runs nothing.
func (c *Coordinator) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Status{Trusted: time.Now().Before(c.trustUntil), LastRenewal: c.renewed, Error: c.renewErr}
}

// Owner reports whether this instance holds a trusted lease on schedule.
func (c *Coordinator) Owner(schedule string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.owned[schedule]
	return ok && time.Now().Before(c.trustUntil)
}

// Holds implements schedule.Holder: whether this instance holds the
// lease of schedule, trusted or not (an instance that cannot reach the
// database keeps its schedules armed, to admit their fires again once it
// renews). A schedule taken over here is resumed or unparked through
// Options.Acquired.
func (c *Coordinator) Holds(schedule string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.owned[schedule]
	return ok
}

// Owned returns how many schedules this instance holds trusted leases on
// (none once its trust window ended without a renewal).
func (c *Coordinator) Owned() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !time.Now().Before(c.trustUntil) {
		return 0
	}
	return len(c.owned)
}

// Stop ends the heartbeat, marks the instance stopped and hands every
// lease it still holds to the others (see giveBack), so that they resume
// its schedules at once. Safe before Start and
// twice.
func (c *Coordinator) Stop(ctx context.Context) error {
	unrun, ok := c.halt()
	if !ok {
		return nil
	}
	var errs []error
	// Marked stopped first: the others, told the leases are free, count
	// the live instances without this one, and take them all.
	if _, err := c.pool.Exec(ctx, "UPDATE "+c.t("instances")+" SET stopped = true WHERE id = $1", c.o.InstanceID); err != nil {
		errs = append(errs, fmt.Errorf("mark instance stopped: %w", err))
	}
	if err := c.giveBack(ctx, nil, unrun, true); err != nil {
		errs = append(errs, fmt.Errorf("give leases back: %w", err))
	}
	if _, err := c.pool.Exec(ctx, "DELETE FROM "+c.t("task_claims")+" WHERE instance = $1", c.o.InstanceID); err != nil {
		errs = append(errs, fmt.Errorf("give task claims back: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("fom: cluster: stop %s: %w", c.o.InstanceID, err)
	}
	return nil
}

// Drain begins a graceful stop: the instance is marked stopped (the
// others count it out of their shares), and the leases of the schedules
// not in a round are handed to the others at once and they told (see
// giveBack), so that they resume them before their next fires; the rest
// follow as their rounds end, at the renewals, and at Stop. No lease is
// taken after it. An App
// drains before it stops its schedules: their fires, refused here, run
// on time elsewhere, where stopping first, then giving every lease back,
// would leave them to run late, or be folded into one, at the takeover.
func (c *Coordinator) Drain(ctx context.Context) {
	c.mu.Lock()
	if c.stop == nil || c.draining {
		c.mu.Unlock()
		return
	}
	c.draining = true
	names := make([]string, 0, len(c.owned))
	for s := range c.owned {
		names = append(names, s)
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, c.o.RenewEvery)
	defer cancel()
	c.tickStatements.Add(1)
	if _, err := c.pool.Exec(ctx, "UPDATE "+c.t("instances")+" SET stopped = true WHERE id = $1", c.o.InstanceID); err != nil {
		c.log.Warn("marking this instance stopped failed; its leases are given back at stop", zap.Error(err))
		return
	}
	c.release(ctx, names, len(names), "at stop")
}

// Abandon ends the heartbeat and forgets every lease without telling the
// database: what a crash leaves behind. For tests of failover.
func (c *Coordinator) Abandon() { c.halt() }

// halt stops the loop and the heralds' recording, and drops local
// ownership; it returns the fires recorded ahead and not run. False if
// not started.
func (c *Coordinator) halt() ([]unrunFire, bool) {
	c.mu.Lock()
	stop, done := c.stop, c.done
	c.stop, c.done, c.ready = nil, nil, false
	c.slots.Each(func(_ int64, sl *slot) {
		if sl.Armed == nil || sl.Armed.Stop() {
			c.heraldWG.Done()
		}
	})
	c.slots.Clear()
	c.holding = false
	if c.rekick != nil {
		c.rekick.Stop()
	}
	c.mu.Unlock()
	if stop == nil {
		return nil, false
	}
	close(stop)
	<-done // a tick under way ends first
	c.heraldWG.Wait()
	c.mu.Lock()
	unrun := c.takeHeraldsLocked(nil)
	c.owned, c.trustUntil, c.epoch = map[string]int64{}, time.Time{}, -1
	c.ownedGen++
	c.mu.Unlock()
	return unrun, true
}
