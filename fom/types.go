package fom

import (
	"context"

	"go.uber.org/zap"

	"github.com/fom-go/fom/schedule"
)

// Schedule marks a struct as a job. Embed it and put the job's built-in
// keys in its tag:
//
//	type Cleanup struct {
//	    fom.Schedule `name:"cleanup" cron:"0 */5 * * * *" threadMax:"4"`
//	}
type Schedule struct{}

// Types of the engine, re-exported so that jobs need only import fom.
type (
	ScheduleContext = schedule.Context
	Task            = schedule.Task
	Result          = schedule.Result
	Round           = schedule.Round
	Summary         = schedule.Summary
	Status          = schedule.Status
	State           = schedule.State
	Info            = schedule.Info
	TaskInfo        = schedule.TaskInfo
	Batch           = schedule.Batch
	PanicError      = schedule.PanicError
)

// Task outcomes.
const (
	StatusSuccess  = schedule.StatusSuccess
	StatusFailed   = schedule.StatusFailed
	StatusTimeout  = schedule.StatusTimeout
	StatusRejected = schedule.StatusRejected
	StatusConflict = schedule.StatusConflict
	StatusCanceled = schedule.StatusCanceled
)

// Schedule states.
const (
	Inited   = schedule.Inited
	Running  = schedule.Running
	Sleeping = schedule.Sleeping
	Stopping = schedule.Stopping
	Stopped  = schedule.Stopped
)

// Refusals and outcomes of the engine; test with errors.Is.
var (
	ErrNotStarted           = schedule.ErrNotStarted
	ErrAlreadyStarted       = schedule.ErrAlreadyStarted
	ErrAlreadyStopped       = schedule.ErrAlreadyStopped
	ErrStopping             = schedule.ErrStopping
	ErrAlreadyRunning       = schedule.ErrAlreadyRunning
	ErrExecAlreadyRequested = schedule.ErrExecAlreadyRequested
	ErrPastDeadTime         = schedule.ErrPastDeadTime
	ErrNoTasks              = schedule.ErrNoTasks
	ErrTimeout              = schedule.ErrTimeout
	ErrRejected             = schedule.ErrRejected
	ErrConflict             = schedule.ErrConflict
	ErrCanceled             = schedule.ErrCanceled
)

// TaskFunc makes a Task of a function.
func TaskFunc(id string, fn func(ctx context.Context) (any, error)) Task {
	return schedule.TaskFunc(id, fn)
}

// FromContext returns the schedule a task runs in, or nil outside a task.
func FromContext(ctx context.Context) *ScheduleContext { return schedule.FromContext(ctx) }

// Logger returns the logger of the schedule a task runs in, carrying the
// task id; a no-op logger outside a task.
func Logger(ctx context.Context) *zap.Logger { return schedule.Logger(ctx) }

// WithActor returns ctx carrying who acts: App.Act's exec-now on it names
// them in the schedule's run history (the admin page passes the signed-in
// user and address).
func WithActor(ctx context.Context, who string) context.Context { return schedule.WithActor(ctx, who) }
