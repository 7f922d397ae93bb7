// Package schedule is fom's engine: schedule contexts with their state
// machine, plans, worker pools, timeouts, conflict detection, exec-now,
// ad-hoc batches, and the circulation Trigger.
//
// # The model
//
// A Context runs a Job. Each round creates the job's tasks, submits them to
// the context's own pool, waits on a complete-latch until every task has an
// outcome, calls OnComplete, and computes the next fire from the Plan. A
// plan is a pure function of the previous round: cron uses its start,
// fixedRate its planned fire plus the rate (so the lateness of one start is
// never carried into the next), fixedDelay its end plus the delay. When the
// next fire is already past the round runs at once, once: there is no
// burst of catch-up rounds (for fixedRate the rate then counts from that
// round's start).
//
// Relative waits (task deadlines, fixedRate and fixedDelay fires) carry a
// monotonic clock reading and are not moved by a wall-clock step; calendar
// fires (cron, deadTime) follow the wall clock, re-checked at least every
// minute.
//
// Every task gets exactly one outcome (a Result): success, failed, timeout,
// rejected (the queue was full), conflict (its id was running elsewhere) or
// canceled (by a shutdown). Outcomes are decided once, by whoever comes
// first: the task returning, its deadline, or a shutdown. A task that
// ignores its context is recorded as timed out at its deadline and the
// round completes; its goroutine keeps its worker and its id counts as
// running until it returns, and ActiveTasks marks it abandoned.
//
// Deadlines live in one heap per context with one watcher goroutine that
// exists only while the heap is not empty; there is no timer or goroutine
// per task. All time comes from an injected clockwork.Clock, and every wait
// is bounded by a minute and re-checked against wall time, so a suspended
// machine or a clock step cannot silently delay a fire.
//
// # States
//
// State changes are made under the context's mutex. A sleeping context
// holds no goroutine: its next fire is one timer (on the app's shared
// timing wheel, or a runtime timer), whose callback starts a round
// goroutine; that goroutine runs rounds, so they never overlap, and ends
// once the next fire is armed. Whoever takes a context out of SLEEPING (the
// timer, ExecNow, a plan edit, Shutdown) first disarms the timer, so
// exactly one of them acts; while RUNNING only the round goroutine moves
// the state on. An idle schedule therefore costs memory, not a parked
// goroutine, and thousands of them share a few timer goroutines.
//
//	```mermaid
//	stateDiagram-v2
//	    [*] --> INITED
//	    INITED --> SLEEPING: Startup
//	    STOPPED --> SLEEPING: Startup (fresh pool)
//	    SLEEPING --> RUNNING: fire / ExecNow
//	    RUNNING --> SLEEPING: round complete
//	    RUNNING --> RUNNING: queued exec re-run
//	    RUNNING --> INITED: managed pool round complete
//	    SLEEPING --> STOPPING: Shutdown / deadTime
//	    RUNNING --> STOPPING: Shutdown
//	    STOPPING --> STOPPED: tasks returned, OnTerminate
//	```
//
// A context without a plan is a managed pool: Submit works in INITED, and
// Startup runs one round only when execOnLoad or initialDelay asks for it.
//
// Refusals are returned as *Error wrapping a sentinel (ErrNotStarted,
// ErrAlreadyStarted, ErrAlreadyStopped, ErrStopping, ErrAlreadyRunning,
// ErrExecAlreadyRequested, ErrNoTasks), with a message naming the schedule.
//
// # Several processes
//
// A Gate (Options.Gate) admits or refuses each planned round: several
// processes of one app share their schedules through one (package
// cluster). A Gate that is an Announcer is told each planned fire when
// the schedule arms its wait for it, so it can record the fires of an
// instant together before it comes; one that is a Holder parks a schedule
// it does not hold when it starts, and at its first refused fire (no wait
// armed, no wake-up at each fire another process runs) until Resume or
// Unpark.
//
// # The pool
//
// A task goes to an idle worker, else to a new worker while fewer than
// threadMax run, else to the queue of queueSize, else it is rejected and
// recorded. Workers above threadCore exit after threadAliveTime idle. All
// sizes can be changed while tasks run.
//
// A round's own goroutine is also a worker when a worker slot is free and
// no deadline can fire (taskOverTime 0): it keeps one of its tasks instead
// of handing it to a worker, runs it, then runs its round's other queued
// tasks. A round of one task, the common case, thus runs on one goroutine
// with no hand-off to a worker and back, and a schedule that only runs
// such rounds never starts a worker. With a deadline the tasks go to
// workers, since a task that ignores its context must not keep its round
// from completing at the deadline. Shutdown cancels a task running on the
// round goroutine from a goroutine of its own.
//
// # Cost
//
// An idle schedule is a timer entry and its data (about 4 KiB), with no
// goroutine. A fire takes the timing wheel's own goroutine a lock (the
// schedule's, or its runners' for a wake-up it hands over), then runs its
// round on a goroutine that keeps its grown stack from round to round:
// the wheel's own, when the wheel has nothing else due within a
// millisecond (wheel.Lender), else one from the app's shared Runners
// (always for a gated round, which asks a store first, and for a schedule
// whose lock is held at that instant). Handing a round to another
// goroutine wakes it, and on a process idle between fires that wakes a
// second thread whose core then runs the round cold: at a thousand
// schedules spread over the second it was about a quarter of a fire's
// CPU, and 1.4 context switches per fire more than the runtime's own
// timers make. A wheel that coalesces fires (below) runs the few rounds
// of its pass on its goroutine one after the other (one that does not,
// the last only), and arms a takeover at its next timer while it is lent
// (and at a millisecond when rounds wait behind the one running, which it
// then hands to the Runners), so a round that blocks there delays no
// other fire by more than that; the rounds of a burst due at once (more
// than 16) go to the Runners, all but the last.
//
// An App's wheels coalesce fires to the millisecond (wheel.WithCoalesce,
// fom.WithFireCoalescing): a schedule wakes at the first whole
// millisecond at or after its planned fire, so that schedules due within
// the same millisecond share one wake-up of the wheel's goroutine and run
// on it one after the other. With ten thousand schedules spread over the
// second a wake-up of its own per fire was most of a fire's CPU; with
// them coalesced, an engine fire costs 1.4× a re-armed time.AfterFunc
// where it cost 1.8× (bench/README.md). A fire is up to a millisecond
// late, never early, and one planned on the second is not moved. What goes to a
// runner is the wake-up itself, not a decided round: the wheel's
// goroutine hands over the schedule's loop and timer id without reading
// them, and the runner decides and runs the round back to back. In a
// burst of thousands due at once, deciding on the wheel's goroutine
// brought every schedule's lock, state and loop into that goroutine's
// cache, and the runner brought them in again a burst later
// (BenchmarkAlignedBurst: 57.9 → 50.3 last-level misses per fire).
//
// With thousands of schedules a fire's cost is mostly memory: each one
// touches its schedule's cold data (context, loop, pool, statistics) and
// makes garbage the collector then has to chase. So a round of one task run
// on the round goroutine (the common case) uses the group, run and result
// of the last such round its runner ran (runner.roundGroup), still in that
// goroutine's cache; only the task's context, and the results when
// OnComplete or a recorder may keep them, are allocated anew. (The job's
// own plan reads the round during Next only, and the group goes back to
// the runner after it.) A group other goroutines may
// still hold (tasks on workers, a deadline, a stop that came while the
// round goroutine ran the task) is left to the collector.
// An ad-hoc batch (Submit, and a delayed batch when due) is one Batch: it
// completes on the goroutine that delivers its last outcome rather than
// on a goroutine of its own (unless the job has an OnComplete, which may
// wait for another batch of its pool), its tasks' context is part of it
// when the caller's cannot be canceled, and its group goes back to the
// generation once its completion and the pool are done with it (counted
// in group.holds), for the next batch. A batch with a taskOverTime keeps
// its group: the timeout watcher may still name its runs.
// A task's id stays in the app's conflict registry while idle (Conflicts),
// so a recurring task finds its entry rather than inserting and deleting
// one per fire. For the same reason a fire reads no more of the schedule
// than it must: the settings a task's path needs are one word of the
// Context (taskSettings) rather than the config's current settings, a
// round's tasks are checked against the generation's stop flag rather
// than also its context, and a task run on a runner carries the runner's
// pprof label rather than the pool's worker's. What a fire does read sits
// together: the loop keeps only the previous round's times (for a config
// plan's edit) beside the armed wait, and the pool's lock, worker count
// and active list come first in it. A Context keeps what a fire reads in
// its first six lines and a generation in its first, with its pool in the
// same allocation from its third, and a Context, a loop and a generation
// each fill a size class whose objects start on a line
// (TestContextLayout), so that a fire's fields of one object do not
// straddle one line more than they must. A recorder left out is nil, not
// a do-nothing one, so that a fire does not read the schedule's name to
// pass it to nothing. BenchmarkAppFireCold and BenchmarkAlignedBurst
// count, under callgrind's cache simulation, the cache lines a fire
// reaches cold, one fire at a time and in a burst due at once.
// bench/README.md has the numbers against robfig/cron, gocron and the
// runtime's timers.
package schedule
