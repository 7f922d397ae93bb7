package pgcluster

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"go.uber.org/zap"
)

// Leases move between live instances in two ways. A graceful stop hands
// each of its leases to a live instance that declared the schedule, in
// the giver's transaction (giveBack), and tells it (leases:handed:<id>):
// the taker reads its leases (takeHanded), one statement, and resumes
// what is new. A rebalance (an instance joined, a schedule no longer run
// here) leaves them free and tells every instance (leases:free): each
// takes its share (takeFree), one statement. A notification lost, the
// next renewal finds the leases all the same: the renewal returns every
// lease this instance holds, and a lease it did not know of is taken
// there (adopt).

// freed asks for takeFree: another instance gave leases back.
func (c *Coordinator) freed() { signal(c.free) }

// signal asks the loop for what ch stands for: once, however often asked
// before the loop comes to it.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// lockTakeable reports whether leases may be taken now by one statement,
// and then returns with c.mu held: not draining (nothing is taken then),
// and within the trust window (outside it, a whole tick runs instead,
// here).
func (c *Coordinator) lockTakeable(ctx context.Context) bool {
	c.mu.Lock()
	if c.draining {
		c.mu.Unlock()
		return false
	}
	if !time.Now().Before(c.trustUntil) {
		c.mu.Unlock()
		c.tick(ctx)
		return false
	}
	return true
}

// takeFree takes this instance's share of the leases another one left
// free (a rebalance), in one statement (takeFreeSQL). A tick's heartbeat
// and renewal are left to their time: the trust window does not need
// them yet, and they would delay the takeover (a renewal reads every
// lease this instance holds, and folds its fires into them every few)
// while the leases' next fires, often within the second, wait for it. Outside the trust window it is a whole tick;
// draining, nothing.
func (c *Coordinator) takeFree(ctx context.Context) {
	if !c.lockTakeable(ctx) {
		return
	}
	owned := maps.Clone(c.owned)
	all := c.namesLocked()
	c.mu.Unlock()
	names := c.wanted(all)
	_, have, _ := shareOf(names, owned, 1)
	c.tickStatements.Add(1)
	rows, err := c.pool.Query(ctx, c.takeFreeSQL(), c.o.InstanceID, names, len(names), have)
	taken := map[string]int64{}
	from := map[string]time.Time{}
	if err == nil {
		var s string
		var term int64
		var last pgtype.Timestamptz
		_, err = pgx.ForEachRow(rows, []any{&s, &term, &last}, func() error {
			taken[s] = term
			if p, ok := resumeFrom(last, pgtype.Timestamptz{}); ok {
				from[s] = p
			}
			return nil
		})
	}
	if err != nil {
		c.log.Warn("taking leases given back failed; they are taken at the next renewal", zap.Error(err))
		return
	}
	c.took(taken, from)
}

// takeFreeSQL takes, in one statement, up to this instance's ($1) share of
// the leases among $2 (of $3 names) given back, less the $4 it holds:
// the share of the live instances counted in the same statement. A lease
// given back has no owner whose fires could still be recorded (the giver
// wrote its last fire, and took its unrun ones out, in the transaction
// that gave it back), so none is locked first, as acquire does for the
// leases of an instance that died.
func (c *Coordinator) takeFreeSQL() string {
	return `UPDATE ` + c.t("leases") + ` AS l SET owner = $1, term = l.term + 1
		FROM (SELECT schedule FROM ` + c.t("leases") + ` WHERE schedule = ANY($2) AND owner = ''
		      ORDER BY random()
		      LIMIT greatest(0, ceil($3::numeric / greatest(1, (SELECT count(*) FROM ` + c.t("instances") + `
		            WHERE NOT stopped AND leases_until > now()))) - $4)
		      FOR UPDATE SKIP LOCKED) AS free
		WHERE l.schedule = free.schedule
		RETURNING l.schedule, l.term, l.last_fire`
}

// handedOver asks for takeHanded: another instance handed leases to
// this one.
func (c *Coordinator) handedOver() { signal(c.handed) }

// takeHanded reads the leases this instance holds, and takes those
// handed to it (adopt): one statement, without a renewal first (see
// takeFree). Outside the trust window it is a whole tick; draining,
// nothing: Stop hands over every lease the instance holds, those handed
// to it late included.
func (c *Coordinator) takeHanded(ctx context.Context) {
	if !c.lockTakeable(ctx) {
		return
	}
	c.mu.Unlock()
	c.tickStatements.Add(1)
	held, err := c.heldLeases(ctx)
	if err != nil {
		c.log.Warn("taking leases handed over failed; they are taken at the next renewal", zap.Error(err))
		return
	}
	c.mu.Lock()
	if c.draining { // since the check above: Stop hands them over
		c.mu.Unlock()
		return
	}
	fresh := c.freshLocked(held)
	for s, h := range fresh {
		c.ownLocked(s, h.term)
	}
	c.mu.Unlock()
	c.adopt(ctx, fresh)
}

// heldLease is a lease this instance holds in the database: its term and
// last fire.
type heldLease struct {
	term int64
	last pgtype.Timestamptz
}

// collectHeld reads rows of (schedule, term, last_fire).
func collectHeld(rows pgx.Rows) (map[string]heldLease, error) {
	held := map[string]heldLease{}
	var s string
	var h heldLease
	_, err := pgx.ForEachRow(rows, []any{&s, &h.term, &h.last}, func() error { held[s] = h; return nil })
	return held, err
}

// freshLocked is the leases of held this instance did not know of in
// their term: handed to it. Called with c.mu held.
func (c *Coordinator) freshLocked(held map[string]heldLease) map[string]heldLease {
	fresh := map[string]heldLease{}
	for s, h := range held {
		if t, ok := c.owned[s]; !ok || t != h.term {
			fresh[s] = h
		}
	}
	return fresh
}

// adopt takes the leases handed to this instance, already in c.owned:
// those of the schedules it runs resume from their last fire (took), the
// others are given back at once.
func (c *Coordinator) adopt(ctx context.Context, fresh map[string]heldLease) {
	if len(fresh) == 0 {
		return
	}
	names := c.wanted(slices.Sorted(maps.Keys(fresh)))
	taken := make(map[string]int64, len(names))
	from := make(map[string]time.Time, len(names))
	for _, s := range names {
		taken[s] = fresh[s].term
		if p, ok := resumeFrom(fresh[s].last, pgtype.Timestamptz{}); ok {
			from[s] = p
		}
		delete(fresh, s)
	}
	c.took(taken, from)
	if len(fresh) > 0 {
		unwanted := slices.Collect(maps.Keys(fresh))
		c.release(ctx, unwanted, len(unwanted), "not run here")
	}
}
