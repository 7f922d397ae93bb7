package pgcluster

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/fom-go/fom/internal/slots"
	"github.com/fom-go/fom/schedule"
)

// Fires recorded ahead. A schedule announces its next fire when it arms
// its wait (Announce): a herald. The heralds due within the same
// RecordAhead share a slot, whose time is RecordAhead before the slot's
// first instant; then the owner records them in one statement, fenced by
// their terms as every fire record is, and Admit at each fire's time finds
// it recorded. A herald's record and a lease given back are ordered by
// recLock, and both take the herald out of the map under c.mu, so a fire
// recorded ahead is either admitted here or taken out of the records with
// the lease: never both, never neither. While one waits to run, its
// batch stays uncompacted (kept), so its fire is not yet any lease's
// last.

// herald is a fire announced ahead.
type herald struct {
	schedule string
	inMap    bool // c.heralds[schedule] is this herald (see gate)
	planned  time.Time
	term     int64
	gen      uint64 // the generation of owned its term was read at (termLocked)
	state    heraldState
	// done is closed when the herald is recorded, or dropped unrecorded;
	// made by the first Admit that waits for it (most find it recorded),
	// and counted in waiters until each is back under c.mu.
	done    chan struct{}
	waiters int
	ok      bool  // the record was written by this instance
	batch   int64 // the batch recording it (0: none yet)
	// withdrawn: admitted, then not run (Withdraw); recorded again, and
	// past, it does not hold its lease back (release).
	withdrawn bool
}

// A herald's done closes when its fate is known: recorded (ok) or not.
// Admit waits for it, so a fire due at once (resumed after a takeover)
// is recorded with the others of its slot rather than on its own. A
// schedule's next announcement rewrites its herald in place once its fire
// is decided and no Admit waits for it: an aligned burst announces a
// fire a schedule, and with a new herald and channel each, announcing and
// admitting a fire cost 820 ns against 315–540 (BenchmarkAnnounceAdmit).

type heraldState uint8

const (
	announced heraldState = iota // waiting for its slot
	recording                    // in a statement; done closes on its answer
	recorded                     // answered: ok says whether it was written
	// admitted: run here. Kept in the map until the next announcement,
	// so that the same fire asked again is refused without a statement.
	admitted
)

// minAhead is the fewest fires a slot records ahead: a slot of fewer
// leaves them to be recorded when due. Recording ahead pays for a burst,
// where one statement admits hundreds of fires before their instant; and
// it widens, from a round trip to up to twice RecordAhead, the time in
// which a fire recorded by an owner that is then killed is run nowhere.
// A few fires a slot are not worth that.
const minAhead = 16

// slot is the heralds recorded together, and the timer that records them
// (nil while an acquisition holds them). A slot lists the heralds, not
// their schedules: looking each up again by name, cold by then, was most
// of a slot's record. A herald announced is in c.heralds; one replaced,
// taken out, or announced again into another slot is skipped.
type slot = slots.Slot[*herald, *time.Timer]

// unrunFire is a fire recorded ahead whose lease is given back before it
// ran: it is taken out of its batch's record.
type unrunFire struct {
	schedule string
	planned  time.Time
	batch    int64
}

// slotOf is the slot of a fire: the start of its RecordAhead-wide span,
// in Unix milliseconds.
func (c *Coordinator) slotOf(planned time.Time) int64 { return c.slots.Of(planned.UnixMilli()) }

// Announce implements schedule.Announcer: the owner records the fire
// RecordAhead before it is due (or at once, when it is due sooner). A
// later announcement of the schedule replaces it.
func (c *Coordinator) Announce(schedule string, planned time.Time) {
	c.announce(schedule, nil, planned)
}

// announce is Announce, through g (nil: none) when the schedule's own
// gate asks.
func (c *Coordinator) announce(schedule string, g *gate, planned time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.heraldLocked(schedule, g)
	term, owned := c.termLocked(schedule, h)
	if c.stop == nil || !owned {
		return
	}
	if h != nil {
		if h.planned.Equal(planned) && h.term == term {
			return
		}
		if h.state == announced {
			h.drop()
		}
	}
	if h != nil && h.waiters == 0 && (h.state == recorded || h.state == admitted) {
		*h = herald{schedule: schedule, inMap: true, planned: planned, term: term, gen: c.ownedGen} // held by none but the map
	} else {
		h = &herald{schedule: schedule, planned: planned, term: term, gen: c.ownedGen}
		c.putHeraldLocked(h)
	}
	if g != nil {
		g.h = h
	}
	k, sl, opened := c.slots.Add(planned.UnixMilli(), h)
	if !opened {
		return
	}
	c.heraldWG.Add(1)
	if !c.holding {
		c.armSlotLocked(k, sl)
	}
}

// armSlotLocked sets the timer that records a slot, RecordAhead before
// it (at once when that is past). Called with c.mu held.
func (c *Coordinator) armSlotLocked(k int64, sl *slot) {
	stop := c.stop
	at := time.UnixMilli(k).Add(-c.o.RecordAhead)
	sl.Armed = time.AfterFunc(time.Until(at), func() { c.recordSlot(k, stop) })
}

// hold keeps the slots announced from being recorded until release: the
// schedules an acquisition resumes announce their first fires, most of
// them due at once, and one statement records them together.
func (c *Coordinator) hold() {
	c.mu.Lock()
	c.holding = true
	c.mu.Unlock()
}

func (c *Coordinator) unhold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holding = false
	c.slots.Each(func(k int64, sl *slot) {
		if sl.Armed == nil {
			c.armSlotLocked(k, sl)
		}
	})
}

// drop ends an announced herald unrecorded: Admit records its fire when
// due. The herald is out of the map or about to be.
func (h *herald) drop() { h.decide(false) }

// decide ends a herald's wait: recorded, ok or not. Called with c.mu held.
func (h *herald) decide(ok bool) {
	h.state, h.ok = recorded, ok
	if h.done != nil {
		close(h.done)
		h.done = nil
	}
}

// wait returns what closes when h is decided, counting the caller among
// its waiters until it calls waited. Called with c.mu held.
func (h *herald) wait() <-chan struct{} {
	if h.done == nil {
		h.done = make(chan struct{})
	}
	h.waiters++
	return h.done
}

func (h *herald) waited() { h.waiters-- }

// recordSlot records the heralds of a slot whose time came.
func (c *Coordinator) recordSlot(k int64, stop chan struct{}) {
	defer c.heraldWG.Done()
	c.mu.Lock()
	sl := c.slots.Take(k)
	if c.stop != stop || sl == nil {
		c.mu.Unlock()
		return
	}
	trusted := time.Now().Before(c.trustUntil)
	// The batch's room is the last slot's, given back at its end: an
	// aligned burst's slot holds thousands, every second.
	batch, hs := slices.Grow(c.spareBatch, len(sl.Items)), slices.Grow(c.spareHeralds, len(sl.Items))
	c.spareBatch, c.spareHeralds = nil, nil
	defer func() {
		clear(batch)
		clear(hs)
		c.mu.Lock()
		c.spareBatch, c.spareHeralds = batch[:0], hs[:0]
		c.mu.Unlock()
	}()
	for _, h := range sl.Items {
		if h.state != announced || c.slotOf(h.planned) != k {
			continue // replaced, taken, or in another slot now
		}
		if term, ok := c.termLocked(h.schedule, h); !ok || term != h.term || !trusted {
			c.removeHeraldLocked(h)
			h.drop()
			continue
		}
		h.state = recording // and not taken twice: a herald announced twice into one slot is listed twice
		batch = append(batch, admission{schedule: h.schedule, planned: h.planned, term: h.term, gen: c.ownedGen})
		hs = append(hs, h)
	}
	c.slots.Recycle(sl.Items)
	if len(batch) < minAhead {
		for _, h := range hs {
			c.removeHeraldLocked(h)
			h.drop()
		}
		c.mu.Unlock()
		return
	}
	// The batch stays uncompacted while it is recorded, and then while a
	// fire of it waits to run (kept).
	id := c.batches.Add(1)
	for _, h := range hs {
		h.batch = id
	}
	c.mu.Unlock()
	c.recLock.RLock()
	ok, err := c.recordRetrying(batch, id, stop)
	c.recLock.RUnlock()
	if err != nil {
		c.log.Warn("recording fires ahead failed; they are recorded when due", zap.Int("fires", len(batch)), zap.Error(err))
	} else if refused := slices.Index(ok, false); refused >= 0 {
		// The leases given back took their heralds out first: a fire
		// refused here had its lease taken, expired, or fenced by a
		// later last fire, which this instance did not know of.
		r := batch[refused]
		c.log.Warn("fires recorded ahead were refused: their leases are not this instance's in their term, or record a later fire; they are asked again when due",
			zap.Int("fires", len(batch)), zap.Int("refused", len(ok)-countTrue(ok)),
			zap.String("schedule", r.schedule), zap.Time("planned", r.planned), zap.Int64("term", r.term))
	}
	c.mu.Lock()
	for i, h := range hs {
		h.decide(err == nil && ok[i])
	}
	c.mu.Unlock()
}

// admitHerald admits a fire announced ahead, once its slot's record
// answered: decided is false when it was not recorded (not announced,
// its slot too small, its record failed or refused), and Admit records it
// now. Called with c.mu held, which it releases: a fire whose slot has
// answered (the common case) is decided under that one lock.
//
// A fire at or before the last one admitted here (a herald admitted, or
// ran for the fires recorded when due) is refused. now is Admit's reading
// of the clock, read again after a wait.
func (c *Coordinator) admitHerald(ctx context.Context, schedule string, h *herald, planned time.Time, term int64, now time.Time) (ok, decided bool) {
	if h != nil && h.state == admitted && !planned.After(h.planned) {
		c.mu.Unlock()
		return false, true
	}
	if h == nil || !h.planned.Equal(planned) || h.term != term {
		last, ran := c.ran[schedule]
		c.mu.Unlock()
		return false, ran && !planned.After(last.planned)
	}
	if h.state != recorded {
		done := h.wait()
		c.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			c.mu.Lock()
			h.waited()
			c.mu.Unlock()
			return false, true
		}
		c.mu.Lock()
		h.waited()
		now = time.Now()
	}
	defer c.mu.Unlock()
	if h.state == admitted { // by another Admit of the same fire
		return false, true
	}
	inMap := h.inMap
	if !h.ok {
		c.removeHeraldLocked(h)
		return false, false
	}
	// A lease given back since took the herald out of the map (its fire
	// is taken out of the records with the lease) and the schedule out
	// of owned.
	t, owned := c.termLocked(schedule, h)
	ok = owned && t == term && now.Before(c.trustUntil)
	switch {
	case inMap && ok:
		h.state = admitted
	case inMap:
		c.removeHeraldLocked(h)
	}
	return ok, true
}

// heraldLocked is the herald of s in the map, or nil: g's last herald
// when it still is (no lookup by name), else looked up. Called with c.mu
// held.
func (c *Coordinator) heraldLocked(s string, g *gate) *herald {
	if g != nil && g.h != nil && g.h.inMap {
		return g.h
	}
	return c.heralds[s]
}

// putHeraldLocked makes h its schedule's herald in the map. Called with
// c.mu held.
func (c *Coordinator) putHeraldLocked(h *herald) {
	if old := c.heralds[h.schedule]; old != nil {
		old.inMap = false
	}
	c.heralds[h.schedule] = h
	h.inMap = true
}

// removeHeraldLocked takes h out of the map, if it is there. Called with
// c.mu held.
func (c *Coordinator) removeHeraldLocked(h *herald) {
	if h.inMap {
		delete(c.heralds, h.schedule)
		h.inMap = false
	}
}

// takeHeraldsLocked takes the heralds of schedules (nil: every one) out
// of the map and returns those recorded or being recorded: they are taken
// out of the records with their leases. Called with c.mu held.
func (c *Coordinator) takeHeraldsLocked(schedules []string) []unrunFire {
	var out []unrunFire
	take := func(s string) {
		h := c.heralds[s]
		if h == nil {
			return
		}
		c.removeHeraldLocked(h)
		switch h.state {
		case announced:
			h.drop()
		case admitted:
		default: // recording (its slot answers later) or recorded
			out = append(out, unrunFire{schedule: s, planned: h.planned, batch: h.batch})
		}
	}
	if schedules == nil {
		for s := range c.heralds {
			take(s)
		}
		return out
	}
	for _, s := range schedules {
		take(s)
	}
	return out
}

// removeUnrun takes the fires recorded ahead and not run out of their
// batches' records, in the transaction giving their leases back.
func (c *Coordinator) removeUnrun(ctx context.Context, tx pgx.Tx, fs []unrunFire) error {
	if len(fs) == 0 {
		return nil
	}
	names, planned, batches := make([]string, len(fs)), make([]time.Time, len(fs)), make([]int64, 0, len(fs))
	for i, f := range fs {
		names[i], planned[i] = f.schedule, f.planned
		if !slices.Contains(batches, f.batch) {
			batches = append(batches, f.batch)
		}
	}
	_, err := tx.Exec(ctx, "UPDATE "+c.t("fire_batches")+` b SET schedules = coalesce(k.s, '{}'), planned = coalesce(k.p, '{}')
		FROM (SELECT b2.batch, array_agg(u.s ORDER BY u.i) FILTER (WHERE x.s IS NULL) AS s, array_agg(u.p ORDER BY u.i) FILTER (WHERE x.s IS NULL) AS p
		      FROM `+c.t("fire_batches")+` b2
		      CROSS JOIN LATERAL unnest(b2.schedules, b2.planned) WITH ORDINALITY AS u(s, p, i)
		      LEFT JOIN unnest($2::text[], $3::timestamptz[]) AS x(s, p) ON x.s = u.s AND x.p = u.p
		      WHERE b2.owner = $1 AND b2.batch = ANY($4)
		      GROUP BY b2.batch) AS k
		WHERE b.owner = $1 AND b.batch = k.batch`, c.o.InstanceID, names, planned, batches)
	return err
}

// countTrue counts the true values of bs.
func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// gate is one schedule's gate (GateOf): the coordinator's, which reaches
// the schedule's herald through it rather than by a lookup by name (cold
// in an aligned burst, a few a fire were a tenth of its CPU).
type gate struct {
	c    *Coordinator
	name string
	h    *herald // the last herald announced through it, guarded by c.mu
}

// GateOf returns schedule's gate: the coordinator's, for that schedule
// alone (a schedule.Holder, Announcer and Withdrawer, as the coordinator
// is). Asked of another schedule, it answers as the coordinator does.
func (c *Coordinator) GateOf(name string) schedule.Gate {
	return &gate{c: c, name: name}
}

func (g *gate) Admit(ctx context.Context, schedule string, planned time.Time) (bool, error) {
	if schedule != g.name {
		return g.c.Admit(ctx, schedule, planned)
	}
	return g.c.admit(ctx, schedule, g, planned)
}

func (g *gate) Announce(schedule string, planned time.Time) {
	if schedule != g.name {
		g.c.Announce(schedule, planned)
		return
	}
	g.c.announce(schedule, g, planned)
}

func (g *gate) Holds(schedule string) bool { return g.c.Holds(schedule) }

func (g *gate) Withdraw(schedule string, planned time.Time) { g.c.Withdraw(schedule, planned) }
