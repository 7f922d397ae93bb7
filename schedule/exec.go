package schedule

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"go.uber.org/zap"

	"github.com/fom-go/fom/config"
	"github.com/fom-go/fom/statistics"
)

// submitAll submits tasks into g and seals it. With a helper (the round
// goroutine lending itself as a worker), the first task that gets through
// the checks is kept for it and returned instead of going to the pool.
func (c *Context) submitAll(gen *generation, g *group, tasks []Task, ts taskSettings, helper *worker) (kept *taskRun) {
	if ts.overTime > 0 && !ts.eachTask {
		gen.tmo.add(deadline{at: g.start.Add(ts.overTime), group: g})
	}
	g.reserve(len(tasks))
	// A batch's tasks are submitted at its start, and so are a round's
	// Fixed ones (no job code ran since); a round's from Tasks after it,
	// one instant for the burst.
	now := g.start
	if !g.batch && c.job.Tasks != nil {
		now = c.clk.Now()
	}
	for _, t := range tasks {
		if r := c.submitOne(gen, g, t, ts, now, helper != nil && kept == nil); r != nil {
			kept = r
		}
	}
	g.seal()
	return kept
}

// submitOne submits a task; every path ends with an outcome for it, except
// that with keep a task ready to run is returned to the caller instead.
func (c *Context) submitOne(gen *generation, g *group, t Task, ts taskSettings, now time.Time, keep bool) *taskRun {
	if t == nil {
		run := g.newRun(nil, "<nil>", now)
		g.add(run)
		c.settle(run, Result{Status: StatusFailed, Err: fmt.Errorf("schedule %s: nil task", c.name)})
		return nil
	}
	run := g.newRun(t, t.ID(), now)
	g.add(run)
	if gen.stopping.Load() || canceled(gen, g) {
		c.settle(run, Result{Status: StatusCanceled, Err: c.taskErr(run.id, ErrCanceled, "schedule is stopping")})
		return nil
	}
	if run.held = c.conflicts.acquireFrom(&gen.lastHeld, run.id, ts.conflicts); run.held == nil {
		c.settle(run, Result{Status: StatusConflict, Err: c.taskErr(run.id, ErrConflict, "")})
		return nil
	}
	if keep {
		run.direct = true
		return run
	}
	g.hold() // the pool's, until a worker is done with the run or the pool drops it
	ok, closed := gen.pool.submit(run)
	if ok {
		return nil
	}
	g.release()
	c.releaseID(run)
	if closed {
		c.settle(run, Result{Status: StatusCanceled, Err: c.taskErr(run.id, ErrCanceled, "schedule is stopping")})
		return nil
	}
	s := c.cfg.Current()
	c.settle(run, Result{Status: StatusRejected, Err: c.taskErr(run.id, ErrRejected, fmt.Sprintf("queueSize %d, threadMax %d", s.QueueSize, s.ThreadMax))})
	return nil
}

// canceled reports whether g's context is done, once gen.stopping is
// known to be false. A round's context is the generation's, which only a
// stop cancels, after it sets stopping: so only a batch's (the caller's)
// is read. With thousands of schedules the generation's context is one
// more line to fetch from memory on every fire.
func canceled(gen *generation, g *group) bool {
	return g.ctx != gen.ctx && g.ctx.Err() != nil
}

func (c *Context) releaseID(r *taskRun) {
	if h := r.held; h != nil {
		r.held = nil
		c.conflicts.release(h)
	}
}

// begin marks a run as started unless its outcome is already decided.
func (r *taskRun) begin(now time.Time, ctx context.Context, cancel context.CancelFunc) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return false
	}
	r.started, r.ctx, r.cancel = now, ctx, cancel
	return true
}

func (r *taskRun) startInfo() (time.Time, context.CancelFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started, r.cancel
}

// exec runs a task on a worker.
func (c *Context) exec(gen *generation, run *taskRun) {
	defer c.releaseID(run)
	if gen.stopping.Load() || canceled(gen, run.group) {
		c.settle(run, Result{Status: StatusCanceled, Err: c.taskErr(run.id, ErrCanceled, "canceled before it started")})
		return
	}
	ts := c.taskSettings()
	// A task's context answers FromContext and Logger. It needs a cancel of
	// its own only when a deadline can fire; a shutdown cancels it through
	// the generation's context, after the OnCancel hooks.
	var rc *runCtx
	if g := run.group; g.recycled && run == &g.first {
		// The run is used again by a later round or batch, and the task
		// may keep its context past its return: a context of its own,
		// which the next run of the same task under the same parent
		// shares (a recurring task, a flood of delayed ones).
		rc = gen.taskCtx(g.ctx, c, run.id)
	} else {
		rc = &run.rctx
		*rc = runCtx{Context: run.group.ctx, c: c, id: run.id}
	}
	var ctx context.Context = rc
	cancel := context.CancelFunc(func() {})
	if ts.overTime > 0 || run.group.hasDeadline() {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	// A run kept at submission starts right after it, on the same
	// goroutine: its submission instant is its start (one clock reading
	// less per fire).
	start := run.submitted
	if !run.direct {
		start = c.clk.Now()
	}
	if !run.begin(start, ctx, cancel) {
		return // timed out or canceled while queued; already recorded
	}
	ownDeadline := ts.overTime > 0 && ts.eachTask
	if ownDeadline {
		run.group.keep.Store(true) // the timeout watcher may hold the run past its end
		gen.tmo.add(deadline{at: start.Add(ts.overTime), run: run})
	}
	endSpan := func(Result) {}
	if gen.tracer != nil {
		ctx, endSpan = gen.tracer.StartTask(ctx, c.name, run.id, run.group.number, run.group.batch)
	}
	value, err := c.call(ctx, run.task)
	// The cost is the time since the start (the end is Started+Cost): on
	// the real clock, Since reads only the monotonic clock, where time.Now
	// reads the wall clock too, a second call.
	cost := c.clk.Since(start)
	// The id stops counting as running before the outcome is delivered:
	// whoever learns that the round or batch ended (Wait, OnComplete) may
	// run the same id again at once.
	c.releaseID(run)
	if ownDeadline { // nothing else puts a run in the heap: no lock to take otherwise
		gen.tmo.remove(run, nil)
	}
	res := Result{Status: StatusSuccess, Value: value, Started: start, Cost: cost}
	if err != nil {
		res.Status, res.Err = StatusFailed, err
		if gen.stopping.Load() && errors.Is(err, context.Canceled) {
			res.Status = StatusCanceled
		}
	}
	c.settle(run, res)
	endSpan(run.outcome())
	if a, ok := run.task.(AfterExecer); ok {
		final := run.outcome()
		if perr := safeCall(func() { a.AfterExec(ctx, final) }); perr != nil {
			c.log.Error("AfterExec panicked", zap.String("task", run.id), zap.Error(perr))
		}
	}
}

// call runs BeforeExec and Exec, turning a panic into a *PanicError.
func (c *Context) call(ctx context.Context, t Task) (value any, err error) {
	defer func() {
		if p := recover(); p != nil {
			value, err = nil, newPanicError(p)
		}
	}()
	if b, ok := t.(BeforeExecer); ok {
		if err := b.BeforeExec(ctx); err != nil {
			return nil, fmt.Errorf("BeforeExec: %w", err)
		}
	}
	return t.Exec(ctx)
}

// settle records res as run's outcome if none was recorded yet.
func (c *Context) settle(run *taskRun, res Result) {
	if res, ok := run.claim(res); ok {
		c.deliver(run, res)
	}
}

// deliver publishes run's outcome, res as claimed: counters, recorder,
// OnResult, latch.
func (c *Context) deliver(run *taskRun, res Result) {
	at := endOf(res)
	c.stats.Record(statistics.Sample{Round: run.group.number, Batch: run.group.batch, At: at, TaskID: res.TaskID, Status: int(res.Status), Started: res.Started, Cost: res.Cost, Err: res.Err})
	if c.rec != nil { // the name is not read otherwise: it is on a line a fire does not reach
		c.rec.RecordResult(c.name, res)
	}
	if res.Status != StatusSuccess {
		c.log.Warn("task "+res.Status.String(), zap.String("task", res.TaskID), zap.Duration("cost", res.Cost), zap.Error(res.Err))
	} else if ce := c.checkDebug("task succeeded"); ce != nil {
		ce.Write(zap.String("task", res.TaskID), zap.Duration("cost", res.Cost))
	}
	if c.job.OnResult != nil {
		if err := safeCall(func() { c.job.OnResult(res) }); err != nil {
			c.log.Error("OnResult panicked", zap.Error(err))
		}
	}
	run.group.deliver(run, res, at)
}

// expire handles a deadline from the timeout heap. A timed-out task that
// ignores its context keeps its worker: the stall check then looks after
// the tasks queued behind it.
func (c *Context) expire(gen *generation, d deadline) {
	switch {
	case d.stall != nil:
		c.checkStall(gen, c.clk.Now())
		return
	case d.run != nil:
		c.interrupt(d.at, StatusTimeout, ErrTimeout, "", d.run)
	default:
		c.interrupt(d.at, StatusTimeout, ErrTimeout, "round deadline", d.group.unfinished()...)
	}
	if s := c.cfg.Current(); s.TaskOverTime > 0 {
		// From the deadline, not from a reading made after interrupting:
		// the round may have completed (and the clock moved on) meanwhile,
		// and a check armed that late would miss a task queued since.
		armStall(gen, d.at.Add(s.TaskOverTime))
	}
}

// interrupt decides a timeout or cancellation for runs. Every outcome is
// claimed first, so neither a task returning at the same moment nor a
// worker freed by a cancellation can start or overwrite another of them;
// then, per started run, the OnCancel hooks, then its context, then the
// latch. A task that ignores its context keeps its worker and its id until
// it returns.
func (c *Context) interrupt(at time.Time, st Status, sentinel error, detail string, runs ...*taskRun) {
	if sentinel == ErrTimeout && detail == "" {
		detail = "taskOverTime " + c.cfg.Get(config.KeyTaskOverTime)
	}
	type claimed struct {
		r       *taskRun
		res     Result
		started time.Time
		cancel  context.CancelFunc
	}
	var won []claimed
	for _, r := range runs {
		started, cancel := r.startInfo()
		res := Result{Status: st, Started: started, Err: c.taskErr(r.id, sentinel, detail)}
		if !started.IsZero() {
			res.Cost = at.Sub(started)
		}
		if res, ok := r.claim(res); ok {
			won = append(won, claimed{r, res, started, cancel})
		}
	}
	for _, w := range won {
		if !w.started.IsZero() {
			c.cancelHooks(w.r, c.clk.Now().Sub(w.started))
			w.cancel()
		}
		c.deliver(w.r, w.res)
	}
}

func (c *Context) cancelHooks(r *taskRun, elapsed time.Duration) {
	if c.job.OnCancel != nil {
		if err := safeCall(func() { c.job.OnCancel(r.id, elapsed) }); err != nil {
			c.log.Error("OnCancel panicked", zap.Error(err))
		}
	}
	if cn, ok := r.task.(Canceler); ok {
		if err := safeCall(func() { cn.OnCancel(elapsed) }); err != nil {
			c.log.Error("task OnCancel panicked", zap.String("task", r.id), zap.Error(err))
		}
	}
}

func (c *Context) taskErr(id string, sentinel error, detail string) error {
	return &TaskError{Schedule: c.name, TaskID: id, Err: sentinel, Detail: detail}
}

func newPanicError(p any) *PanicError { return &PanicError{Value: p, Stack: debug.Stack()} }

// safeCall runs fn, turning a panic into an error.
func safeCall(fn func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = newPanicError(p)
		}
	}()
	fn()
	return nil
}

type scheduleKey struct{}
type taskKey struct{}
type actorKey struct{}

// WithActor returns ctx carrying who acts (an operator, a service): an
// exec-now asked for with it names them in the run history.
func WithActor(ctx context.Context, who string) context.Context {
	return context.WithValue(ctx, actorKey{}, who)
}

// ActorOf returns who ctx acts for, "" when nobody said.
func ActorOf(ctx context.Context) string {
	who, _ := ctx.Value(actorKey{}).(string)
	return who
}

// taskCtx returns a task context under parent for task id of c: the last
// one made, when it is the same, else a new one, kept for the next. A
// runCtx is never changed once made here, so tasks share it safely.
func (gen *generation) taskCtx(parent context.Context, c *Context, id string) *runCtx {
	last := &gen.lastCtx
	if rc := last.Load(); rc != nil && rc.Context == parent && rc.id == id {
		return rc
	}
	rc := &runCtx{Context: parent, c: c, id: id}
	last.Store(rc)
	return rc
}

// runCtx is a task's context: one allocation instead of two WithValue.
// It is 64 bytes, a size class whose objects start on a line: in the
// 48-byte class, one in two straddled two lines, and a round reads it.
type runCtx struct {
	context.Context
	c  *Context
	id string
	_  [24]byte
}

func (r *runCtx) Value(key any) any {
	switch key.(type) {
	case scheduleKey:
		return r.c
	case taskKey:
		return r.id
	}
	return r.Context.Value(key)
}

// FromContext returns the schedule a task runs in, or nil.
func FromContext(ctx context.Context) *Context {
	c, _ := ctx.Value(scheduleKey{}).(*Context)
	return c
}

// Logger returns the logger of the schedule a task runs in, with the task
// id; a no-op logger outside a task.
func Logger(ctx context.Context) *zap.Logger {
	c := FromContext(ctx)
	if c == nil {
		return zap.NewNop()
	}
	if id, ok := ctx.Value(taskKey{}).(string); ok {
		return c.log.With(zap.String("task", id))
	}
	return c.log
}
