package schedule

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

type event int

const (
	evFire event = iota
	evExec
	evReplan
	evStop
	evDead
)

// run is the scheduler goroutine.
func (c *Context) run(l *loop, gen *generation, next time.Time, ok, pinned bool, prev Round) {
	defer close(l.done)
	for {
		var ev event
		switch {
		case ok:
			ev = c.sleep(l, next)
		case c.currentPlan() == nil:
			if c.backToInited() {
				return
			}
			ev = evStop
		default:
			c.log.Info("plan has no further fire; stopping")
			ev = evDead
		}
		switch ev {
		case evStop, evDead:
			if ev == evDead {
				c.selfStop(l)
			}
			c.terminate(l, gen)
			return
		case evReplan:
			if !pinned {
				if p := c.currentPlan(); p != nil {
					next, ok = p.Next(prev)
				} else {
					ok = false
				}
			}
			continue
		}
		planned := next
		if ev == evExec {
			planned = c.clk.Now()
		}
		r, ran := c.runRound(l, gen, planned)
		if !ran {
			c.terminate(l, gen)
			return
		}
		prev, pinned = r, false
		c.mu.Lock()
		again := c.execRequested
		c.execRequested = false
		plan := c.plan
		c.mu.Unlock()
		switch {
		case again:
			next, ok = c.clk.Now(), true
		case plan == nil:
			ok = false
		default:
			next, ok = plan.Next(r)
		}
	}
}

func (c *Context) currentPlan() Plan {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.plan
}

// backToInited ends a managed pool's round; false if a stop came first.
func (c *Context) backToInited() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == Stopping {
		return false
	}
	c.loop = nil
	c.next = time.Time{}
	c.setState(Inited)
	return true
}

// selfStop moves to STOPPING on the schedule's own account (deadTime, or a
// plan with no further fire).
func (c *Context) selfStop(l *loop) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != Stopping {
		c.log.Info("stopping by itself")
		c.setState(Stopping)
	}
	l.requestStop()
}

// sleep waits for the next fire, an exec-now, a plan change, a stop or the
// dead time. Waits are bounded by maxWait and re-checked against wall time.
func (c *Context) sleep(l *loop, next time.Time) event {
	c.mu.Lock()
	if c.state == Stopping {
		c.mu.Unlock()
		return evStop
	}
	c.next = next
	if c.state != Sleeping {
		c.setState(Sleeping)
	}
	c.mu.Unlock()
	for {
		dead := c.cfg.Settings().DeadTime
		if !dead.IsZero() && reached(c.clk, dead) {
			return evDead
		}
		if reached(c.clk, next) {
			return evFire
		}
		at := next
		if !dead.IsZero() && dead.Before(at) {
			at = dead
		}
		if limit := c.clk.Now().Add(maxWait); limit.Before(at) {
			at = limit
		}
		tm := c.waitUntil(l, at)
		select {
		case <-tm.ch:
			continue
		case <-l.fire: // may be stale; the loop re-checks the time
			tm.stop()
			continue
		case <-l.stop:
			tm.stop()
			return evStop
		case <-l.wake:
			tm.stop()
			c.mu.Lock()
			wake, replan := c.wakeRequested, c.replan
			c.wakeRequested, c.replan = false, false
			c.mu.Unlock()
			if wake {
				return evExec
			}
			if replan {
				return evReplan
			}
		}
	}
}

// wait is one armed wait: a runtime timer's channel, or a wheel timer that
// signals loop.fire.
type wait struct {
	ch   <-chan time.Time
	stop func() bool
}

// waitUntil arms a wait for at, on the shared wheel when there is one.
func (c *Context) waitUntil(l *loop, at time.Time) wait {
	if c.wheel != nil {
		if t := c.wheel.AfterFunc(wallUntil(c.clk, at), func() { signal(l.fire) }); t != nil {
			return wait{stop: t.Stop}
		}
	}
	tm := timerAt(c.clk, at)
	return wait{ch: tm.Chan(), stop: tm.Stop}
}

// runRound runs one round: create tasks, submit them, wait on the latch,
// call OnComplete. ran is false when a stop came before the round began.
func (c *Context) runRound(l *loop, gen *generation, planned time.Time) (r Round, ran bool) {
	c.mu.Lock()
	if c.state == Stopping {
		c.mu.Unlock()
		return Round{}, false
	}
	c.setState(Running)
	c.wakeRequested, c.replan = false, false
	select {
	case <-l.wake:
	default:
	}
	c.rounds++
	n := c.rounds
	start := c.clk.Now()
	c.last, c.next = start, time.Time{}
	c.mu.Unlock()

	if ce := c.log.Check(zapcore.DebugLevel, "round started"); ce != nil {
		ce.Write(zap.Int64("round", n), zap.Time("planned", planned), zap.Duration("late", start.Sub(planned)))
	}
	s := c.cfg.Settings()
	g := newGroup(gen.ctx, n, false, planned, start)
	tasks, err := c.createTasks(l.ctx)
	if err != nil {
		c.log.Error("creating tasks failed", zap.Int64("round", n), zap.Error(err))
		run := newRun(nil, c.name+".Tasks", g, start)
		g.add(run)
		c.settle(run, Result{Status: StatusFailed, Err: fmt.Errorf("schedule %s: create tasks: %w", c.name, err)})
	}
	c.submitAll(gen, g, tasks, s)
	select {
	case <-g.complete:
	case <-l.stop:
		c.cancelAll(gen)
		<-g.complete
	}
	gen.tmo.remove(nil, g)
	r = g.round(c.clk.Now())
	c.complete(l.ctx, r)
	return r, true
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
	c.rec.RecordRound(c.name, r)
	if !r.Batch {
		c.stats.RecordLateness(r.Start.Sub(r.Planned))
	}
	c.mu.Lock()
	c.notifyLocked()
	c.mu.Unlock()
	if ce := c.log.Check(zapcore.DebugLevel, "round completed"); ce != nil {
		counts := map[string]int{}
		for _, res := range r.Results {
			counts[res.Status.String()]++
		}
		ce.Write(zap.Int64("number", r.Number), zap.Bool("batch", r.Batch), zap.Int("tasks", len(r.Results)),
			zap.Any("outcomes", counts), zap.Duration("took", r.End.Sub(r.Start)))
	}
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
	for _, r := range gen.pool.close() {
		c.settle(r, Result{Status: StatusCanceled, Err: c.taskErr(r.id, ErrCanceled, "dropped from the queue by shutdown")})
		c.releaseID(r)
	}
	c.interrupt(c.clk.Now(), StatusCanceled, ErrCanceled, "canceled by shutdown", gen.pool.activeRuns()...)
	gen.cancel() // tasks without a cancel of their own see it here, after the hooks
}
