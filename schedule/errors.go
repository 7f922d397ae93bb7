package schedule

import (
	"errors"
	"fmt"
)

// Refusals of the state machine and task outcomes. Errors returned by a
// Context wrap these and name the schedule, e.g. "schedule cleanup is
// already running"; test them with errors.Is.
var (
	ErrNotStarted           = errors.New("is not started")
	ErrAlreadyStarted       = errors.New("is already started")
	ErrAlreadyStopped       = errors.New("is already stopped")
	ErrStopping             = errors.New("is stopping")
	ErrAlreadyRunning       = errors.New("is already running")
	ErrExecAlreadyRequested = errors.New("already has an exec request queued")
	ErrNoTasks              = errors.New("was given no tasks")
	ErrPastDeadTime         = errors.New("is past its deadTime")

	ErrTimeout   = errors.New("task timed out")
	ErrRejected  = errors.New("task rejected: queue is full")
	ErrConflict  = errors.New("task skipped: a task with the same id is running")
	ErrCanceled  = errors.New("task canceled")
	ErrNoWork    = errors.New("job has no work: set Job.Tasks")
	ErrNilOption = errors.New("option is nil")
)

// Error is a refusal by a named schedule.
type Error struct {
	Schedule string
	Err      error
}

func (e *Error) Error() string { return "schedule " + e.Schedule + " " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func (c *Context) refuse(err error) error { return &Error{Schedule: c.name, Err: err} }

// PanicError is the error of a task or handler that panicked.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// StackTrace returns the stack of the goroutine that panicked.
func (e *PanicError) StackTrace() string { return string(e.Stack) }

// TaskError wraps an outcome sentinel with the task it happened to.
type TaskError struct {
	Schedule string
	TaskID   string
	Err      error // one of ErrTimeout, ErrRejected, ErrConflict, ErrCanceled
	Detail   string
}

func (e *TaskError) Error() string {
	s := fmt.Sprintf("schedule %s task %s: %v", e.Schedule, e.TaskID, e.Err)
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}
func (e *TaskError) Unwrap() error { return e.Err }
