package schedule

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Trigger is a circulation trigger: it runs a function on demand or after
// a delay, never concurrently with itself, coalescing requests.
//
//   - Fire(d) asks for a run after d; FireNow() is Fire(0).
//   - Suspend() cancels any planned run.
//   - The latest Fire or Suspend wins over earlier ones.
//   - A Fire during a run yields exactly one run after it, however many
//     Fires arrived (the latest one's delay counts).
//   - When run returns again=true, the next run is planned after next,
//     unless a Fire or Suspend came during the run.
//   - A panic in run counts as again=false.
//
// A mutex guards a generation counter; every planned run carries the
// generation it was planned in and does nothing if a newer call superseded it.
type Trigger struct {
	run    func(ctx context.Context) (next time.Duration, again bool)
	clk    clockwork.Clock
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	gen       uint64
	timer     clockwork.Timer
	running   bool
	pending   bool
	pendingAt time.Time
	closed    bool
	onPanic   func(any)
}

// TriggerOption configures a Trigger.
type TriggerOption func(*Trigger)

// WithTriggerClock sets the clock (tests use a fake one).
func WithTriggerClock(clk clockwork.Clock) TriggerOption {
	return func(t *Trigger) {
		if clk != nil {
			t.clk = clk
		}
	}
}

// WithTriggerPanicHandler is called with the value of a panic in run.
func WithTriggerPanicHandler(fn func(any)) TriggerOption {
	return func(t *Trigger) { t.onPanic = fn }
}

// NewTrigger returns an idle trigger for run. It starts no goroutine until
// the first Fire.
func NewTrigger(run func(ctx context.Context) (next time.Duration, again bool), opts ...TriggerOption) *Trigger {
	t := &Trigger{run: run, clk: clockwork.NewRealClock()}
	for _, o := range opts {
		o(t)
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	return t
}

// Fire plans a run after d, replacing any planned run.
func (t *Trigger) Fire(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.gen++
	t.stopTimer()
	if t.running {
		t.pending, t.pendingAt = true, t.clk.Now().Add(d)
		return
	}
	t.arm(d)
}

// FireNow plans a run at once.
func (t *Trigger) FireNow() { t.Fire(0) }

// Suspend cancels any planned run, including one asked for during a run.
func (t *Trigger) Suspend() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen++
	t.stopTimer()
	t.pending = false
}

// Close suspends the trigger for good, cancels the context of a run in
// progress and waits for it to return.
func (t *Trigger) Close() {
	t.mu.Lock()
	t.closed = true
	t.gen++
	t.stopTimer()
	t.pending = false
	t.mu.Unlock()
	t.cancel()
	t.wg.Wait()
}

// Running reports whether run is executing now.
func (t *Trigger) Running() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.running
}

// arm plans a run after d in the current generation; called with mu held.
func (t *Trigger) arm(d time.Duration) {
	gen := t.gen
	t.wg.Add(1)
	t.timer = t.clk.AfterFunc(d, func() { t.fire(gen) })
}

// stopTimer cancels the planned run, if it has not fired; mu held.
func (t *Trigger) stopTimer() {
	if t.timer != nil && t.timer.Stop() {
		t.wg.Done()
	}
	t.timer = nil
}

func (t *Trigger) fire(gen uint64) {
	defer t.wg.Done()
	t.mu.Lock()
	if gen != t.gen || t.closed || t.running {
		t.mu.Unlock()
		return
	}
	t.running = true
	t.timer = nil
	t.mu.Unlock()

	next, again := t.call()

	t.mu.Lock()
	defer t.mu.Unlock()
	t.running = false
	switch {
	case t.closed:
	case t.pending:
		t.pending = false
		t.arm(max(0, t.pendingAt.Sub(t.clk.Now())))
	case again && gen == t.gen:
		t.arm(next)
	}
}

func (t *Trigger) call() (next time.Duration, again bool) {
	defer func() {
		if p := recover(); p != nil {
			next, again = 0, false
			if t.onPanic != nil {
				t.onPanic(p)
			}
		}
	}()
	return t.run(t.ctx)
}
