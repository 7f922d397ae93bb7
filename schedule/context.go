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

// Context is one schedule: its state machine, the goroutine that runs its
// rounds, its worker pool, timeouts, statistics counters and configuration.
//
// All state changes are made under mu. While it sleeps an armed timer owns
// the schedule; while it runs, its round goroutine does, and it alone runs
// rounds, so rounds never overlap (see loop.go).
type Context struct {
	// What a fire reads or writes comes first, in the first six lines
	// (64 bytes each; a Context is 448 bytes, a size class whose objects
	// start on a line), the fields a wake-up decides from in the first:
	// with thousands of schedules, each line of a Context is one a fire
	// finds cold. TestContextLayout keeps it so.
	mu            sync.Mutex
	state         State
	debugOn       atomic.Bool // the level is debug (setLevel)
	planVer       uint16      // bumped by each plan edit; compared, never ordered, so wrapping is harmless (65 536 edits during one round)
	stopCause     stopCause   // why the schedule stopped by itself (or did not start), 0 for an operator or none
	execRequested bool        // RUNNING: one re-run queued
	resumeMissed  bool
	lending       bool          // RUNNING: the round goroutine runs tasks as a worker
	lastOutcome   outcomeCode   // of the last scheduled round
	catchUp       bool          // the next plan round runs fires missed before a Resume (CauseCatchUp)
	tasks         atomic.Uint64 // the settings every task's path reads, packed (taskSettings)
	plan          Plan
	gen           *generation
	dead          int64 // the config's deadTime in Unix ns, 0 for none: read on every wake-up without reaching for the config

	clk       clockwork.Clock
	stats     *statistics.Stats
	conflicts *Conflicts
	runners   *Runners     // shared round goroutines, or nil for plain ones
	wheel     *wheel.Wheel // shared timer, or nil for runtime timers
	rec       Recorder     // nil for none

	last     time.Time
	next     time.Time
	rounds   int64
	lastLate time.Duration // how late the last round started
	// Unix ns (0: none): the end of the last round whose every task
	// succeeded, and the start of the first round of the failing streak.
	lastSuccess, failingSince int64
	failStreak                int32         // scheduled rounds in a row that did not succeed
	resumeFrom                time.Time     // RUNNING: Resume asked for; applied after the round
	changed                   chan struct{} // made when someone waits; closed at the next state change or round end
	loop                      *loop
	gate                      Gate // admits planned rounds, or nil
	job                       Job

	// Read when asked, or when the schedule is set up or edited.
	name     string
	cfg      *config.Config
	log      *zap.Logger
	level    zap.AtomicLevel
	hooks    *hooks      // what the app that built the context plugs in
	canceled *delayedOut // the outcome canceled delayed batches share; made by the first SubmitAt, guarded by mu
	execBy   *string     // who queued the re-run (a pointer: 8 bytes a schedule, not 16)
	loaded   time.Time
	batches  int64
}

// outcomeCode is an Outcome in a byte of the Context: 0 before the first
// round, else 1 + its index in Outcomes.
type outcomeCode uint8

func codeOf(o Outcome) outcomeCode {
	switch o {
	case OutcomeSuccess:
		return 1
	case OutcomePartial:
		return 2
	case OutcomeFailed:
		return 3
	case OutcomeTimeout:
		return 4
	}
	return 0
}

func (c outcomeCode) outcome() Outcome {
	if c == 0 || int(c) > len(Outcomes()) {
		return ""
	}
	return Outcomes()[c-1]
}

// generation is what one start-to-stop cycle owns: a fresh pool, a timeout
// heap, and the context its tasks derive from. What a fire reads or writes
// of it is in its first line, and its pool starts on its third (a
// generation is in the 320-byte size class, whose objects start on a
// line; TestContextLayout keeps it so).
type generation struct {
	ctx      context.Context // parent of task contexts; canceled last at stop
	stopping atomic.Bool
	lastCtx  atomic.Pointer[runCtx] // the task context last made for a run used again (taskCtx)
	lastHeld atomic.Pointer[heldID] // the conflict registry's entry of the last task id run (Conflicts.acquireFrom)
	tmo      *timeouts
	cancel   context.CancelFunc

	wg      sync.WaitGroup         // timeout watcher, batch completions
	stall   stallCheck             // in tmo while tasks past their timeout may hold workers
	delayed *Delayed               // sentinel of the pending SubmitAt batches' ring, made by the first; guarded by Context.mu
	wheel   *wheel.Wheel           // own wheel for SubmitAt when none is shared; made on first use, guarded by Context.mu
	reuse   atomic.Pointer[reused] // made by the first batch that uses something again
	tracer  Tracer                 // Options.Tracer, or nil
	_       [8]byte

	// The pool, in the same allocation from the third line on: a fire
	// reads its first two lines, which then sit beside the generation's
	// first, on the same page.
	pool pool
}

// reused is what a generation keeps of its batches to use again, apart
// from it so that a schedule that never submits does not carry its room.
type reused struct {
	groups  sync.Pool // finished batches' groups (group.release)
	batches sync.Pool // Batches of ended delayed batches (Batch.end)
}

// reused returns what gen keeps to use again, made by the first caller.
func (gen *generation) reused() *reused {
	if r := gen.reuse.Load(); r != nil {
		return r
	}
	gen.reuse.CompareAndSwap(nil, new(reused))
	return gen.reuse.Load()
}

// loop is one activation of a schedule, from Startup until it is STOPPED
// (or, for a managed pool's one round, back to INITED). See loop.go.
type loop struct {
	c      *Context
	rs     *Runners        // c.runners, beside c: all the wheel's goroutine reads of a schedule whose wait is due (loopWake.FireAt)
	ctx    context.Context // passed to Tasks and OnComplete; canceled by Shutdown
	cancel context.CancelFunc
	gen    *generation
	stop   chan struct{} // closed when the context must stop
	done   chan struct{} // closed when the activation has ended
	once   sync.Once

	// Guarded by Context.mu. What every round writes, together; the
	// small fields fill what sync.Once leaves of its eight bytes.
	pinned bool        // the next fire is the first one set by execOnLoad or initialDelay
	manual bool        // the round goroutine's round was asked for (ExecNow): not gated
	lend   lendState   // a wake-up on a goroutine the wheel lends, or a runner
	asked  bool        // the next round goLocked starts is an ExecNow
	parked bool        // sleeping without a wait: its gate holds none of its fires (see Holder)
	armed  uint64      // id of the armed wait; bumped to disarm it
	prev   roundTimes  // the last round's, for a config plan edited while the schedule sleeps
	timer  stopper     // the armed wait, nil when none
	wt     wheel.Timer // the wheel's handle, when the wait is the wheel's

	// A round goroutine's start: planned is set under Context.mu before
	// the loop's rounds are handed to a goroutine (Runners.rounds, or one
	// of their own), which reads it once on entry.
	planned time.Time
	askedBy *string // who asked for the ExecNow: written by ExecNow while SLEEPING, read by that round

	// A loop is 256 bytes, a size class whose objects start on a line:
	// every line of it is one a fire reads (TestContextLayout).
	_ [16]byte
}

// roundTimes are what fom's own plans read of the previous round: kept
// rather than the whole Round, 72 bytes a round writes instead of 128.
type roundTimes struct{ planned, start, end time.Time }

func timesOf(r Round) roundTimes { return roundTimes{r.Planned, r.Start, r.End} }

func (t roundTimes) round() Round { return Round{Planned: t.planned, Start: t.start, End: t.end} }

// stopper is an armed timer: a wheel timer or a clock's.
type stopper interface{ Stop() bool }

func newLoop(c *Context, gen *generation) *loop {
	// Tasks and OnComplete reach the schedule and its logger through
	// fom.FromContext and fom.Logger. Not a child of gen.ctx: that would
	// register it with its parent (a map per schedule), and nothing needs
	// it: Shutdown cancels this context before the generation's.
	ctx, cancel := context.WithCancel(context.Background())
	ctx = context.WithValue(ctx, scheduleKey{}, c)
	return &loop{c: c, rs: c.runners, ctx: ctx, cancel: cancel, gen: gen, stop: make(chan struct{}), done: make(chan struct{})}
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
	if job.Tasks == nil && len(job.Fixed) == 0 {
		return nil, fmt.Errorf("fom: schedule %s: %w", name, ErrNoWork)
	}
	c := &Context{
		name: name, cfg: cfg, job: job,
		clk: opts.Clock, conflicts: opts.Conflicts, rec: opts.Recorder, stats: opts.Stats, wheel: opts.Wheel, runners: opts.Runners, gate: opts.Gate,
		level: zap.NewAtomicLevelAt(zapcore.InfoLevel), hooks: &hooks{control: opts.Control, tracer: opts.Tracer},
	}
	if c.clk == nil {
		c.clk = clockwork.NewRealClock()
	}
	if opts.Gate != nil && job.Tasks == nil && len(job.Fixed) == 1 && job.Fixed[0] != nil {
		id := job.Fixed[0].ID()
		c.hooks.fixedID = &id
	}
	if c.conflicts == nil {
		c.conflicts = NewConflicts()
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
	c.dead = unixOrZero(cfg.Settings().DeadTime)
	c.plan = job.Plan
	if c.plan == nil {
		p, err := planOf(cfg.Settings())
		if err != nil {
			return nil, fmt.Errorf("fom: schedule %s: %w", name, err)
		}
		c.plan = p
	}
	c.tasks.Store(packTaskSettings(cfg.Current()))
	cfg.Subscribe(c.onConfig)
	return c, nil
}

// taskSettings are the settings every task's path reads: a round's lending
// and deadline, each submission's conflict check, each start's deadline.
// The Context keeps them in one word, set from the config at New and at
// every edit, so that the path reads neither the config nor its settings:
// with thousands of schedules both are cold, two lines to fetch from
// memory on every fire. One word is also one consistent reading of the
// three.
type taskSettings struct {
	overTime  time.Duration // taskOverTime
	eachTask  bool          // detectTimeoutOnEachTask
	conflicts bool          // enableTaskConflict
}

const (
	eachTaskBit   = 1 << 62
	conflictsBit  = 1 << 63
	maxPackedOver = eachTaskBit - 1 // a taskOverTime past 146 years counts as that
)

func packTaskSettings(s *config.Settings) uint64 {
	w := uint64(min(max(s.TaskOverTime, 0), maxPackedOver))
	if s.DetectTimeoutOnEachTask {
		w |= eachTaskBit
	}
	if s.EnableTaskConflict {
		w |= conflictsBit
	}
	return w
}

func (c *Context) taskSettings() taskSettings {
	w := c.tasks.Load()
	return taskSettings{overTime: time.Duration(w & maxPackedOver), eachTask: w&eachTaskBit != 0, conflicts: w&conflictsBit != 0}
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
	if c.state != s && c.debug() {
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
	s := c.cfg.Current()
	g.pool.init(c, g, sizeOf(s))
	g.tmo = newTimeouts(c.clk, &g.wg, func(d deadline) { c.expire(g, d) })
	g.stall.heapIndex = -1
	g.tracer = c.hooks.tracer
	c.gen = g
	return g
}

func sizeOf(s *config.Settings) poolSize {
	return poolSize{core: s.ThreadCore, max: s.ThreadMax, queue: s.QueueSize, alive: s.ThreadAliveTime}
}

// hooks are what the app that built a Context plugs in, and what is read
// of its job once, kept apart from the fields a fire reads.
type hooks struct {
	onLevel func(zapcore.Level) error // saves a log level
	control Control                   // carries out Startup, Shutdown and ExecNow, or nil
	tracer  Tracer                    // Options.Tracer, copied into each generation
	// The id of the job's one Fixed task, for a copy with a gate (nil
	// otherwise): its conflict entry is made as the copy is readied
	// (readyLocked). Read once in New, where no lock is held, rather
	// than asking the task there; a pointer, so that hooks stays in the
	// 48-byte size class (TestContextLayout) for every schedule.
	fixedID *string
}

// Startup starts the schedule. With Options.Control (a cluster) it starts
// the schedule on every instance, whichever this is; otherwise it is
// StartupHere.
func (c *Context) Startup() error {
	if ctl := c.hooks.control; ctl != nil {
		return ctl.Control(c.name, ActionStart, "")
	}
	return c.StartupHere()
}

// StartupHere starts this process's copy of the schedule: it arms its
// first fire (or runs it now). Allowed in INITED and STOPPED.
//
// The first round fires after initialDelay when execOnLoad or initialDelay
// is set, else at the plan's first fire. A schedule without a plan is a
// managed pool for Submit: it runs that one first round if asked, and
// otherwise stays INITED.
func (c *Context) StartupHere() error {
	return c.startup(time.Time{}, false)
}

// StartupFrom is StartupHere continuing the plan from lastFire, a fire
// recorded by another process, as Resume would: in one step, under the
// schedule's lock, so that no fire of the plan counted from now can begin
// in between and run again once the plan continues from lastFire. A
// cluster instance starts so a schedule whose lease it took before the
// schedule started. Without a plan of fom's own (or with lastFire zero) it
// is StartupHere.
func (c *Context) StartupFrom(lastFire time.Time, runMissed bool) error {
	return c.startup(lastFire, runMissed)
}

func (c *Context) startup(from time.Time, runMissed bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case Stopping:
		return c.refuse(ErrStopping)
	case Running, Sleeping:
		return c.refuse(ErrAlreadyStarted)
	}
	s := c.cfg.Current()
	now := c.clk.Now()
	if c.dead != 0 && now.UnixNano() >= c.dead {
		// Not an error of the app's start: the schedule stays STOPPED,
		// with the reason in its Info and the log.
		c.stopCause = stopDeadTime
		if c.state != Stopped {
			c.setState(Stopped)
		}
		c.log.Warn("not started: deadTime already past", zap.Time("deadTime", time.Unix(0, c.dead)), zap.Time("now", now))
		return &Error{Schedule: c.name, Err: fmt.Errorf("%w %s", ErrPastDeadTime, time.Unix(0, c.dead).UTC().Format(time.RFC3339))}
	}
	c.stopCause = stopNone
	var first time.Time
	var ok bool
	switch {
	case s.ExecOnLoad || s.InitialDelay > 0:
		first, ok = now.Add(s.InitialDelay), true
	case c.plan != nil:
		first, ok = c.plan.Next(Round{Planned: now, Start: now, End: now})
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
	c.execRequested = false
	l := newLoop(c, gen)
	l.prev = roundTimes{now, now, now}
	l.pinned = ok && (s.ExecOnLoad || s.InitialDelay > 0)
	c.loop = l
	resumed := false
	if !from.IsZero() && c.plan != nil && c.job.Plan == nil {
		if next, rok := c.resumeNextLocked(l, from, runMissed); rok {
			first, ok, resumed = next, true, true
			l.pinned = false
		}
	}
	c.log.Info("started", zap.String("plan", c.planString()), zap.Time("first", first), zap.Bool("resumed", resumed))
	if resumed && !now.Before(first) {
		// A missed fire, due at once, as Resume announces it.
		c.announceLocked(first)
	}
	st := c.decideLocked(l, c.clk.Now(), first, ok)
	// A copy whose gate holds none of its fires (a cluster instance that
	// does not hold the schedule's lease) starts parked, as its first
	// fire, refused, would park it: an instance's first burst wakes only
	// the schedules it holds.
	if st == stepSleep && !l.pinned {
		c.parkLocked(l)
	}
	if _, held := c.gate.(Holder); resumed || held && !l.parked {
		c.readyLocked(gen)
	}
	c.goLocked(l, st, first)
	return nil
}

// readyLocked makes, before this copy's first fire, what that fire would
// otherwise make in the middle of its burst: the results ring its outcome
// goes to, its history's first page, the worker its round goroutine
// lends itself as, its one fixed task's conflict entry, and its runners
// (Runners.Warm). A cluster instance's copy calls it as it begins to fire
// here (started holding its lease, or the lease taken: Resume, Unpark),
// when its first fire falls among the other instances' bursts. (Ten
// thousand schedules' first fires on a fresh App read 72–105 ms at p99,
// the next second 22–37 ms; 38–70 ms with the ring, page and worker made
// before. Three instances started together spent 4 ms more of CPU in
// their first bursts than in later ones; about 1 ms with the conflict
// entries, the page's room and the runners made too: bench/README.md.)
// A parked copy, which may never fire here, does not; nor does a lone
// App's, which would hold the ring from its start for schedules that may
// not fire for hours. With c.mu held.
func (c *Context) readyLocked(g *generation) {
	c.stats.Reserve()
	g.pool.ready()
	if id := c.hooks.fixedID; id != nil {
		c.conflicts.prepare(&g.lastHeld, *id)
	}
	if c.runners != nil {
		c.runners.Warm()
	}
}

// Shutdown stops the schedule. With Options.Control (a cluster) it stops
// the schedule on every instance, whichever this is; otherwise it is
// ShutdownHere.
func (c *Context) Shutdown() error {
	if ctl := c.hooks.control; ctl != nil {
		return ctl.Control(c.name, ActionStop, "")
	}
	return c.ShutdownHere()
}

// ShutdownHere stops this process's copy of the schedule: it moves to
// STOPPING at once; the scheduler
// goroutine then calls OnCancel for and cancels the running tasks, records
// the queued ones as canceled, waits for every task to return, calls
// OnTerminate and ends in STOPPED. Use Wait to block until then.
func (c *Context) ShutdownHere() error {
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
	c.stopLocked()
	c.log.Info("shutdown requested")
	return nil
}

// Wait blocks until the schedule's activation has ended (it is STOPPED, or
// back to INITED for a managed pool) or ctx ends.
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
		l = c.loop
		c.stopLocked()
	case c.state == Stopping:
		l = c.loop
	case c.state == Inited && c.gen != nil:
		c.setState(Stopping)
		l = newLoop(c, c.gen)
		c.loop = l
		l.requestStop()
		go c.finish(l)
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

// stopLocked moves a started schedule to STOPPING. A sleeping one is taken
// from its timer and terminated by a goroutine of its own; a running one is
// stopped by its round goroutine. Called with c.mu held.
func (c *Context) stopLocked() {
	wasSleeping := c.state == Sleeping
	c.setState(Stopping)
	c.loop.requestStop()
	switch {
	case wasSleeping:
		c.disarmLocked(c.loop)
		go c.finish(c.loop)
	case c.lending:
		gen := c.loop.gen
		gen.wg.Add(1)
		go func() {
			defer gen.wg.Done()
			c.cancelAll(gen)
		}()
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
func (c *Context) ExecNow() error { return c.ExecNowBy("") }

// whoOf keeps who asked for a round; nil for nobody named.
func whoOf(by string) *string {
	if by == "" {
		return nil
	}
	return &by
}

// nameOf is who whoOf kept.
func nameOf(who *string) string {
	if who == nil {
		return ""
	}
	return *who
}

// ExecNowBy is ExecNow on behalf of by (an operator, a service): the
// round's history names them. With Options.Control (a cluster) the
// request goes to the instance that runs the schedule, whose answer this
// is; otherwise it is ExecNowHere.
func (c *Context) ExecNowBy(by string) error {
	if ctl := c.hooks.control; ctl != nil {
		return ctl.Control(c.name, ActionExec, by)
	}
	return c.ExecNowHere(by)
}

// ExecNowHere asks this process's copy of the schedule for a round now,
// on behalf of by ("" for nobody named).
func (c *Context) ExecNowHere(by string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case Inited, Stopped:
		return c.refuse(ErrNotStarted)
	case Stopping:
		return c.refuse(ErrStopping)
	case Sleeping:
		c.disarmLocked(c.loop)
		c.loop.asked, c.loop.askedBy = true, whoOf(by)
		c.goLocked(c.loop, stepRound, c.clk.Now())
		return nil
	}
	if c.cfg.Current().IgnoreExecRequestWhenRunning {
		return c.refuse(ErrAlreadyRunning)
	}
	if c.execRequested {
		return c.refuse(ErrExecAlreadyRequested)
	}
	c.execRequested, c.execBy = true, whoOf(by)
	return nil
}

// onConfig applies an edit live: pool sizes at once, a new plan at once.
func (c *Context) onConfig(ch config.Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dead = unixOrZero(ch.Settings.DeadTime)
	c.tasks.Store(packTaskSettings(&ch.Settings))
	if c.gen != nil && !c.gen.stopping.Load() {
		c.gen.pool.resize(sizeOf(&ch.Settings))
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
	c.planVer++
	c.log.Info("plan changed", zap.String("plan", c.planString()))
	if c.state == Sleeping && !c.loop.pinned {
		// A config plan is fom's own code, safe to call under the lock.
		// Without a plan the schedule is a managed pool from now on: its
		// activation ends and it is INITED, ready for Submit.
		l := c.loop
		c.disarmLocked(l)
		var next time.Time
		ok := false
		if p != nil {
			next, ok = p.Next(l.prev.round())
		}
		c.goLocked(l, c.decideLocked(l, c.clk.Now(), next, ok), next)
	}
}

// Resume continues the plan from lastFire, a fire recorded by another
// process (the previous owner of the schedule in a cluster), if the
// schedule is started and its plan is fom's own. The next fire after
// lastFire is armed; when it is already past, it runs at once if
// runMissed (gated like any planned round, so a fire that did run
// elsewhere is not run again), else the plan skips to its first fire not
// yet past. A schedule in a round resumes when the round is over. It
// reports whether the request was taken.
func (c *Context) Resume(lastFire time.Time, runMissed bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.state.started() || c.loop == nil || c.plan == nil || c.job.Plan != nil || lastFire.IsZero() {
		return false
	}
	if c.state == Running {
		c.resumeFrom, c.resumeMissed = lastFire, runMissed
		return true
	}
	l := c.loop
	next, ok := c.resumeNextLocked(l, lastFire, runMissed)
	if !ok {
		return false
	}
	c.disarmLocked(l)
	c.readyLocked(l.gen)
	now := c.clk.Now()
	if !now.Before(next) {
		// A missed fire, due at once: the gate may record it with the
		// others of schedules resumed together.
		c.announceLocked(next)
	}
	c.goLocked(l, c.decideLocked(l, now, next, true), next)
	return true
}

// Unpark arms a schedule its gate parked (see Holder) for the first fire
// of its plan not yet past, and reports whether it was parked: the gate
// holds its fires again, and no fire of it was recorded that its plan
// could continue from (that is Resume).
func (c *Context) Unpark() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.loop
	if l == nil || !l.parked || c.state != Sleeping {
		return false
	}
	c.readyLocked(l.gen)
	now := c.clk.Now()
	next, ok := c.notPastLocked(c.next, now)
	l.parked = false
	c.goLocked(l, c.decideLocked(l, now, next, ok), next)
	return true
}

// parkLocked takes the wait away from a sleeping schedule whose round its
// gate just refused, when the gate is a Holder that holds none of its
// fires: until Resume or Unpark it costs no wake-up. Plans of the job's
// own are never parked (Resume cannot continue them). Called with c.mu
// held.
func (c *Context) parkLocked(l *loop) {
	h, ok := c.gate.(Holder)
	if !ok || c.job.Plan != nil || h.Holds(c.name) {
		return
	}
	c.disarmLocked(l)
	l.parked = true
}

// resumeNextLocked is the fire after lastFire, past the missed ones unless
// runMissed; it makes lastFire the previous round. fom's own plans only:
// safe under the lock.
func (c *Context) resumeNextLocked(l *loop, lastFire time.Time, runMissed bool) (time.Time, bool) {
	prev := Round{Number: c.rounds, Planned: lastFire, Start: lastFire, End: lastFire}
	next, ok := c.plan.Next(prev)
	now := c.clk.Now()
	if ok && !runMissed {
		next, ok = c.notPastLocked(next, now)
	}
	if ok {
		l.prev = timesOf(prev)
	}
	c.catchUp = ok && runMissed && !next.After(now)
	return next, ok
}

// notPastLocked is the first fire of the plan from next on that is not
// before now (the fires skipped as if each had run). fom's own plans
// only: safe under the lock.
func (c *Context) notPastLocked(next, now time.Time) (time.Time, bool) {
	ok := true
	for i := 0; ok && next.Before(now) && i < 100000; i++ {
		next, ok = c.plan.Next(Round{Number: c.rounds, Planned: next, Start: next, End: next})
	}
	return next, ok
}

// unixOrZero is t in Unix ns, 0 for the zero time.
func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
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
