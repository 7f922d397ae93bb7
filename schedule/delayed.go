package schedule

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fom-go/fom/schedule/wheel"
)

// Delayed is a batch submitted for later by SubmitAfter or SubmitAt.
//
// A pending Delayed is all that a delayed batch costs: its timer is a
// field (the wheel's handle, not an allocation of its own), the pending
// ones of a generation are a list through prev and next (not a map), and
// the channel Wait blocks on is made only when someone waits.
type Delayed struct {
	c     *Context
	gen   *generation
	at    int64 // Unix ns
	tasks []Task
	timer wheel.Timer

	mu         sync.Mutex
	state      uint8         // delayedPending, ...
	done       chan struct{} // made by the first Wait before the end
	prev, next *Delayed      // in gen's pending list; guarded by Context.mu
	out        *delayedOut   // set at the end
}

// delayedOut is how a Delayed ended: kept apart, so that a pending one
// does not carry its room.
type delayedOut struct {
	batch *Batch
	err   error
}

// States of a Delayed.
const (
	delayedPending uint8 = iota
	delayedFiring        // being submitted
	delayedEnded         // submitted, refused, or canceled: batch and err are final
)

// ErrDelayedCanceled is returned by Delayed.Wait for a canceled batch.
var ErrDelayedCanceled = errors.New("delayed batch canceled")

// Stop is Cancel, so that a Delayed serves where a timer does.
func (d *Delayed) Stop() bool { return d.Cancel() }

// At returns when the batch is due.
func (d *Delayed) At() time.Time { return time.Unix(0, d.at) }

// Cancel prevents the batch from running. It returns true only if the
// batch will never run; false if it has already been submitted.
func (d *Delayed) Cancel() bool {
	d.mu.Lock()
	if d.state != delayedPending {
		d.mu.Unlock()
		return false
	}
	d.state = delayedFiring // nobody else may end it now
	d.timer.Stop()
	d.mu.Unlock()
	d.c.forgetDelayed(d)
	d.end(nil, ErrDelayedCanceled)
	return true
}

// end records the outcome and wakes the waiters.
func (d *Delayed) end(b *Batch, err error) {
	d.mu.Lock()
	d.state, d.out = delayedEnded, &delayedOut{batch: b, err: err}
	if d.done != nil {
		close(d.done)
	}
	d.mu.Unlock()
}

// Wait blocks until the batch has run (returning its round), was canceled,
// could not be submitted, or ctx ends.
func (d *Delayed) Wait(ctx context.Context) (Round, error) {
	d.mu.Lock()
	if d.state != delayedEnded {
		if d.done == nil {
			d.done = make(chan struct{})
		}
		done := d.done
		d.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return Round{}, fmt.Errorf("wait for delayed batch: %w", ctx.Err())
		}
		d.mu.Lock()
	}
	b, err := d.out.batch, d.out.err
	d.mu.Unlock()
	if err != nil {
		return Round{}, err
	}
	return b.Wait(ctx)
}

// fire submits the batch when due.
func (d *Delayed) fire() {
	d.mu.Lock()
	if d.state != delayedPending {
		d.mu.Unlock()
		return
	}
	d.state = delayedFiring
	d.mu.Unlock()
	d.c.forgetDelayed(d)
	d.end(d.c.Submit(context.Background(), d.tasks...))
}

// SubmitAt submits tasks as a batch at t (at once if t is past). Pending
// delayed batches are canceled when the schedule stops.
func (c *Context) SubmitAt(t time.Time, tasks ...Task) (*Delayed, error) {
	return c.submitDelayed(t, until(c.clk, t), tasks)
}

// submitDelayed submits tasks at t, which is wait from now: SubmitAfter
// knows the wait without a second reading of the clock.
func (c *Context) submitDelayed(t time.Time, wait time.Duration, tasks []Task) (*Delayed, error) {
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
	d := &Delayed{c: c, gen: gen, at: t.UnixNano(), tasks: tasks}
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
	// Listed before the timer is set: a timer due at once may fire (and
	// unlist it, under c.mu, held here) as soon as it is set.
	d.next = gen.delayed
	if d.next != nil {
		d.next.prev = d
	}
	gen.delayed = d
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := w.Set(&d.timer, wait, d.fire); err != nil {
		c.unlistLocked(d)
		return nil, fmt.Errorf("schedule %s: submit at %s: %w", c.name, t.Format(time.RFC3339Nano), err)
	}
	return d, nil
}

func (c *Context) forgetDelayed(d *Delayed) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unlistLocked(d)
}

// unlistLocked takes d out of its generation's pending list, if there.
func (c *Context) unlistLocked(d *Delayed) {
	g := d.gen
	if g == nil {
		return
	}
	switch {
	case d.prev != nil:
		d.prev.next = d.next
	case g.delayed == d:
		g.delayed = d.next
	default:
		return // not listed
	}
	if d.next != nil {
		d.next.prev = d.prev
	}
	d.prev, d.next, d.gen = nil, nil, nil // a handle kept by the caller holds no generation
}

// cancelDelayed cancels every pending delayed batch of gen and stops its
// wheel.
func (c *Context) cancelDelayed(gen *generation) {
	c.mu.Lock()
	var pending []*Delayed
	for d := gen.delayed; d != nil; d = d.next {
		pending = append(pending, d)
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
