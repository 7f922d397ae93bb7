package schedule

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/fom-go/fom/internal/clockx"
	"github.com/fom-go/fom/schedule/wheel"
	"github.com/fom-go/fom/statistics"
)

// An activation (one start-to-stop cycle, a *loop) holds no goroutine while
// it sleeps: the next fire is one timer, on the app's shared wheel or a
// runtime timer, whose callback starts a round goroutine. That goroutine
// runs rounds until the next fire is in the future, arms the timer again
// and ends. So an idle schedule costs a timer entry, not a parked goroutine
// and its stack, and a fire costs one goroutine start.
//
// Ownership is what keeps this race-free. Under c.mu, SLEEPING means the
// armed timer owns the activation and no goroutine of it is awake. Whoever
// takes a sleeping schedule out of SLEEPING (the timer's callback, ExecNow,
// a plan edit, Shutdown, Close) first disarms the timer (bumping l.armed
// and clearing l.timer; a wheel's callback is told its timer's id, which
// arming again changes), so a callback already on its way finds itself
// stale and does nothing: exactly one of them acts. In RUNNING the round goroutine owns
// the activation, and the others only leave requests (execRequested, the
// stop channel) that it reads between rounds.

// step is what an activation does next.
type step int

const (
	stepSleep  step = iota // a wait is armed; SLEEPING
	stepRound              // run a round now
	stepStop               // terminate the activation
	stepInited             // a managed pool's round is over: back to INITED
)

// decideLocked chooses the step after a round or a wake-up, given the next
// fire and now, a clock reading; called with c.mu held by the
// activation's owner. It arms the wait for stepSleep and moves to STOPPING
// for a stop the schedule decides.
//
// now may be a little old (the end of the round just run): the wait is
// armed from it to next (armLocked), so the fire is due at next however
// old now is, and a next that fell between now and the present only makes
// the timer due at once, rather than the round run here. The dead time
// bounds the armed wait the same way.
func (c *Context) decideLocked(l *loop, now, next time.Time, ok bool) step {
	if c.state == Stopping {
		return stepStop
	}
	if !ok {
		if c.plan == nil {
			c.loop = nil
			c.next = time.Time{}
			c.setState(Inited)
			l.cancel() // its Tasks and OnComplete are over
			return stepInited
		}
		c.log.Info("plan has no further fire; stopping")
		c.stopCause = stopPlanEnded
		c.selfStopLocked(l)
		return stepStop
	}
	// Comparisons follow clockx.Until: monotonic for a fire derived from a
	// clock reading (fixedRate, fixedDelay), wall time for a calendar one.
	if c.dead != 0 && now.UnixNano() >= c.dead { // wall time, as the config's deadTime
		c.stopCause = stopDeadTime
		c.selfStopLocked(l)
		return stepStop
	}
	c.next = next
	if !now.Before(next) {
		return stepRound
	}
	if c.state != Sleeping {
		c.setState(Sleeping)
	}
	c.announceLocked(next)
	c.armLocked(l, now)
	return stepSleep
}

// announceLocked tells a gate that is an Announcer of the planned fire
// next (asserted here rather than kept: a Context keeps its size class).
func (c *Context) announceLocked(next time.Time) {
	if c.gate != nil {
		if a, ok := c.gate.(Announcer); ok {
			a.Announce(c.name, next)
		}
	}
}

// goLocked carries out a step for a caller that does not own the
// activation's goroutine (Startup, the timer, ExecNow, a plan edit): a
// round or a stop gets a goroutine of its own. Called with c.mu held.
func (c *Context) goLocked(l *loop, st step, planned time.Time) {
	switch st {
	case stepRound:
		c.setState(Running) // the round goroutine owns the activation from here
		l.manual, l.asked = l.asked, false
		if l.lend == lendOffered { // the wake-up's goroutine runs it (loopWake.RunLent, runOn)
			l.planned, l.lend = planned, lendTaken
			return
		}
		if c.runners != nil {
			l.planned = planned
			c.runners.rounds(l)
		} else {
			go c.runRounds(l, planned, nil, time.Time{})
		}
	case stepStop:
		go c.finish(l)
	case stepInited:
		close(l.done)
	}
}

// armLocked arms the wait for c.next, bounded by the dead time and maxWait;
// now is a clock reading.
func (c *Context) armLocked(l *loop, now time.Time) {
	at := c.next
	if c.dead != 0 && c.dead < at.UnixNano() {
		at = time.Unix(0, c.dead)
	}
	// One subtraction (monotonic when both readings have it, as
	// clockx.Until) rather than adding maxWait to now and comparing: this
	// runs on every fire.
	wait := min(at.Sub(now), maxWait)
	l.armed++
	l.parked = false
	if c.wheel != nil {
		// The wake-up only decides under c.mu: quick enough to run on the
		// wheel's own goroutine. The round then runs on that goroutine
		// when the wheel lends it (loopWake.RunLent), else on a runner.
		// The loop is the callback and the handle is its field: no
		// allocation per fire.
		// The wait counts from now, the reading it was computed from, not
		// from the wheel's own later one.
		if c.wheel.SetInlineFrom(&l.wt, now, wait, (*loopWake)(l)) == nil {
			l.timer = &l.wt
			return
		}
	}
	if wait == maxWait {
		at = now.Add(maxWait)
	}
	id := l.armed
	l.timer = clockx.AfterFuncAt(c.clk, at, func() { c.wake(l, id) })
}

// loopWake is a loop as the wheel's callback of its armed wait.
type loopWake loop

// Fire is the armed wait's callback on the wheel: it is stale unless the
// armed wait is still this wheel timer (a disarm sets l.timer to nil, and
// arming again sets a timer of another id).
func (lw *loopWake) Fire(id uint64) { lw.FireAt(id, lw.c.clk.Now()) }

var _ wheel.TimedCallback = (*loopWake)(nil)

// FireAt is Fire told the wheel's reading of its clock (a
// wheel.TimedCallback). With runners, the wake-up is theirs (runOn), as it
// is: the wheel's goroutine reads nothing of the schedule but its runners.
// Without, it decides from now, reads no clock and starts a goroutine for
// the round.
func (lw *loopWake) FireAt(id uint64, now time.Time) {
	if rs := lw.rs; rs != nil {
		rs.wake(lw, id)
		return
	}
	lw.fire(id, now, onWheel)
}

// runOn is the wake-up FireAt handed to a runner, which runs the round it
// starts, if any.
func (lw *loopWake) runOn(rn *runner, id uint64) {
	l := (*loop)(lw)
	c := l.c
	now := c.clk.Now()
	start := now // the round's, unless the wake-up waits for the lock
	if !c.mu.TryLock() {
		c.mu.Lock()
		start = time.Time{}
	}
	taken := lw.fireLocked(id, now, onRunner)
	c.mu.Unlock()
	if taken {
		c.runRounds(l, l.planned, rn, start)
	}
}

var _ wheel.Lender = (*loopWake)(nil)

// FireLend is FireAt on a goroutine the wheel lends (wheel.Lender): a
// round then runs there (RunLent) rather than on a runner, with no
// hand-off to another goroutine. A schedule whose lock is held (an edit,
// a page view) is handed to a runner instead, to wait for it there: the
// wheel lends its goroutine to the fires due with this one in turn, and
// none of them waits for another schedule's lock.
func (lw *loopWake) FireLend(id uint64, now time.Time) bool {
	c := lw.c
	if !c.mu.TryLock() {
		lw.FireAt(id, now)
		return false
	}
	defer c.mu.Unlock()
	return lw.fireLocked(id, now, onLent)
}

// RunLent runs the round FireLend took on, on the wheel's goroutine, with
// a runner kept in that goroutine's slot for its memory and label.
func (lw *loopWake) RunLent(local *any) {
	l := (*loop)(lw)
	rn, _ := (*local).(*runner)
	if rn == nil {
		rn = newRunner(0)
		*local = rn
	}
	l.c.runRounds(l, l.planned, rn, time.Time{})
}

// wakeOn is the goroutine a wake-up runs on.
type wakeOn uint8

const (
	onWheel  wakeOn = iota // the wheel's, which only decides
	onLent                 // the wheel's, lent for the round (RunLent)
	onRunner               // a runner's, which runs the round (runOn)
)

// fire is the wake-up, from a reading now. On a lent goroutine (but for a
// gated round) or a runner, a round it starts is left to the caller, which
// it reports.
func (lw *loopWake) fire(id uint64, now time.Time, on wakeOn) bool {
	lw.c.mu.Lock()
	defer lw.c.mu.Unlock()
	return lw.fireLocked(id, now, on)
}

// fireLocked is fire with the schedule's lock held.
func (lw *loopWake) fireLocked(id uint64, now time.Time, on wakeOn) bool {
	l := (*loop)(lw)
	c := l.c
	if l.timer != &l.wt || l.wt.ID() != id || c.state != Sleeping {
		return false // disarmed: someone else took the schedule
	}
	if on == onRunner || on == onLent && c.gate == nil { // a gated round first asks the store: a wait the wheel's goroutine does not take
		l.lend = lendOffered
	}
	c.wokenLocked(l, now)
	taken := l.lend == lendTaken
	l.lend = lendNone
	return taken
}

// lendState is whether a wake-up runs on a goroutine the wheel lends.
type lendState uint8

const (
	lendNone    lendState = iota
	lendOffered           // goLocked leaves a round to the wake-up's goroutine
	lendTaken             // it did
)

// disarmLocked takes the armed wait away from its timer: the timer is
// stopped, and a callback already on its way finds itself stale.
func (c *Context) disarmLocked(l *loop) {
	l.armed++
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
}

// wake is the armed wait's callback. It runs on the wheel's advancing
// goroutine or a timer goroutine, so it only decides and hands a round or
// a stop to a goroutine of its own.
func (c *Context) wake(l *loop, id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.armed != id || c.state != Sleeping {
		return // disarmed: someone else took the schedule
	}
	c.wokenLocked(l, c.clk.Now())
}

// wokenLocked goes on from a wait that came to its end; now is a clock
// reading taken when it did.
func (c *Context) wokenLocked(l *loop, now time.Time) {
	l.timer = nil
	l.armed++
	// Re-checked against wall time: a wait cut short by maxWait, or a
	// clock step, just arms again.
	c.goLocked(l, c.decideLocked(l, now, c.next, true), c.next)
}

// runRounds is the round goroutine: it runs rounds until the next fire is in
// the future (then the armed timer owns the activation), a managed pool's
// round is over, or the activation stops. woke, when not zero, is the
// clock reading the wake-up decided from, just before on this goroutine
// and with no wait for a lock since: the first round's start, if no gate
// is asked first (one clock reading less per fire; a reading costs a
// tenth of a microsecond on a VM).
func (c *Context) runRounds(l *loop, planned time.Time, rn *runner, woke time.Time) {
	manual := l.manual
	cause, by := CausePlan, ""
	switch {
	case manual:
		cause, by = CauseExec, nameOf(l.askedBy) // written only while sleeping
	case l.pinned:
		cause = CauseStart
	}
	for {
		var r Round
		var spare *group  // the round's group, for the runner's next round once the plan has read r
		var now time.Time // the latest clock reading: the round's end, or a reading after the gate
		gated := c.gate != nil && !manual
		if gated {
			woke = time.Time{} // the gate may take a while
		}
		refused := gated && !c.admit(l, planned)
		if refused {
			// Not this process's fire: the plan goes on from it.
			select {
			case <-l.stop:
				c.finish(l)
				return
			default:
			}
			c.mu.Lock()
			r = Round{Number: c.rounds, Planned: planned, Start: planned, End: planned}
			c.mu.Unlock()
			now = c.clk.Now() // the gate may have taken a while
		} else {
			var ran bool
			if r, spare, ran = c.runRound(l, l.gen, planned, cause, by, rn, woke); !ran {
				if w, ok := c.gate.(Withdrawer); ok && gated {
					w.Withdraw(c.name, planned)
				}
				c.finish(l)
				return
			}
			now = r.End // read when its last task ended: one clock reading less per fire
		}
		woke = time.Time{}
		c.mu.Lock()
		again := c.execRequested
		c.execRequested = false
		cause, by = CausePlan, ""
		if again {
			cause, by = CauseRerun, nameOf(c.execBy)
		}
		plan, ver := c.plan, c.planVer
		c.mu.Unlock()
		var next time.Time
		ok := true
		switch {
		case again:
			next = c.clk.Now()
			now = next
		case plan == nil:
			ok = false
		default:
			next, ok = plan.Next(r) // may be the job's own code: outside the lock
		}
		c.mu.Lock()
		l.prev, l.pinned = timesOf(r), false
		manual = again // an exec-now re-run is not a planned fire
		switch {
		case c.execRequested && !again: // asked for while the next fire was computed
			// After a re-run (again) the next round is already now: a
			// request that came meanwhile is its own round, left queued
			// for the loop to take after this one, not merged into it.
			c.execRequested = false
			next, ok, manual = c.clk.Now(), true, true
			now = next
			cause, by = CauseRerun, nameOf(c.execBy)
		case !again && ver != c.planVer: // edited while the round ran; config plans only
			next, ok = time.Time{}, false
			if c.plan != nil {
				next, ok = c.plan.Next(r)
			}
		case !again && !c.resumeFrom.IsZero() && c.plan != nil && c.job.Plan == nil: // Resume during the round
			next, ok = c.resumeNextLocked(l, c.resumeFrom, c.resumeMissed)
			now = c.clk.Now()
			if ok && !now.Before(next) {
				c.announceLocked(next) // a missed fire, due at once: recorded with the others resumed
			}
		}
		resumed := !c.resumeFrom.IsZero()
		c.resumeFrom = time.Time{}
		st := c.decideLocked(l, now, next, ok)
		if st == stepSleep && refused && !again && !resumed {
			c.parkLocked(l)
		}
		c.mu.Unlock()
		if spare != nil {
			rn.keep(spare)
		}
		switch st {
		case stepRound:
			planned = next
		case stepStop:
			c.finish(l)
			return
		case stepInited:
			close(l.done)
			return
		default:
			return
		}
	}
}

// admit asks the gate whether this process runs the fire planned.
func (c *Context) admit(l *loop, planned time.Time) bool {
	ok, err := c.gate.Admit(l.ctx, c.name, planned)
	switch {
	case err != nil && l.ctx.Err() != nil:
		// Stopped while its fire waited: a graceful stop of an instance
		// of a cluster stops every schedule so, each fire run elsewhere.
		c.log.Debug("fire not admitted: the schedule stopped", zap.Time("planned", planned))
		return false
	case err != nil:
		c.log.Warn("fire not admitted", zap.Time("planned", planned), zap.Error(err))
		return false
	}
	return ok
}

// finish terminates the activation and marks it done.
func (c *Context) finish(l *loop) {
	defer close(l.done)
	c.terminate(l, l.gen)
}

// selfStopLocked moves to STOPPING on the schedule's own account
// (deadTime, or a plan with no further fire); called with c.mu held.
func (c *Context) selfStopLocked(l *loop) {
	if c.state != Stopping {
		c.log.Info("stopping by itself")
		c.setState(Stopping)
	}
	l.requestStop()
}

// runRound runs one round: create tasks, submit them, wait on the latch,
// call OnComplete. ran is false when a stop came before the round began.
// spare, when not nil, is the round's group, which nothing holds once the
// caller is done with r: r.Results is its slice unless copied, and a plan
// reads r (Plan), so the caller hands it to rn for its next round only
// after the plan ran. start, when not zero, is the round's start, read
// by the caller; else runRound reads it.
func (c *Context) runRound(l *loop, gen *generation, planned time.Time, cause Cause, by string, rn *runner, start time.Time) (r Round, spare *group, ran bool) {
	c.mu.Lock()
	if c.state == Stopping {
		c.mu.Unlock()
		return Round{}, nil, false
	}
	if c.catchUp {
		if cause == CausePlan {
			cause = CauseCatchUp
		}
		c.catchUp = false
	}
	c.setState(Running)
	c.rounds++
	n := c.rounds
	if start.IsZero() {
		start = c.clk.Now()
	}
	c.last, c.next = start, time.Time{}
	c.mu.Unlock()

	if ce := c.checkDebug("round started"); ce != nil {
		ce.Write(zap.Int64("round", n), zap.Time("planned", planned), zap.Duration("late", start.Sub(planned)))
	}
	ts := c.taskSettings()
	parent, endSpan := gen.ctx, func(Round) {}
	if gen.tracer != nil {
		parent, endSpan = gen.tracer.StartRound(gen.ctx, RoundStart{Schedule: c.name, Number: n, Cause: cause, Planned: planned, Start: start})
	}
	g := rn.roundGroup(parent, n, planned, start)
	tasks, err := c.job.Fixed, error(nil)
	if c.job.Tasks != nil {
		tasks, err = c.createTasks(l.ctx)
	}
	// The group is used again, by the next round this runner runs, when
	// its one run ran here to its end and no stop came meanwhile: then
	// nothing but this goroutine holds it once the round is complete. (A
	// stop that came while the run was lent may still be reading it from
	// a goroutine of its own, below.)
	reuse := false
	if err != nil {
		c.log.Error("creating tasks failed", zap.Int64("round", n), zap.Error(err))
		run := g.newRun(nil, c.name+".Tasks", start)
		g.add(run)
		c.settle(run, Result{Status: StatusFailed, Err: fmt.Errorf("schedule %s: create tasks: %w", c.name, err)})
	}
	if w := c.lend(gen, ts); w != nil {
		kept := c.submitAll(gen, g, tasks, ts, w)
		gen.pool.help(w, kept, rn)
		c.mu.Lock()
		c.lending = false
		// A stop that came while this goroutine lent itself cancels the
		// round's runs from a goroutine of its own (stopLocked), which may
		// still be reading the kept run when the task's own outcome won:
		// the group is then not used again.
		stopped := c.state == Stopping
		c.mu.Unlock()
		reuse = kept != nil && err == nil && len(tasks) == 1 && !stopped
	} else {
		c.submitAll(gen, g, tasks, ts, nil)
	}
	if !g.finished() {
		select {
		case <-g.wait():
		case <-l.stop:
			c.cancelAll(gen)
			<-g.wait()
		}
	}
	if g.hasDeadline() { // set by this goroutine before submitting, or never
		gen.tmo.remove(nil, g)
	}
	r = g.round(c.clk)
	r.Cause, r.By = cause, by
	endSpan(r)
	if reuse && c.keepsRounds() {
		r.Results = slices.Clone(r.Results) // the group's own slice is used again
	}
	c.complete(l.ctx, r)
	if reuse && rn != nil {
		spare = g
	}
	return r, spare, true
}

// keepsRounds reports whether code other than fom's may keep a round's
// results past the round: OnComplete or a recorder. fom's statistics copy
// what they keep, runRounds keeps only the round's times, and a plan reads
// the previous round only during Next (Plan), before the runner that ran
// the round can use its group again.
func (c *Context) keepsRounds() bool {
	return c.job.OnComplete != nil || c.rec != nil
}

// lend makes the round goroutine a worker of the pool for this round, when
// a worker slot is free and no deadline can fire: a round of one trivial
// task then runs on one goroutine, with no hand-off to a worker and back.
// With a deadline it would not do: a task that ignores its context must
// not keep the round from completing at the deadline.
//
// While it lends itself, the round goroutine cannot watch for a stop, so
// a Shutdown cancels the round's tasks from a goroutine of its own
// (stopLocked); c.lending, under c.mu, tells it to.
func (c *Context) lend(gen *generation, ts taskSettings) *worker {
	if ts.overTime > 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == Stopping {
		return nil
	}
	w := gen.pool.lend()
	c.lending = w != nil
	return w
}

func (c *Context) createTasks(ctx context.Context) (tasks []Task, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = newPanicError(p)
		}
	}()
	return c.job.Tasks(ctx)
}

// complete finishes a round or batch: OnComplete, statistics, counters.
func (c *Context) complete(ctx context.Context, r Round) {
	if c.job.OnComplete != nil {
		if err := safeCall(func() { c.job.OnComplete(ctx, r) }); err != nil {
			c.log.Error("OnComplete panicked", zap.Error(err))
		}
	}
	if c.rec != nil {
		c.rec.RecordRound(c.name, r)
	}
	c.mu.Lock()
	if !r.Batch {
		o := OutcomeOf(r)
		c.lastOutcome, c.lastLate = codeOf(o), r.Start.Sub(r.Planned)
		if o == OutcomeSuccess {
			c.lastSuccess, c.failingSince, c.failStreak = r.End.UnixNano(), 0, 0
		} else {
			if c.failStreak == 0 {
				c.failingSince = r.Start.UnixNano()
			}
			c.failStreak++
		}
	}
	c.notifyLocked()
	c.mu.Unlock()
	c.recordRound(r) // with the round's lateness
	if ce := c.checkDebug("round completed"); ce != nil {
		counts := map[string]int{}
		for _, res := range r.Results {
			counts[res.Status.String()]++
		}
		ce.Write(zap.Int64("number", r.Number), zap.Bool("batch", r.Batch), zap.Int("tasks", len(r.Results)),
			zap.Any("outcomes", counts), zap.Duration("took", r.End.Sub(r.Start)))
	}
}

// recordRound adds the round to the run history. A round of one task (the
// common case) passes its task without allocating.
func (c *Context) recordRound(r Round) {
	var one [1]statistics.TaskSample
	ts := one[:0]
	if len(r.Results) > 1 {
		ts = make([]statistics.TaskSample, 0, len(r.Results))
	}
	for _, res := range r.Results {
		ts = append(ts, statistics.TaskSample{ID: res.TaskID, Status: int(res.Status), Started: res.Started, Cost: res.Cost, Err: res.Err})
	}
	c.stats.RecordRound(statistics.RoundSample{Number: r.Number, Batch: r.Batch, Cause: r.Cause.String(), By: r.By,
		Planned: r.Planned, Start: r.Start, End: r.End, Tasks: ts})
}

// terminate ends a generation: cancel what runs, drop what waits, wait for
// every goroutine, call OnTerminate, and move to STOPPED.
func (c *Context) terminate(l *loop, gen *generation) {
	l.requestStop()
	c.cancelAll(gen)
	c.cancelDelayed(gen)
	gen.pool.wg.Wait()
	gen.cancel()
	gen.wg.Wait()
	c.mu.Lock()
	sum := Summary{Rounds: c.rounds, Last: c.last}
	c.mu.Unlock()
	if c.job.OnTerminate != nil {
		if err := safeCall(func() { c.job.OnTerminate(sum) }); err != nil {
			c.log.Error("OnTerminate panicked", zap.Error(err))
		}
	}
	c.mu.Lock()
	c.next = time.Time{}
	c.setState(Stopped)
	c.mu.Unlock()
	c.log.Info("stopped", zap.Int64("rounds", sum.Rounds))
}

// cancelAll cancels every running task and drops every queued one. Safe to
// call more than once.
func (c *Context) cancelAll(gen *generation) {
	gen.stopping.Store(true)
	gen.tmo.removeStall(&gen.stall) // nothing is queued any more
	for _, r := range gen.pool.close() {
		c.settle(r, Result{Status: StatusCanceled, Err: c.taskErr(r.id, ErrCanceled, "dropped from the queue by shutdown")})
		c.releaseID(r)
		r.group.release()
	}
	c.interrupt(c.clk.Now(), StatusCanceled, ErrCanceled, "canceled by shutdown", gen.pool.activeRuns()...)
	gen.cancel() // tasks without a cancel of their own see it here, after the hooks
}
