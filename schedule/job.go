package schedule

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"

	"github.com/fom-go/fom/schedule/wheel"
	"github.com/fom-go/fom/statistics"
)

// Job is the work and the handlers a Context runs. Package fom builds one
// from a tagged struct; it can also be filled in by hand.
type Job struct {
	// Tasks creates a round's tasks. Required unless Fixed is set. The
	// engine only reads the slice and keeps no reference to it, so the
	// same slice may serve every round.
	Tasks func(ctx context.Context) ([]Task, error)
	// Fixed, when Tasks is nil, are the tasks of every round (package
	// fom's Run and methods jobs). A round then runs no code of the job
	// before its tasks, so they are submitted at the round's start, read
	// once.
	Fixed []Task
	// OnComplete is called once per round and per ad-hoc batch, after every
	// task has an outcome (also for zero tasks).
	OnComplete func(ctx context.Context, r Round)
	// OnResult is called with every task outcome.
	OnResult func(r Result)
	// OnCancel is called before a task's context is canceled by a timeout or
	// a shutdown, before the task's own OnCancel.
	OnCancel func(taskID string, elapsed time.Duration)
	// OnTerminate is called once the schedule has stopped.
	OnTerminate func(s Summary)
	// Plan, when set, overrides the cron/fixedRate/fixedDelay keys.
	Plan Plan
}

// Recorder receives every outcome; package statistics implements it.
// Calls come from many goroutines and must not block for long.
type Recorder interface {
	RecordResult(schedule string, r Result)
	// RecordRound is called when a round or batch completes; Start minus
	// Planned is the round's fire lateness.
	RecordRound(schedule string, r Round)
}

// Tracer observes rounds, batches and tasks: package otelfom makes
// OpenTelemetry spans of them. StartRound is called as a round or batch
// begins, with the context it starts from; the context it returns is the
// parent of the round's tasks' contexts, and end is called with the
// finished round. StartTask wraps one task's run the same way. Both are
// called on the engine's goroutines and must not block.
type Tracer interface {
	StartRound(ctx context.Context, s RoundStart) (context.Context, func(Round))
	StartTask(ctx context.Context, schedule, task string, round int64, batch bool) (context.Context, func(Result))
}

// RoundStart is a round or batch as it begins.
type RoundStart struct {
	Schedule string
	Number   int64
	Batch    bool
	Cause    Cause
	Planned  time.Time
	Start    time.Time
}

// Options are a Context's collaborators. Every field is optional.
type Options struct {
	// Tracer, when set, observes every round, batch and task.
	Tracer Tracer
	// Clock drives every wait and timestamp. Default: the real clock.
	Clock clockwork.Clock
	// Logger is the parent logger; the context logs through a child named
	// after the schedule, with its own level. Default: no-op.
	Logger *zap.Logger
	// Conflicts is the registry shared by the schedules of one app.
	// Default: a registry of this context's own.
	Conflicts *Conflicts
	// Recorder receives every outcome. Default: none.
	Recorder Recorder
	// Stats keeps the schedule's statistics. Default: in memory, with the
	// default settings.
	Stats *statistics.Stats
	// Wheel, when set, times the schedule's fires and delayed batches; an
	// app shares a few among all its schedules, so that schedules due at
	// the same instant are woken by a few timers rather than one runtime
	// timer each. It must read the same clock as Clock (an app makes both
	// from its own): a fire's wait is handed to it from a reading of
	// Clock. Default: a runtime timer per wait, and a wheel of the
	// schedule's own for delayed batches.
	Wheel *wheel.Wheel
	// Runners, when set, runs the schedule's round goroutines on reusable
	// goroutines shared by an app's schedules; the app closes it after
	// its schedules. Default: a new goroutine per fire.
	Runners *Runners
	// Gate, when set, is asked before each planned round whether this
	// process may run it: several instances of one app share their
	// schedules through one (package cluster). Rounds asked for by ExecNow
	// and ad-hoc batches are not gated. Default: every round runs.
	Gate Gate
	// Control, when set, carries out Startup, Shutdown and ExecNow: the
	// instances of an app that share the schedule act on it as one, so a
	// ScheduleContext held anywhere means the schedule, not a local copy
	// (package fom routes them through its cluster). StartupHere,
	// ShutdownHere and ExecNowHere act on this process's copy. Default:
	// each call is its Here form.
	Control Control
}

// Control carries out an action on a schedule wherever it runs: action
// is ActionStart, ActionStop or ActionExec, by who asked ("" for nobody
// named). Its errors are the state machine's refusals (ErrAlreadyStarted,
// ...) or why the action could not be carried out.
type Control interface {
	Control(schedule, action, by string) error
}

// Actions a Control carries out.
const (
	ActionStart = "start"
	ActionStop  = "stop"
	ActionExec  = "exec"
)

// Gate admits planned rounds. A refused round does not run here (another
// instance runs it, or none may now); the plan goes on from its planned
// fire. Admit should answer promptly; an error counts as a refusal.
type Gate interface {
	Admit(ctx context.Context, schedule string, planned time.Time) (bool, error)
}

// Holder is a Gate that knows which schedules this process holds (the
// cluster: those it has the lease of, trusted or not). A schedule that
// starts, or whose round the gate refused, and that it does not hold parks:
// it arms no wait, so it costs no wake-up at each fire another process
// runs, until Resume (the gate took it over from a recorded fire) or Unpark
// (it holds it again with none recorded) arms it. Holds is called with the
// schedule's lock held: it must not block nor call back into the schedule;
// a Holder must call Resume or Unpark on every schedule it comes to hold,
// after Holds reports it.
type Holder interface {
	Gate
	Holds(schedule string) bool
}

// Announcer is a Gate told of a schedule's next planned fire when the
// schedule arms its wait for it, before Admit is asked at its time: it
// may record the fire then (the cluster records the fires of the same
// few milliseconds in one statement, ahead of them), so that Admit
// answers without a round trip. Announce is called with the schedule's
// lock held: it must not block nor call back into the schedule. A fire
// announced may never be asked for (the schedule stopped or its plan was
// edited), and one asked for may not have been announced.
type Announcer interface {
	Gate
	Announce(schedule string, planned time.Time)
}

// Withdrawer is a Gate told when a fire it admitted does not run after
// all: the schedule stopped between the admission and its round. The
// cluster keeps such a fire out of the last fire it hands the next owner,
// which then runs it. Withdraw is called without the schedule's lock.
type Withdrawer interface {
	Gate
	Withdraw(schedule string, planned time.Time)
}
