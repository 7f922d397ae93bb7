package schedule

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// taskRun is one submitted task, from submission until its goroutine returns.
type taskRun struct {
	task      Task
	id        string
	group     *group
	held      *heldID // its id's entry in the conflict registry while it counts there
	index     int     // position in the group's results
	submitted time.Time
	direct    bool // kept by the round goroutine at submission and run there at once

	// Set by the pool under its lock when a worker takes the run.
	started time.Time
	label   *string // the pprof label of the goroutine running it (a worker's or a runner's): ActiveTasks finds its stack by it
	ctx     context.Context

	prevActive, nextActive *taskRun // in the pool's running list, under its lock
	cancel                 context.CancelFunc

	mu     sync.Mutex
	done   bool // the outcome is decided
	result Result

	heapIndex int // position in the timeout heap, -1 when absent
	deadline  time.Time

	rctx runCtx // the task's context, allocated with the run
}

// claim decides the run's outcome once. Only the first claim wins; the
// loser (a task returning after its timeout, say) changes nothing.
func (r *taskRun) claim(res Result) (Result, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return Result{}, false
	}
	r.done = true
	res.TaskID = r.id
	res.Submitted = r.submitted
	r.result = res
	return res, true
}

func (r *taskRun) isDone() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done
}

func (r *taskRun) outcome() Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.result
}

// group is the complete-latch of a round or an ad-hoc batch: it fires once
// every submitted task has an outcome and submission is over, even when no
// task was submitted or every task was canceled before it started.
type group struct {
	number  int64
	batch   bool
	planned time.Time
	start   time.Time
	ctx     context.Context

	mu       sync.Mutex
	results  []Result
	runs     []*taskRun
	pending  int
	sealed   bool
	complete latch  // done once every task has an outcome and submission is over
	owner    *Batch // a batch completed by whoever completes the group (Batch.end)

	// A batch's group is used again once nothing holds it (release): its
	// completion holds it, and so does each of its runs from its hand-over
	// to the pool until a worker is done with it or the pool drops it.
	home  *sync.Pool   // where it goes back; nil for a group never used again
	holds atomic.Int32 // while home is set
	keep  atomic.Bool  // a deadline of the timeout heap may still name a run: not used again

	// A round of one task (the common case) keeps its slices and its run
	// here rather than in three more allocations.
	oneResult [1]Result
	oneRun    [1]*taskRun
	first     taskRun
	firstUsed bool // first was handed out; only the submitting goroutine reads it

	deadline  time.Time // round-wide deadline, zero when none
	heapIndex int
	lastEnd   time.Time // the latest outcome's instant: the round's end

	// recycled: a round's group, which its runner may use again for a
	// later round (runner.roundGroup). Its first run's task context is
	// then allocated apart, since a task may keep its context past its
	// return.
	recycled bool
}

func newGroup(ctx context.Context, number int64, batch bool, planned, start time.Time) *group {
	return &group{ctx: ctx, number: number, batch: batch, planned: planned, start: start, heapIndex: -1}
}

// batchGroup returns a batch's group from home, where finished batches
// leave theirs, or a new one. Its first run's task context is not part of
// it (recycled: exec takes one from taskCtx), since a task may keep it
// past its return.
//
// A batch's group was most of what a batch allocates (about 700 of 1 200
// bytes): with a flood of delayed one-task batches, its garbage set the
// pace of the collector, and a collection on a small machine holds the
// runtime's timers, and so the wheel, up to ten milliseconds.
func batchGroup(home *sync.Pool, ctx context.Context, number int64, start time.Time) *group {
	g, _ := home.Get().(*group)
	if g == nil {
		g = new(group)
	} else {
		*g = group{} // no reader is left: a Submit is refused while a shutdown interrupts
	}
	g.ctx, g.number, g.batch, g.planned, g.start, g.heapIndex, g.recycled, g.home = ctx, number, true, start, start, -1, true, home
	g.holds.Store(1) // its completion's
	return g
}

// hold counts one more holder of a group that is used again.
func (g *group) hold() {
	if g.home != nil {
		g.holds.Add(1)
	}
}

// release lets go of a group; the last holder puts it back in its home,
// unless a deadline may still name one of its runs. It keeps no task,
// value or error of its round while it waits there: a run still in a
// reader's hands (a shutdown interrupts the runs it listed) is decided,
// and the cleared fields are written under its lock.
func (g *group) release() {
	if g.home == nil || g.holds.Add(-1) != 0 || g.keep.Load() {
		return
	}
	g.mu.Lock()
	g.ctx, g.results, g.runs, g.oneResult, g.oneRun, g.owner = nil, nil, nil, [1]Result{}, [1]*taskRun{}, nil
	g.mu.Unlock()
	r := &g.first
	r.mu.Lock()
	r.task, r.ctx, r.cancel, r.label, r.result.Value, r.result.Err, r.rctx = nil, nil, nil, nil, nil, nil, runCtx{}
	r.mu.Unlock()
	g.home.Put(g)
}

// roundGroup returns the group of a round: the runner's spare one,
// cleared, else a new one. rn may be nil (a round on a goroutine of its
// own): then every round has a new group.
//
// A fire's group was its largest allocation (about 700 bytes with its
// first run and result): with thousands of schedules firing every second
// it made most of the garbage, and its collection a tenth of the CPU. A
// runner's spare is the group of the round it ran last, so its memory is
// still in cache.
func (rn *runner) roundGroup(ctx context.Context, number int64, planned, start time.Time) *group {
	var g *group
	if rn != nil {
		g, rn.spare = rn.spare, nil // cleared by keep
	}
	if g == nil {
		g = new(group)
	}
	g.ctx, g.number, g.planned, g.start, g.heapIndex, g.recycled = ctx, number, planned, start, -1, rn != nil
	return g
}

// keep makes g, a finished round's group nothing else holds, the runner's
// spare. It is cleared now rather than when used again, so that it holds
// no task, value or error of its round while it waits.
func (rn *runner) keep(g *group) {
	*g = group{}
	rn.spare = g
}

// newRun returns a run of task t for the group. The first run of a group
// lives inside it; the submitting goroutine is the only caller.
func (g *group) newRun(t Task, id string, now time.Time) *taskRun {
	r := &g.first
	if g.firstUsed {
		r = new(taskRun)
	}
	g.firstUsed = true
	r.task, r.id, r.group, r.submitted, r.heapIndex = t, id, g, now, -1
	return r
}

// hasDeadline reports whether a round-wide deadline was set. It is set
// before any task is submitted, so a worker reads it safely.
func (g *group) hasDeadline() bool { return !g.deadline.IsZero() }

// reserve sizes the group for n more tasks.
func (g *group) reserve(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.results) == 0 && n == 1 {
		g.results, g.runs = g.oneResult[:0], g.oneRun[:0]
		return
	}
	if cap(g.results)-len(g.results) < n {
		g.results = append(make([]Result, 0, len(g.results)+n), g.results...)
		g.runs = append(make([]*taskRun, 0, len(g.runs)+n), g.runs...)
	}
}

// add reserves a result slot for run.
func (g *group) add(r *taskRun) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r.index = len(g.results)
	g.results = append(g.results, Result{})
	g.runs = append(g.runs, r)
	g.pending++
}

// deliver stores a run's outcome, which ended at at (endOf), in the group.
func (g *group) deliver(r *taskRun, res Result, at time.Time) {
	g.mu.Lock()
	g.results[r.index] = res
	if at.After(g.lastEnd) {
		g.lastEnd = at
	}
	g.pending--
	g.check()
}

// seal marks the end of submission.
func (g *group) seal() {
	g.mu.Lock()
	g.sealed = true
	g.check()
}

// check completes the group if nothing is pending after submission, and
// unlocks g.mu: an owner batch then ends on this goroutine, unlocked.
func (g *group) check() {
	if !g.sealed || g.pending != 0 || g.complete.ended {
		g.mu.Unlock()
		return
	}
	g.complete.endLocked()
	b := g.owner
	g.mu.Unlock()
	if b != nil {
		b.end()
	}
}

// finished reports whether the group is complete.
func (g *group) finished() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.complete.ended
}

// wait returns a channel closed once the group is complete. The channel
// is made only when someone has to wait for it.
func (g *group) wait() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.complete.waitLocked()
}

// latch is an end and the channel its waiters block on, made only when
// someone waits before the end. Its owner's lock guards it.
type latch struct {
	ch    chan struct{}
	ended bool
}

// waitLocked returns the channel, closed once the latch has ended.
func (l *latch) waitLocked() <-chan struct{} {
	if l.ch == nil {
		l.ch = make(chan struct{})
		if l.ended {
			close(l.ch)
		}
	}
	return l.ch
}

// endLocked ends the latch and wakes its waiters.
func (l *latch) endLocked() {
	l.ended = true
	if l.ch != nil {
		close(l.ch)
	}
}

// unfinished returns the runs without an outcome.
func (g *group) unfinished() []*taskRun {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*taskRun
	for _, r := range g.runs {
		if !r.isDone() {
			out = append(out, r)
		}
	}
	return out
}

// endOf is when an outcome was decided: the task's return (or its
// deadline), or its submission for a task that never started.
func endOf(res Result) time.Time {
	if res.Started.IsZero() {
		return res.Submitted
	}
	return res.Started.Add(res.Cost)
}

// round returns the group's results as a Round. Call it once the latch
// fired: nothing writes the results any more, so they are handed over.
// The round ends with its last outcome; clk is read only for a round
// without tasks.
func (g *group) round(clk clockwork.Clock) Round {
	g.mu.Lock()
	defer g.mu.Unlock()
	end := g.lastEnd
	if end.IsZero() {
		end = clk.Now()
	}
	r := Round{Number: g.number, Batch: g.batch, Planned: g.planned, Start: g.start, End: end, Results: g.results}
	if g.batch {
		r.Cause = CauseSubmit
	}
	return r
}
