package schedule

import (
	"context"
	"time"
)

// Task is one unit of work.
type Task interface {
	ID() string
	Exec(ctx context.Context) (any, error)
}

// TaskFunc makes a Task of a function.
func TaskFunc(id string, fn func(ctx context.Context) (any, error)) Task {
	return funcTask{id: id, fn: fn}
}

type funcTask struct {
	id string
	fn func(ctx context.Context) (any, error)
}

func (t funcTask) ID() string                            { return t.id }
func (t funcTask) Exec(ctx context.Context) (any, error) { return t.fn(ctx) }

// Optional task methods.
type (
	// BeforeExecer runs before Exec; an error fails the task and skips Exec.
	BeforeExecer interface {
		BeforeExec(ctx context.Context) error
	}
	// AfterExecer runs after Exec with the recorded result.
	AfterExecer interface {
		AfterExec(ctx context.Context, r Result)
	}
	// Canceler is told when its task is canceled by a timeout or a shutdown,
	// before its context is canceled.
	Canceler interface{ OnCancel(elapsed time.Duration) }
)

// Status is a task's outcome.
type Status int

const (
	StatusSuccess Status = iota
	StatusFailed
	StatusTimeout
	StatusRejected
	StatusConflict
	StatusCanceled
)

// Statuses lists every status in order.
func Statuses() []Status {
	return []Status{StatusSuccess, StatusFailed, StatusTimeout, StatusRejected, StatusConflict, StatusCanceled}
}

func (s Status) String() string {
	switch s {
	case StatusSuccess:
		return "success"
	case StatusFailed:
		return "failed"
	case StatusTimeout:
		return "timeout"
	case StatusRejected:
		return "rejected"
	case StatusConflict:
		return "conflict"
	case StatusCanceled:
		return "canceled"
	}
	return "unknown"
}

// Result is the outcome of one task.
type Result struct {
	TaskID    string
	Status    Status
	Value     any   // what Exec returned
	Err       error // nil on success
	Submitted time.Time
	Started   time.Time     // zero if the task never started
	Cost      time.Duration // start to return, or start to the deadline for a timeout
}

// Round is a scheduled round or an ad-hoc batch.
type Round struct {
	Number  int64 // rounds and batches are numbered separately, from 1
	Batch   bool  // an ad-hoc batch rather than a scheduled round
	Cause   Cause // what started it
	By      string
	Planned time.Time
	Start   time.Time
	End     time.Time
	Results []Result
}

// Cause is what started a round. By (on Round) names who asked for an
// exec-now or re-run when the caller said (ExecNowBy).
type Cause uint8

const (
	CausePlan    Cause = iota // the plan's fire
	CauseStart                // the first round of a start, by execOnLoad or initialDelay
	CauseExec                 // ExecNow while the schedule slept
	CauseRerun                // an ExecNow queued while a round ran, run right after it
	CauseSubmit               // an ad-hoc batch (Submit, SubmitAt)
	CauseCatchUp              // the plan's fire run late for fires missed while no process ran the schedule (a failover, misfire "once")
)

func (c Cause) String() string {
	switch c {
	case CausePlan:
		return "plan"
	case CauseStart:
		return "start"
	case CauseExec:
		return "exec"
	case CauseRerun:
		return "rerun"
	case CauseSubmit:
		return "submit"
	case CauseCatchUp:
		return "catchup"
	}
	return "unknown"
}

// Summary is given to OnTerminate when a schedule stops.
type Summary struct {
	Rounds int64
	Last   time.Time // start of the last round; zero if none ran
}
