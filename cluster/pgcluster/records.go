package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/fom-go/fom/internal/pgbulk"
)

// Admit implements schedule.Gate: the owner, within its trust window,
// records the fire; a fire is admitted when this instance recorded it.
// A fire at or before the last one admitted here is refused at once.
func (c *Coordinator) Admit(ctx context.Context, schedule string, planned time.Time) (bool, error) {
	return c.admit(ctx, schedule, nil, planned)
}

// admit is Admit, through g (nil: none) when the schedule's own gate
// asks.
func (c *Coordinator) admit(ctx context.Context, schedule string, g *gate, planned time.Time) (bool, error) {
	c.mu.Lock()
	h := c.heraldLocked(schedule, g)
	term, owned := c.termLocked(schedule, h)
	now := time.Now()
	if !owned || !now.Before(c.trustUntil) {
		c.mu.Unlock()
		return false, nil
	}
	gen := c.ownedGen
	if ok, decided := c.admitHerald(ctx, schedule, h, planned, term, now); decided { // releases c.mu
		return ok, nil
	}
	c.fires.Add(1)
	req := admission{schedule: schedule, planned: planned, term: term, gen: gen, reply: make(chan verdict, 1)}
	select {
	case c.admits <- req:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	select {
	case a := <-req.reply:
		return a.ok, a.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// ranFire is a fire recorded when due and admitted.
type ranFire struct {
	planned time.Time
	term    int64
	batch   int64
}

// Withdraw implements schedule.Withdrawer: a fire admitted here did not
// run (its schedule stopped before the round began). It is kept as a
// fire recorded and not run: out of the renewal's fold, and taken out of
// the records with the lease, so that the next owner does not resume past
// it (at a graceful stop, a fire admitted just before the drain, whose
// schedule then stops before its round, would be lost). Admitted again
// here, it runs.
func (c *Coordinator) Withdraw(schedule string, planned time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.heralds[schedule]; h != nil && h.state == admitted && h.planned.Equal(planned) {
		h.state, h.withdrawn = recorded, true // h.ok holds
		return
	}
	if f, ok := c.ran[schedule]; ok && f.planned.Equal(planned) {
		delete(c.ran, schedule)
		c.putHeraldLocked(&herald{schedule: schedule, planned: planned, term: f.term, state: recorded, ok: true, batch: f.batch, withdrawn: true})
	}
}

// admission is a fire waiting to be recorded.
type admission struct {
	schedule string
	planned  time.Time
	term     int64
	gen      uint64 // the generation of owned term was read at
	reply    chan verdict
}

// verdict is the answer to a fire's admission.
type verdict struct {
	ok  bool
	err error
}

// maxAdmitBatch bounds the fires recorded by one statement.
const maxAdmitBatch = 2000

// admitLoop records fires in batches: the fires asked for while one batch
// is written go in the next, in one statement. Fires due at one instant
// (an aligned burst) cost a few statements, not one round trip each.
func (c *Coordinator) admitLoop(stop chan struct{}, done chan struct{}) {
	defer close(done)
	batch := make([]admission, 0, 64)
	for {
		select {
		case <-stop:
			for { // answer what is still queued
				select {
				case r := <-c.admits:
					r.reply <- verdict{err: errors.New("fom: cluster: stopping")}
				default:
					return
				}
			}
		case r := <-c.admits:
			batch = append(batch[:0], r)
		drain:
			for len(batch) < maxAdmitBatch {
				select {
				case r := <-c.admits:
					batch = append(batch, r)
				default:
					break drain
				}
			}
			c.record(batch, stop)
		}
	}
}

// recordRetry is the pause before a fire record is asked again.
const recordRetry = 50 * time.Millisecond

// record writes a batch of fires, each fenced by its lease term, and
// answers each: admitted when this batch recorded it. It stops asking
// again when stop closes.
//
// A statement can take place though its answer is lost (the connection
// cut after the commit). Refused then, its fires would be recorded and
// never run: here or anywhere, since the next owner resumes after them. So
// a failed statement is asked again, while the leases are trusted and the
// renewal interval lasts, and the retry admits the fires this batch did
// record (its owner and batch number).
func (c *Coordinator) record(batch []admission, stop chan struct{}) {
	id := c.batches.Add(1)
	ok, err := c.recordRetrying(batch, id, stop)
	if err == nil {
		c.mu.Lock()
		for i, r := range batch {
			if ok[i] {
				c.ran[r.schedule] = ranFire{planned: r.planned, term: r.term, batch: id}
			}
		}
		c.mu.Unlock()
	}
	for i, r := range batch {
		if err != nil {
			r.reply <- verdict{err: fmt.Errorf("record fire: %w", err)}
			continue
		}
		r.reply <- verdict{ok: ok[i]}
	}
}

// recordRetrying writes a batch as batch number id, as record does,
// asking again while the leases are trusted and the renewal interval
// lasts, and reports which fires it recorded.
func (c *Coordinator) recordRetrying(batch []admission, id int64, stop chan struct{}) ([]bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.o.RenewEvery)
	defer cancel()
	c.fireStatements.Add(1)
	ok, err := c.recordOnce(ctx, batch, id, false)
	first := err // why it asked again, kept when a retry is cut short by the deadline
	for err != nil && c.trusted() {
		select {
		case <-time.After(recordRetry):
		case <-ctx.Done():
		case <-stop:
		}
		if ctx.Err() != nil || closed(stop) {
			break
		}
		c.log.Warn("recording fires failed; asking again", zap.Error(err))
		c.fireStatements.Add(1)
		ok, err = c.recordOnce(ctx, batch, id, true)
	}
	if err != nil && err != first && ctx.Err() != nil {
		err = fmt.Errorf("%w (asked again until the renewal interval ran out: %w)", first, err)
	}
	return ok, err
}

// recordOnce writes the fires of batch whose leases hold into one row,
// the batch's (see doc.go): the owner's row in instances locked first (a
// taker of its leases locks it too, so a batch is recorded either before
// the taker reads the owner's records or after the lease moved), then
// the insert, whose own snapshot follows the lock, in one round trip.
//
// A batch whose fires are all of leases this instance knows in their
// term is recorded when its owner's epoch is still the one read with
// those leases, and its leases have not ended (fastBatchSQL): no
// transaction moved one of its leases away since, so each is this
// instance's, in that term. Otherwise, or when the epoch moved, each
// fire's lease is looked up (leasedBatchSQL): a fire is recorded when its
// schedule's lease is this instance's, in the fire's term, its leases
// not ended, and the fire comes after the lease's last recorded fire.
// Asked again (again: an answer lost), the row written before stays, and
// is what the batch admits.
func (c *Coordinator) recordOnce(ctx context.Context, batch []admission, id int64, again bool) ([]bool, error) {
	c.mu.Lock()
	epoch, owned := c.epoch, len(c.owned)
	for _, r := range batch {
		if r.gen == c.ownedGen {
			continue // still so
		}
		if t, ok := c.owned[r.schedule]; !ok || t != r.term {
			epoch = -1
			break
		}
	}
	c.mu.Unlock()
	n := 0
	var err error
	if epoch >= 0 {
		b, insert := c.fastBatchSQL(batch, id, epoch)
		n, err = c.sendBatch(ctx, b, insert)
	}
	if err == nil && n == 0 {
		if epoch >= 0 {
			c.fireStatements.Add(1)
		}
		b, insert := c.leasedBatchSQL(batch, id, owned)
		n, err = c.sendBatch(ctx, b, insert)
	}
	if err == nil && c.lostAnswer != nil {
		err = c.lostAnswer()
	}
	if err != nil || n == len(batch) || n == 0 && !again {
		return allOf(len(batch), err == nil && n > 0), err
	}
	// Some refused (a lease lost), or the batch was written before: what
	// its row holds is admitted.
	c.fireStatements.Add(1)
	return c.admittedOf(ctx, batch, `SELECT u.s, u.p FROM `+c.t("fire_batches")+` b, unnest(b.schedules, b.planned) AS u(s, p)
		WHERE b.owner = $1 AND b.batch = $2`, c.o.InstanceID, id)
}

// sendBatch sends the lock of this instance's row and insert, a batch's
// row (b its parameters), in one round trip, and returns how many fires
// the row holds: 0 when none was written.
func (c *Coordinator) sendBatch(ctx context.Context, b *pgbulk.Batch, insert string) (int, error) {
	var lock pgbulk.Batch
	lock.Arg(c.o.InstanceID)
	n := 0
	err := c.pool.AcquireFunc(ctx, func(conn *pgxpool.Conn) error {
		res, err := pgbulk.Send(ctx, conn.Conn(), &c.sendBuf, pgbulk.Statement{SQL: c.lockOwnRow("KEY SHARE"), Params: &lock}, pgbulk.Statement{SQL: insert, Params: b})
		if err == nil && len(res[1].Rows) > 0 { // none: none recorded now (none held, or asked again)
			n, err = strconv.Atoi(string(res[1].Rows[0][0]))
		}
		return err
	})
	return n, err
}

// fastBatchSQL is the insert of batch as batch number id when this
// instance's epoch is still epoch and its leases have not ended, and its
// parameters: the fires' schedules and planned times as two arrays.
func (c *Coordinator) fastBatchSQL(batch []admission, id int64, epoch int64) (*pgbulk.Batch, string) {
	schedules, planned := make([]string, len(batch)), make([]time.Time, len(batch))
	for i, r := range batch {
		schedules[i], planned[i] = r.schedule, r.planned
	}
	var b pgbulk.Batch
	owner := b.Arg(c.o.InstanceID)
	return &b, `INSERT INTO ` + c.t("fire_batches") + ` (owner, batch, schedules, planned)
		SELECT ` + owner + `::text, ` + b.Arg(id) + `::bigint, ` + b.Arg(schedules) + `::text[], ` + b.Arg(planned) + `::timestamptz[]
		FROM ` + c.t("instances") + ` WHERE id = ` + owner + `::text AND epoch = ` + b.Arg(epoch) + `::bigint AND leases_until > now()
		ON CONFLICT (owner, batch) DO NOTHING RETURNING cardinality(schedules)`
}

// leasedBatchSQL is the insert of the fires of batch whose leases hold,
// each looked up, as batch number id, and its parameters. A batch of a
// fair share of the instance's leases (it holds owned) checks them with
// one hash join on the instance's leases, read once; a smaller one looks
// each fire's lease up.
func (c *Coordinator) leasedBatchSQL(batch []admission, id int64, owned int) (*pgbulk.Batch, string) {
	// An aligned burst's fires share their planned instant, and a
	// settled cluster's leases mostly their term: sent once (pgbulk).
	b, f := fireCols(batch)
	owner, batchID := b.Arg(c.o.InstanceID), b.Arg(id)
	live := `EXISTS (SELECT 1 FROM ` + c.t("instances") + ` WHERE id = ` + owner + `::text AND leases_until > now())`
	leased := ` WHERE EXISTS (
			SELECT 1 FROM ` + c.t("leases") + ` l WHERE l.schedule = f.s AND l.owner = ` + owner + `::text AND l.term = f.t
			AND (l.last_fire IS NULL OR l.last_fire < f.p)) AND ` + live
	with := ""
	if len(batch) >= max(owned/8, 64) {
		with = `WITH mine AS MATERIALIZED (SELECT schedule, term, last_fire FROM ` + c.t("leases") + ` WHERE owner = ` + owner + `::text) `
		leased = ` JOIN mine ON mine.schedule = f.s AND mine.term = f.t AND (mine.last_fire IS NULL OR mine.last_fire < f.p) WHERE ` + live
	}
	return b, with + `INSERT INTO ` + c.t("fire_batches") + ` (owner, batch, schedules, planned)
		SELECT ` + owner + `::text, ` + batchID + `::bigint, array_agg(f.s), array_agg(f.p) FROM (` + f.SQL() + `) AS f` + leased + `
		HAVING count(*) > 0
		ON CONFLICT (owner, batch) DO NOTHING RETURNING cardinality(schedules)`
}

// fireCols is a batch's fires as the columns s (schedule), p (planned)
// and t (term).
func fireCols(batch []admission) (*pgbulk.Batch, *pgbulk.Selection) {
	var b pgbulk.Batch
	var f pgbulk.Selection
	pgbulk.Col(&b, &f, "s", "text", batch, func(a *admission) string { return a.schedule })
	pgbulk.Col(&b, &f, "p", "timestamptz", batch, func(a *admission) time.Time { return a.planned })
	pgbulk.Col(&b, &f, "t", "bigint", batch, func(a *admission) int64 { return a.term })
	return &b, &f
}

// allOf is n answers, each ok.
func allOf(n int, ok bool) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = ok
	}
	return out
}

// admittedOf runs sql, whose rows are the (schedule, planned) keys of the
// fires of batch admitted, and answers each fire.
func (c *Coordinator) admittedOf(ctx context.Context, batch []admission, sql string, args ...any) ([]bool, error) {
	rows, err := c.pool.Query(ctx, sql, args...)
	ok := make([]bool, len(batch))
	if err == nil {
		type key struct {
			s string
			p int64 // µs, the database's precision
		}
		at := make(map[key]int, len(batch))
		for i, r := range batch {
			at[key{r.schedule, r.planned.UnixMicro()}] = i
		}
		var s string
		var p time.Time
		_, err = pgx.ForEachRow(rows, []any{&s, &p}, func() error {
			if i, found := at[key{s, p.UnixMicro()}]; found {
				ok[i] = true
			}
			return nil
		})
	}
	if err == nil && c.lostAnswer != nil {
		err = c.lostAnswer()
	}
	return ok, err
}

// foldEvery is how many renewals apart an owner folds its fire batches
// into its leases' last_fire (and at a renewal that finds leases it did
// not know of). Folded at each renewal, every lease that fired was
// rewritten every few seconds, which the renewal of the instance's row no
// longer does; unfolded, a taker or a lease given back reads a few more
// batches.
const foldEvery = 3

// renew renews this instance's leases (its row in instances: the
// heartbeat, and the instant its leases end), and returns the leases it
// holds and its epoch. The epoch is read first, then the leases, in two
// statements: a transaction moving a lease away that commits between them
// bumps the epoch past the one returned, and the batches that follow look
// their leases up. Read in one statement (one snapshot), the leases
// could predate a take whose epoch the renewal's update, waiting on the
// taker's lock, returns. Every foldEvery renewals, and when a lease held
// is new to this instance (handed to it, or its own from before a
// restart), the fires recorded since the last fold are folded into the
// leases (fold) first, so that the plan of a lease adopted resumes after
// them.
//
// It also returns the leases held that this instance did not know of
// (freshLocked), read once for the fold and the tick: the tick holds
// leaseMu from here to setting owned, and a lease given back meanwhile
// waits for it (release folds under leaseMu before it drops the lease).
func (c *Coordinator) renew(ctx context.Context, draining bool) (held, fresh map[string]heldLease, epoch int64, err error) {
	err = c.pool.QueryRow(ctx, "UPDATE "+c.t("instances")+" SET heartbeat_at = now(), leases_until = now() + $3::interval, stopped = $2 WHERE id = $1 RETURNING epoch",
		c.o.InstanceID, draining, c.o.LeaseTTL).Scan(&epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		err = fmt.Errorf("instance %s has no row in instances", c.o.InstanceID)
	}
	if err != nil {
		return nil, nil, 0, err
	}
	if held, err = c.heldLeases(ctx); err != nil {
		return nil, nil, 0, err
	}
	c.mu.Lock()
	fresh = c.freshLocked(held)
	c.mu.Unlock()
	c.ticks++
	if len(fresh) > 0 || c.ticks%foldEvery == 1 {
		c.tickStatements.Add(1)
		if err := c.fold(ctx, held); err != nil {
			return nil, nil, 0, fmt.Errorf("fold the fires recorded into the leases: %w", err)
		}
		for s := range fresh { // their last fires, folded
			fresh[s] = held[s]
		}
	}
	return held, fresh, epoch, nil
}

// heldLeases reads the leases this instance holds.
func (c *Coordinator) heldLeases(ctx context.Context) (map[string]heldLease, error) {
	rows, err := c.pool.Query(ctx, "SELECT schedule, term, last_fire FROM "+c.t("leases")+" WHERE owner = $1", c.o.InstanceID)
	if err != nil {
		return nil, err
	}
	return collectHeld(rows)
}

// fold marks this instance's batches compacted, but the batches kept
// (fires recorded ahead and not yet run or given back: folded, a fire
// given back unrun would count as its schedule's last), and folds their
// fires into its leases' last_fire, which it updates in held. A taker of
// these leases reads foldEvery renewals of batches at most. The leases
// that fired are looked up by their key: a join of every lease held with
// the last fires, whose count the planner cannot guess, was planned as a
// nested loop over both.
func (c *Coordinator) fold(ctx context.Context, held map[string]heldLease) error {
	rows, err := c.pool.Query(ctx, `WITH done AS (
			UPDATE `+c.t("fire_batches")+` SET compacted = true WHERE owner = $1 AND NOT compacted AND batch <> ALL($2::bigint[])
			RETURNING schedules, planned),
		last AS MATERIALIZED (SELECT u.s, max(u.p) AS p FROM done, unnest(done.schedules, done.planned) AS u(s, p) GROUP BY u.s)
		UPDATE `+c.t("leases")+` l SET last_fire = greatest(l.last_fire, last.p) FROM last
		WHERE l.schedule = last.s AND l.owner = $1
		RETURNING l.schedule, l.last_fire`, c.o.InstanceID, c.kept())
	if err != nil {
		return err
	}
	var s string
	var last pgtype.Timestamptz
	_, err = pgx.ForEachRow(rows, []any{&s, &last}, func() error {
		if h, ok := held[s]; ok {
			h.last = last
			held[s] = h
		}
		return nil
	})
	return err
}

// lockOwnRow locks this instance's row in instances ($1) in mode: a
// batch of fires being recorded holds it in KEY SHARE (batches and
// heartbeats go on side by side), a taker of this instance's leases and
// a lease given back in UPDATE.
func (c *Coordinator) lockOwnRow(mode string) string {
	return "SELECT 1 FROM " + c.t("instances") + " WHERE id = $1 FOR " + mode
}

// kept is the batches of the heralds being recorded, or recorded and
// not yet run: compacted, a fire given back unrun would count as the
// schedule's last. Read off the heralds (a pass over a map of one entry a
// schedule, once a fold). A herald taken out of the map by a lease
// given back has its fire taken out of its batch in the same tick, before
// the next renewal.
func (c *Coordinator) kept() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []int64{} // never nil: sent as NULL, <> ALL would keep every batch
	for _, h := range c.heralds {
		if h.state == recording || h.state == recorded && h.ok {
			out = append(out, h.batch)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// giveBack gives back the leases of schedules (nil: every one) held by
// this instance, in one transaction with the removal of the records of
// their fires recorded ahead and not run (unrun): the next owner resumes
// from the last fire run here. The instance's row is locked first, so a
// batch being recorded finishes before the last fires are read, and one
// asked after the lease moved is refused; the lock is held for a few
// milliseconds, during which this instance's batches wait.
//
// Leaving (a graceful stop), each lease is handed to a live instance
// that declared its schedule, in the same statement (giveBackSQL), and
// that instance told (leases:handed:<id>); a lease no one else declared
// is left free. Otherwise every lease is left free, and the others told
// (leases:free) take their share of them.
func (c *Coordinator) giveBack(ctx context.Context, schedules []string, unrun []unrunFire, leaving bool) error {
	handed := map[string]int{}
	c.leaseMu.Lock()
	defer c.leaseMu.Unlock()
	var epoch int64
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, c.lockOwnRow("UPDATE"), c.o.InstanceID); err != nil {
			return err
		}
		// The batches that follow this transaction look their leases up,
		// until this instance knows the new epoch with its leases.
		if err := tx.QueryRow(ctx, "UPDATE "+c.t("instances")+" SET epoch = epoch + 1 WHERE id = $1 RETURNING epoch", c.o.InstanceID).Scan(&epoch); err != nil {
			return err
		}
		if err := c.removeUnrun(ctx, tx, unrun); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, c.giveBackSQL(), c.o.InstanceID, schedules, leaving)
		if err != nil {
			return err
		}
		var taker string
		var n int
		if _, err := pgx.ForEachRow(rows, []any{&taker, &n}, func() error { handed[taker] += n; return nil }); err != nil {
			return err
		}
		if c.o.Channel == "" {
			return nil
		}
		// The others take them at once, not at their next renewal: a
		// lease left free is a fire nobody admits.
		for _, taker := range slices.Sorted(maps.Keys(handed)) {
			payload := notifyFree
			if taker != "" {
				payload = notifyHanded + taker
			}
			if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", c.o.Channel, payload); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// c.owned lost the leases given back before this began: it holds the
	// leases of the new epoch if it held those of the one before (another
	// instance may have taken some since the last renewal read them).
	c.mu.Lock()
	if c.epoch == epoch-1 {
		c.epoch = epoch
	} else {
		c.epoch = -1
	}
	c.mu.Unlock()
	if len(handed) > 0 {
		c.log.Info("leases handed over", zap.Any("counts", handed))
	}
	return nil
}

// giveBackSQL gives back this instance's ($1) leases among $2 (NULL:
// every one), and returns how many went to each instance (an empty name
// for those left free). The last fire of each is the latest of its
// lease's and of this instance's batches not folded yet (foldEvery
// renewal intervals' at most), taken in one aggregate over both: a join of the
// leases with the batches' fires, whose count the planner cannot guess,
// was planned as a nested loop (seconds at a few thousand). The batches
// stay as they are, for the renewal to fold the other schedules' fires
// in; with no lease left (Stop after a drain), they are not read.
//
// With $3 (leaving), each lease goes to one of the live instances (whose
// leases live) that declared its schedule, in a new term: the giver, which
// still holds it, writes what the taker would read, and the
// taker's statement is off the path of the schedule's next fire. The
// takers are named in turn, the schedules with as many of them numbered
// together (the same takers, in the common case, each get as many). An
// instance whose declarations' digest is the giver's declared every
// schedule; the others' declarations are looked up by key (instances of
// one release share a digest, and a join of every declaration cost a
// third of the statement at 3 333 leases). A schedule that never fired
// here gets this instant as its last fire: the taker runs what falls
// after the handover. The takers' rows are locked in share mode: an
// instance marking itself stopped meanwhile waits, and is then not
// handed any (or, marked first, is not chosen). The rest is left free
// (no owner), its last fire this instant when it had none: the taker
// resumes from the last fire, or from the give-back.
//
// A set of names is matched by IN (SELECT unnest(...)), hashed, where =
// ANY of a parameter is read element by element for each fire in a
// generic plan.
func (c *Coordinator) giveBackSQL() string {
	return `WITH given AS MATERIALIZED (
			SELECT s, max(p) AS p FROM (
				SELECT schedule AS s, last_fire AS p, true AS leased FROM ` + c.t("leases") + `
				WHERE owner = $1 AND ($2::text[] IS NULL OR schedule IN (SELECT unnest($2::text[])))
				UNION ALL
				SELECT u.s, u.p, false FROM ` + c.t("fire_batches") + ` b, unnest(b.schedules, b.planned) AS u(s, p)
				WHERE b.owner = $1 AND NOT b.compacted AND ($2::text[] IS NULL OR u.s IN (SELECT unnest($2::text[])))
				AND EXISTS (SELECT 1 FROM ` + c.t("leases") + ` WHERE owner = $1)) AS x
			GROUP BY s HAVING bool_or(leased)),
		takers AS MATERIALIZED (SELECT id, decl_digest <> '' AND decl_digest = (SELECT decl_digest FROM ` + c.t("instances") + ` WHERE id = $1) AS same
			FROM ` + c.t("instances") + `
			WHERE $3 AND id <> $1 AND NOT stopped AND leases_until > now() FOR SHARE),
		cands AS MATERIALIZED (SELECT g.s, g.p, (SELECT array_agg(t.id ORDER BY t.id) FROM takers t WHERE t.same OR EXISTS (
				SELECT 1 FROM ` + c.t("declarations") + ` d WHERE d.instance = t.id AND d.schedule = g.s)) AS ids
			FROM given g),
		pick AS MATERIALIZED (SELECT s, p, ids[1 + (row_number() OVER (PARTITION BY cardinality(ids))) % cardinality(ids)] AS id FROM cands WHERE ids IS NOT NULL),
		handed AS (UPDATE ` + c.t("leases") + ` l SET owner = pick.id, term = l.term + 1, last_fire = coalesce(pick.p, now())
			FROM pick WHERE l.schedule = pick.s AND l.owner = $1
			RETURNING pick.id),
		freed AS (UPDATE ` + c.t("leases") + ` l SET owner = '', last_fire = coalesce(given.p, now())
			FROM given WHERE l.schedule = given.s AND l.owner = $1 AND given.s NOT IN (SELECT s FROM pick)
			RETURNING 1)
		SELECT id, count(*) FROM handed GROUP BY id
		UNION ALL SELECT '', count(*) FROM freed HAVING count(*) > 0`
}

// lastFires reads, in tx, the last fire recorded by the previous owners
// prev of schedules taken from them (after their rows were locked), and
// writes it into the leases, so that the next taker finds it there. It
// returns each schedule's last fire.
func (c *Coordinator) lastFires(ctx context.Context, tx pgx.Tx, prev, taken []string) (map[string]time.Time, error) {
	rows, err := tx.Query(ctx, `WITH last AS (
			SELECT u.s, max(u.p) AS p FROM `+c.t("fire_batches")+` b, unnest(b.schedules, b.planned) AS u(s, p)
			WHERE b.owner = ANY($1) AND NOT b.compacted AND u.s IN (SELECT unnest($2::text[])) GROUP BY u.s)
		UPDATE `+c.t("leases")+` l SET last_fire = greatest(l.last_fire, last.p) FROM last
		WHERE l.schedule = last.s RETURNING l.schedule, l.last_fire`, prev, taken)
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	var s string
	var p time.Time
	_, err = pgx.ForEachRow(rows, []any{&s, &p}, func() error { out[s] = p; return nil })
	return out, err
}

// firesPruneEvery is how often an instance prunes the fire records, and
// firesKept how long a record is kept: a schedule's last fire is in its
// lease, and a record is only read while not compacted (a new owner
// reads the previous one's). Every few minutes keeps the table to a few
// minutes of batches.
const (
	firesPruneEvery = 5 * time.Minute
	firesKept       = 10 * time.Minute
)

// pruneFires deletes the batches recorded more than firesKept ago that
// no one will read: compacted, or of an instance that holds no lease
// (every one taken over, or given back).
func (c *Coordinator) pruneFires(ctx context.Context) {
	tag, err := c.pool.Exec(ctx, `DELETE FROM `+c.t("fire_batches")+` b WHERE b.recorded_at < now() - $1::interval
		AND (b.compacted OR NOT EXISTS (SELECT 1 FROM `+c.t("leases")+` l WHERE l.owner = b.owner))`, firesKept)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("pruning fire records failed", zap.Error(err))
		}
		return
	}
	if n := tag.RowsAffected(); n > 0 {
		c.log.Debug("fire records pruned", zap.Int64("batches", n))
	}
}
