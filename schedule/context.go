package schedule

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/fom-go/fom/config"
	"github.com/fom-go/fom/schedule/wheel"
	"github.com/fom-go/fom/statistics"
)

// Context is one schedule: its scheduler goroutine and state machine, its
// worker pool, timeouts, statistics counters and configuration.
//
// All state changes are made under mu. The scheduler goroutine makes every
// change except the two callers ask for directly (Startup and Shutdown), and
// it alone runs rounds, so rounds never overlap.
type Context struct {
	name      string
	cfg       *config.Config
	job       Job
	clk       clockwork.Clock
	log       *zap.Logger
	level     zap.AtomicLevel
	onLevel   func(zapcore.Level) error
	conflicts *Conflicts
	rec       Recorder
	stats     *statistics.Stats
	wheel     *wheel.Wheel // shared timer, or nil for runtime timers

	mu            sync.Mutex
	state         State
	plan          Plan
	gen           *generation
	loop          *loop
	execRequested bool // RUNNING: one re-run queued
	wakeRequested bool // SLEEPING: exec-now asked
	replan        bool // SLEEPING: the plan changed
	loaded        time.Time
	last          time.Time
	next          time.Time
	rounds        int64
	batches       int64
	changed       chan struct{} // made when someone waits; closed at the next state change or round end
}

// generation is what one start-to-stop cycle owns: a fresh pool, a timeout
// heap, and the context its tasks derive from.
type generation struct {
	ctx      context.Context // parent of task contexts; canceled last at stop
	cancel   context.CancelFunc
	pool     *pool
	tmo      *timeouts
	wg       sync.WaitGroup // timeout watcher, batch completions
	stopping atomic.Bool
	delayed  map[*Delayed]struct{} // pending SubmitAt batches; guarded by Context.mu
	wheel    *wheel.Wheel          // own wheel for SubmitAt when none is shared; made on first use, guarded by Context.mu
}

// loop is one run of the scheduler goroutine.
type loop struct {
	ctx    context.Context // passed to Tasks and OnComplete; canceled by Shutdown
	cancel context.CancelFunc
	stop   chan struct{} // closed when the context must stop
	wake   chan struct{} // exec-now or a plan change while sleeping
	fire   chan struct{} // signalled by the shared wheel when a wait ends
	done   chan struct{} // closed when the goroutine has returned
	once   sync.Once
}

func newLoop() *loop {
	ctx, cancel := context.WithCancel(context.Background())
	return &loop{ctx: ctx, cancel: cancel, stop: make(chan struct{}), wake: make(chan struct{}, 1), fire: make(chan struct{}, 1), done: make(chan struct{})}
}

func (l *loop) requestStop() {
	l.once.Do(func() {
		close(l.stop)
		l.cancel()
	})
}

// New builds a context for cfg's schedule. It starts no goroutine.
func New(cfg *config.Config, job Job, opts Options) (*Context, error) {
	if cfg == nil {
		return nil, fmt.Errorf("fom: new schedule: config: %w", ErrNilOption)
	}
	name := cfg.Schedule()
	if job.Tasks == nil {
		return nil, fmt.Errorf("fom: schedule %s: %w", name, ErrNoWork)
	}
	c := &Context{
		name: name, cfg: cfg, job: job,
		clk: opts.Clock, conflicts: opts.Conflicts, rec: opts.Recorder, stats: opts.Stats, wheel: opts.Wheel,
		level: zap.NewAtomicLevelAt(zapcore.InfoLevel),
	}
	if c.clk == nil {
		c.clk = clockwork.NewRealClock()
	}
	if c.conflicts == nil {
		c.conflicts = NewConflicts()
	}
	if c.rec == nil {
		c.rec = nopRecorder{}
	}
	if c.stats == nil {
		st, err := statistics.New(name, c.clk, statistics.DefaultSettings())
		if err != nil {
			return nil, err
		}
		c.stats = st
	}
	parent := opts.Logger
	if parent == nil {
		parent = zap.NewNop()
	}
	c.log = parent.WithOptions(zap.WrapCore(func(core zapcore.Core) zapcore.Core {
		return levelCore{Core: core, lvl: c.level}
	})).Named(name)
	c.plan = job.Plan
	if c.plan == nil {
		p, err := planOf(cfg.Settings())
		if err != nil {
			return nil, fmt.Errorf("fom: schedule %s: %w", name, err)
		}
		c.plan = p
	}
	cfg.Subscribe(c.onConfig)
	return c, nil
}

// Name returns the schedule's name.
func (c *Context) Name() string { return c.name }

// Config returns the schedule's configuration.
func (c *Context) Config() *config.Config { return c.cfg }

// Stats returns the schedule's statistics.
func (c *Context) Stats() *statistics.Stats { return c.stats }

// Logger returns the schedule's logger.
func (c *Context) Logger() *zap.Logger { return c.log }

// State returns the current state.
func (c *Context) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// setState changes the state; called with mu held.
func (c *Context) setState(s State) {
	if c.state != s {
		c.log.Debug("state", zap.Stringer("from", c.state), zap.Stringer("to", s))
	}
	c.state = s
	c.notifyLocked()
}

func (c *Context) notifyLocked() {
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// changes returns a channel closed at the next state change or round end.
func (c *Context) changes() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	return c.changed
}

// ensureGeneration returns the live generation, making one if needed;
// called with mu held.
func (c *Context) ensureGeneration() *generation {
	if c.gen != nil && !c.gen.stopping.Load() {
		return c.gen
	}
	g := &generation{}
	g.ctx, g.cancel = context.WithCancel(context.WithValue(context.Background(), scheduleKey{}, c))
	s := c.cfg.Settings()
	g.pool = newPool(c.clk, sizeOf(s), func(r *taskRun) { c.exec(g, r) })
	g.tmo = newTimeouts(c.clk, &g.wg, c.expire)
	c.gen = g
	return g
}

func sizeOf(s config.Settings) poolSize {
	return poolSize{core: s.ThreadCore, max: s.ThreadMax, queue: s.QueueSize, alive: s.ThreadAliveTime}
}

// Startup starts the scheduler goroutine. Allowed in INITED and STOPPED.
//
// The first round fires after initialDelay when execOnLoad or initialDelay
// is set, else at the plan's first fire. A schedule without a plan is a
// managed pool for Submit: it runs that one first round if asked, and
// otherwise stays INITED.
func (c *Context) Startup() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case Stopping:
		return c.refuse(ErrStopping)
	case Running, Sleeping:
		return c.refuse(ErrAlreadyStarted)
	}
	s := c.cfg.Settings()
	now := c.clk.Now()
	var first time.Time
	var ok bool
	switch {
	case s.ExecOnLoad || s.InitialDelay > 0:
		first, ok = now.Add(s.InitialDelay), true
	case c.plan != nil:
		first, ok = c.plan.Next(Round{Start: now, End: now})
	default:
		c.ensureGeneration()
		c.loaded = now
		if c.state == Stopped {
			c.setState(Inited) // a fresh pool, ready for Submit
		}
		c.log.Info("started as a managed pool")
		return nil
	}
	gen := c.ensureGeneration()
	c.loaded = now
	c.execRequested, c.wakeRequested, c.replan = false, false, false
	l := newLoop()
	c.loop = l
	c.next = first
	c.setState(Sleeping)
	c.log.Info("started", zap.String("plan", c.planString()), zap.Time("first", first))
	go c.run(l, gen, first, ok, ok && (s.ExecOnLoad || s.InitialDelay > 0), Round{Start: now, End: now})
	return nil
}

// Shutdown stops the schedule: it moves to STOPPING at once; the scheduler
// goroutine then calls OnCancel for and cancels the running tasks, records
// the queued ones as canceled, waits for every task to return, calls
// OnTerminate and ends in STOPPED. Use Wait to block until then.
func (c *Context) Shutdown() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case Inited:
		return c.refuse(ErrNotStarted)
	case Stopped:
		return c.refuse(ErrAlreadyStopped)
	case Stopping:
		return c.refuse(ErrStopping)
	}
	c.setState(Stopping)
	c.loop.requestStop()
	c.log.Info("shutdown requested")
	return nil
}

// Wait blocks until the scheduler goroutine has returned (the schedule is
// STOPPED, or back to INITED for a managed pool) or ctx ends.
func (c *Context) Wait(ctx context.Context) error {
	c.mu.Lock()
	l := c.loop
	c.mu.Unlock()
	if l == nil {
		return nil
	}
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return c.notReturned(ctx.Err())
	}
}

// Close stops the schedule for good, whatever its state, and waits for
// every goroutine it started, or for ctx to end. A started schedule is shut
// down; an INITED one with a pool (ad-hoc batches) has its pool closed the
// same way. On ctx expiry the error names the tasks that did not return.
func (c *Context) Close(ctx context.Context) error {
	c.mu.Lock()
	var l *loop
	switch {
	case c.state.started():
		c.setState(Stopping)
		c.loop.requestStop()
		l = c.loop
	case c.state == Stopping:
		l = c.loop
	case c.state == Inited && c.gen != nil:
		c.setState(Stopping)
		l = newLoop()
		c.loop = l
		l.requestStop()
		gen := c.gen
		go func() {
			defer close(l.done)
			c.terminate(l, gen)
		}()
	}
	c.mu.Unlock()
	if l == nil {
		return nil
	}
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return c.notReturned(ctx.Err())
	}
}

// notReturned describes what keeps the schedule from stopping.
func (c *Context) notReturned(cause error) error {
	var ids []string
	for _, t := range c.ActiveTasks() {
		ids = append(ids, fmt.Sprintf("%s (running %s)", t.ID, t.Elapsed.Round(time.Millisecond)))
	}
	if len(ids) == 0 {
		return fmt.Errorf("schedule %s did not stop: %w", c.name, cause)
	}
	return fmt.Errorf("schedule %s did not stop, tasks still running: %v: %w", c.name, ids, cause)
}

// ExecNow asks for a round now. SLEEPING: wakes at once. RUNNING: refused
// when ignoreExecRequestWhenRunning, else exactly one re-run is queued and
// starts right after the current round completes.
func (c *Context) ExecNow() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case Inited, Stopped:
		return c.refuse(ErrNotStarted)
	case Stopping:
		return c.refuse(ErrStopping)
	case Sleeping:
		c.wakeRequested = true
		signal(c.loop.wake)
		return nil
	}
	if c.cfg.Settings().IgnoreExecRequestWhenRunning {
		return c.refuse(ErrAlreadyRunning)
	}
	if c.execRequested {
		return c.refuse(ErrExecAlreadyRequested)
	}
	c.execRequested = true
	return nil
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

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

// onConfig applies an edit live: pool sizes at once, a new plan at once.
func (c *Context) onConfig(ch config.Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != nil && !c.gen.stopping.Load() {
		c.gen.pool.resize(sizeOf(ch.Settings))
	}
	if c.job.Plan != nil || !slices.ContainsFunc(ch.Changed, isPlanKey) {
		return
	}
	p, err := planOf(ch.Settings)
	if err != nil { // validated by config; cannot happen
		c.log.Error("plan edit ignored", zap.Error(err))
		return
	}
	c.plan = p
	c.log.Info("plan changed", zap.String("plan", c.planString()))
	if c.state == Sleeping {
		c.replan = true
		signal(c.loop.wake)
	}
}

func isPlanKey(k string) bool {
	return k == config.KeyCron || k == config.KeyFixedRate || k == config.KeyFixedDelay
}

func (c *Context) planString() string {
	if c.plan == nil {
		return "none"
	}
	return c.plan.String()
}

// LogLevel returns the schedule's log level.
func (c *Context) LogLevel() zapcore.Level { return c.level.Level() }

// SetLogLevel changes the schedule's log level; it is saved when the
// context was built with a level store (package fom does so).
func (c *Context) SetLogLevel(l zapcore.Level) error {
	if l < zapcore.DebugLevel || l > zapcore.FatalLevel {
		return fmt.Errorf("schedule %s: log level %q is not one of debug, info, warn, error, dpanic, panic, fatal", c.name, l)
	}
	if c.onLevel != nil {
		if err := c.onLevel(l); err != nil {
			return fmt.Errorf("schedule %s: save log level: %w", c.name, err)
		}
	}
	c.level.SetLevel(l)
	return nil
}

// BindLogLevel sets the initial level and a function that saves changes.
func (c *Context) BindLogLevel(initial zapcore.Level, save func(zapcore.Level) error) {
	c.level.SetLevel(initial)
	c.onLevel = save
}

// levelCore gives a schedule's logger a level of its own.
type levelCore struct {
	zapcore.Core
	lvl zap.AtomicLevel
}

func (c levelCore) Enabled(l zapcore.Level) bool { return c.lvl.Enabled(l) && c.Core.Enabled(l) }
func (c levelCore) With(f []zapcore.Field) zapcore.Core {
	return levelCore{Core: c.Core.With(f), lvl: c.lvl}
}
func (c levelCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !c.lvl.Enabled(e.Level) {
		return ce
	}
	return c.Core.Check(e, ce)
}
