package schedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/fom-go/fom/schedule/wheel"
)

// Delayed is a batch submitted for later by SubmitAfter or SubmitAt.
//
// A pending Delayed is all that a delayed batch costs (80 bytes): it is
// the wheel's callback itself (no closure), its timer is a field (the
// wheel's handle, not an allocation of its own), a batch of one task holds
// it as it is (no slice), and the channel Wait blocks on and the outcome
// are made only when someone waits or the batch ends. The pending ones of
// a generation are a ring through prev and next (no map, and no pointer to
// the generation: a sentinel starts the ring), and being in the ring is
// being pending: the timer's Fire and Cancel each take it out under the
// schedule's mutex, and whoever does so first decides, so a Delayed needs
// no lock or state of its own.
type Delayed struct {
	c     *Context
	tasks any   // the one Task, or several as a taskList
	at    int64 // Unix ns
	timer wheel.Timer

	prev, next *Delayed                   // in the generation's pending ring; nil when not pending; guarded by Context.mu
	out        atomic.Pointer[delayedOut] // made by the first Wait before the end, or at the end
}

// delayedOut is how a Delayed ended, and the channel its waiters block
// on: kept apart, so that a pending one does not carry its room. It is
// replaced whole, never changed once ended, so canceled batches share one.
//
// A batch of one task (without OnComplete) ends into one of 96 bytes,
// and Wait makes its Round from it: with a flood of delayed batches, what
// each leaves behind sets how often the collector runs, and on a small
// machine a collection holds the runtime's timers, and so the wheel, for
// up to ten milliseconds (golang/go#45632).
type delayedOut struct {
	done   chan struct{} // made by the first Wait before the end; closed at the end
	ended  bool          // the fields below are final
	status uint8         // a Status
	batch  *Batch        // a batch that keeps its own round: several tasks, or an OnComplete
	err    error         // why it did not run (number 0), or its task's error
	number int64
	value  any
	// Unix ns: the batch's start (its task's submission), its task's start
	// (0 if it never started) and its end.
	start, started, end int64
}

// set records round r, the batch's, of one task.
func (o *delayedOut) set(r Round) {
	res := r.Results[0]
	o.ended, o.status, o.err, o.number, o.value = true, uint8(res.Status), res.Err, r.Number, res.Value
	o.start, o.end = r.Start.UnixNano(), r.End.UnixNano()
	if !res.Started.IsZero() {
		o.started = res.Started.UnixNano()
	}
}

// round is the Round set recorded, with its task's id.
func (o *delayedOut) round(id string) Round {
	start := time.Unix(0, o.start)
	res := Result{TaskID: id, Status: Status(o.status), Value: o.value, Err: o.err, Submitted: start}
	if o.started != 0 {
		res.Started, res.Cost = time.Unix(0, o.started), time.Duration(o.end-o.started)
	}
	return Round{Number: o.number, Batch: true, Cause: CauseSubmit, Planned: start, Start: start, End: time.Unix(0, o.end), Results: []Result{res}}
}

// taskList is a delayed batch of several tasks, held in Delayed.tasks.
type taskList []Task

// ErrDelayedCanceled is returned by Delayed.Wait for a canceled batch.
var ErrDelayedCanceled = errors.New("delayed batch canceled")

// Stop is Cancel, so that a Delayed serves where a timer does.
func (d *Delayed) Stop() bool { return d.Cancel() }

// At returns when the batch is due.
func (d *Delayed) At() time.Time { return time.Unix(0, d.at) }

// Cancel prevents the batch from running. It returns true only if the
// batch will never run; false if it has already been submitted.
func (d *Delayed) Cancel() bool {
	c := d.c
	c.mu.Lock()
	if d.next == nil {
		c.mu.Unlock()
		return false // fired, canceled, or being submitted
	}
	c.unlistLocked(d)
	d.timer.Stop()
	out := c.canceled
	c.mu.Unlock()
	d.end(out)
	return true
}

// end records the outcome and wakes the waiters.
func (d *Delayed) end(out *delayedOut) {
	for {
		old := d.out.Load()
		if d.out.CompareAndSwap(old, out) {
			if old != nil {
				close(old.done)
			}
			return
		}
	}
}

// Wait blocks until the batch has run (returning its round), was canceled,
// could not be submitted, or ctx ends.
func (d *Delayed) Wait(ctx context.Context) (Round, error) {
	out := d.out.Load()
	for out == nil || !out.ended {
		if out == nil {
			if w := (&delayedOut{done: make(chan struct{})}); d.out.CompareAndSwap(nil, w) {
				out = w
			} else {
				out = d.out.Load()
				continue
			}
		}
		select {
		case <-out.done:
		case <-ctx.Done():
			return Round{}, fmt.Errorf("wait for delayed batch: %w", ctx.Err())
		}
		out = d.out.Load()
	}
	switch {
	case out.batch != nil:
		return out.batch.Wait(ctx)
	case out.number == 0:
		return Round{}, out.err
	}
	return out.round(d.tasks.(Task).ID()), nil
}

// delayedFire is a Delayed as the wheel's callback: Fire is not part of
// Delayed's own methods, which a user calls.
type delayedFire Delayed

// Fire submits the batch when due, unless Cancel or a stop took it first.
func (f *delayedFire) Fire(uint64) {
	d := (*Delayed)(f)
	c := d.c
	c.mu.Lock()
	if d.next == nil {
		c.mu.Unlock()
		return
	}
	c.unlistLocked(d)
	c.mu.Unlock()
	if t, ok := d.tasks.(Task); ok && c.job.OnComplete == nil {
		out := new(delayedOut)
		if _, err := c.submit(context.Background(), []Task{t}, d, out); err != nil {
			out.ended, out.err = true, err
			d.end(out) // else its batch's end does
		}
		return
	}
	var b *Batch
	var err error
	switch t := d.tasks.(type) {
	case taskList:
		b, err = c.Submit(context.Background(), t...)
	case Task:
		b, err = c.Submit(context.Background(), t)
	}
	d.end(&delayedOut{ended: true, batch: b, err: err})
}

// SubmitAt submits tasks as a batch at t (at once if t is past). Pending
// delayed batches are canceled when the schedule stops.
func (c *Context) SubmitAt(t time.Time, tasks ...Task) (*Delayed, error) {
	return c.submitDelayed(t, 0, tasks)
}

// submitDelayed submits tasks at t or, when t is zero, after d. After d,
// the wheel reads its clock once and says when that is; at t, the wait is
// until t by the context's clock (by monotonic time when t has a reading
// of it). tasks does not escape (one task is held as it is, several are
// copied), so a caller's variadic slice stays on its stack.
func (c *Context) submitDelayed(t time.Time, d time.Duration, tasks []Task) (*Delayed, error) {
	if len(tasks) == 0 {
		return nil, c.refuse(ErrNoTasks)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case Stopping:
		return nil, c.refuse(ErrStopping)
	case Stopped:
		return nil, c.refuse(ErrAlreadyStopped)
	}
	gen := c.ensureGeneration()
	dl := &Delayed{c: c, tasks: tasks[0]}
	if len(tasks) > 1 {
		dl.tasks = taskList(slices.Clone(tasks))
	}
	w := c.wheel
	if w == nil {
		if gen.wheel == nil {
			own, err := wheel.New(wheel.WithClock(c.clk), wheel.WithSize(64), wheel.WithDispatchers(1))
			if err != nil {
				return nil, err
			}
			gen.wheel = own
		}
		w = gen.wheel
	}
	// Listed before the timer is set: a timer due at once may fire as soon
	// as it is set, and its Fire then waits for c.mu, held here, as Cancel
	// and a stop do before they read dl.timer.
	if c.canceled == nil {
		c.canceled = &delayedOut{ended: true, err: ErrDelayedCanceled}
	}
	if gen.delayed == nil {
		gen.delayed = &Delayed{}
		gen.delayed.prev, gen.delayed.next = gen.delayed, gen.delayed
	}
	head := gen.delayed
	dl.prev, dl.next = head, head.next
	head.next.prev = dl
	head.next = dl
	var err error
	if t.IsZero() {
		if t, err = w.SetAfter(&dl.timer, d, (*delayedFire)(dl)); err != nil {
			err = fmt.Errorf("schedule %s: submit after %s: %w", c.name, d, err)
		}
	} else if err = w.Set(&dl.timer, until(c.clk, t), (*delayedFire)(dl)); err != nil {
		err = fmt.Errorf("schedule %s: submit at %s: %w", c.name, t.Format(time.RFC3339Nano), err)
	}
	if err != nil {
		c.unlistLocked(dl)
		return nil, err
	}
	dl.at = t.UnixNano()
	return dl, nil
}

// unlistLocked takes d out of its generation's pending ring, if there.
func (c *Context) unlistLocked(d *Delayed) {
	if d.next == nil {
		return // not listed
	}
	d.prev.next = d.next
	d.next.prev = d.prev
	d.prev, d.next = nil, nil // a handle kept by the caller holds no other Delayed
}

// cancelDelayed cancels every pending delayed batch of gen and stops its
// wheel.
func (c *Context) cancelDelayed(gen *generation) {
	c.mu.Lock()
	var pending []*Delayed
	if head := gen.delayed; head != nil {
		for d := head.next; d != head; d = d.next {
			pending = append(pending, d)
		}
	}
	c.mu.Unlock()
	for _, d := range pending {
		d.Cancel()
	}
	c.mu.Lock()
	w := gen.wheel
	c.mu.Unlock()
	if w != nil {
		w.Stop()
	}
}
