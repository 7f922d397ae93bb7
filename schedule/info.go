package schedule

import (
	"sort"
	"time"
)

// Counts are a schedule's task outcomes since it was built.
type Counts struct {
	Success, Failed, Timeout, Rejected, Conflict, Canceled int64
}

// Total is the number of outcomes.
func (c Counts) Total() int64 {
	return c.Success + c.Failed + c.Timeout + c.Rejected + c.Conflict + c.Canceled
}

// Info is a snapshot of a schedule for display.
type Info struct {
	Name    string
	State   State
	Plan    string // e.g. "cron 0 */5 * * * *", "fixedRate 10s", "none"
	Remark  string
	Loaded  time.Time // last Startup
	Last    time.Time // start of the last round
	Next    time.Time // next fire; zero when none is planned
	Rounds  int64
	Batches int64
	Counts  Counts
	Waiting int
	Active  int
	// Abandoned counts running tasks whose outcome is already recorded
	// (past their timeout, or canceled) but that have not returned; each
	// still holds a worker.
	Abandoned int
	// Stalled is set when abandoned tasks hold every worker: nothing
	// queued can start until one returns (see stall.go).
	Stalled bool
	// LastOutcome is the last scheduled round's outcome ("" before one
	// ran in this process), LastSuccess the end of the last round whose
	// every task succeeded, LastLate how late the last round started.
	LastOutcome Outcome
	LastSuccess time.Time
	LastLate    time.Duration
	// ConsecutiveFailures counts the scheduled rounds in a row, the last
	// one included, that did not succeed (0 when the last did), and
	// FailingSince is when the first of them started.
	ConsecutiveFailures int
	FailingSince        time.Time
	// StopReason says why a STOPPED schedule stopped by itself or was
	// not started ("deadTime 2026-01-01T00:00:00Z passed", "the plan has
	// no further fire"); "" when an operator stopped it or it runs.
	StopReason string
}

// Outcome sums up a round.
type Outcome string

// Outcomes of a round.
const (
	OutcomeSuccess Outcome = "success" // every task succeeded (or there were none)
	OutcomePartial Outcome = "partial" // some succeeded, some did not
	OutcomeFailed  Outcome = "failed"  // none succeeded, none timed out
	OutcomeTimeout Outcome = "timeout" // none succeeded, some timed out
)

// Outcomes lists every outcome.
func Outcomes() []Outcome {
	return []Outcome{OutcomeSuccess, OutcomePartial, OutcomeFailed, OutcomeTimeout}
}

// OutcomeOf sums up a round's results.
func OutcomeOf(r Round) Outcome {
	ok, timeout := 0, false
	for _, res := range r.Results {
		switch res.Status {
		case StatusSuccess:
			ok++
		case StatusTimeout:
			timeout = true
		}
	}
	switch {
	case ok == len(r.Results):
		return OutcomeSuccess
	case ok > 0:
		return OutcomePartial
	case timeout:
		return OutcomeTimeout
	}
	return OutcomeFailed
}

// Info returns a snapshot of the schedule.
func (c *Context) Info() Info {
	c.mu.Lock()
	i := Info{
		Name: c.name, State: c.state, Plan: c.planString(), Remark: c.cfg.Current().Remark,
		Loaded: c.loaded, Last: c.last, Next: c.next, Rounds: c.rounds, Batches: c.batches,
		LastOutcome: c.lastOutcome.outcome(), LastSuccess: unixNano(c.lastSuccess), LastLate: c.lastLate,
		ConsecutiveFailures: int(c.failStreak), FailingSince: unixNano(c.failingSince),
		StopReason: c.stopReasonLocked(),
	}
	gen := c.gen
	c.mu.Unlock()
	i.Counts = c.Counts()
	if gen != nil {
		var slots int
		i.Waiting, i.Active, i.Abandoned, slots = gen.pool.counts()
		i.Stalled = i.Abandoned > 0 && i.Abandoned >= slots
	}
	return i
}

// Counts returns the outcome counters, as kept by the statistics.
func (c *Context) Counts() Counts {
	n := c.stats.CountsByIndex()
	return Counts{
		Success: n[StatusSuccess], Failed: n[StatusFailed], Timeout: n[StatusTimeout],
		Rejected: n[StatusRejected], Conflict: n[StatusConflict], Canceled: n[StatusCanceled],
	}
}

// TaskInfo describes a waiting or running task.
type TaskInfo struct {
	ID        string
	Round     int64
	Batch     bool
	Submitted time.Time
	Started   time.Time // zero while waiting
	Elapsed   time.Duration
	// Abandoned marks a task whose outcome was already recorded (timed out
	// or canceled) but whose goroutine has not returned.
	Abandoned bool
	Stack     string // the goroutine's stack; running tasks only
}

// WaitingTasks lists tasks queued for a worker, oldest first.
func (c *Context) WaitingTasks() []TaskInfo {
	gen := c.currentGen()
	if gen == nil {
		return nil
	}
	w, _ := gen.pool.snapshot()
	now := c.clk.Now()
	out := make([]TaskInfo, 0, len(w))
	for _, r := range w {
		r.Elapsed = now.Sub(r.Submitted)
		out = append(out, r.TaskInfo)
	}
	return out
}

// ActiveTasks lists tasks on a worker, longest running first, with stacks.
func (c *Context) ActiveTasks() []TaskInfo {
	gen := c.currentGen()
	if gen == nil {
		return nil
	}
	_, a := gen.pool.snapshot()
	want := map[string]bool{}
	for _, r := range a {
		want[r.label] = true
	}
	stacks := workerStacks(want)
	now := c.clk.Now()
	out := make([]TaskInfo, 0, len(a))
	for _, r := range a {
		if r.Started.IsZero() {
			continue // picked up, not begun (or skipped)
		}
		r.Elapsed, r.Stack = now.Sub(r.Started), stacks[r.label]
		out = append(out, r.TaskInfo)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out
}

func (c *Context) currentGen() *generation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// stopCause is why a schedule stopped by itself, in a byte of the Context.
type stopCause uint8

const (
	stopNone      stopCause = iota
	stopDeadTime            // its deadTime passed, or had passed at Startup
	stopPlanEnded           // its plan has no further fire
)

// stopReasonLocked is Info's StopReason; called with c.mu held.
func (c *Context) stopReasonLocked() string {
	if c.state != Stopped && c.state != Stopping {
		return ""
	}
	switch c.stopCause {
	case stopDeadTime:
		return "deadTime " + time.Unix(0, c.dead).UTC().Format(time.RFC3339) + " passed"
	case stopPlanEnded:
		return "the plan has no further fire"
	}
	return ""
}

// unixNano is a time kept as Unix ns, zero for 0.
func unixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
