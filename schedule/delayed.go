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
type Delayed struct {
	c     *Context
	at    time.Time
	tasks []Task
	done  chan struct{}

	mu    sync.Mutex
	timer *wheel.Timer
	state int // 0 pending, 1 submitted, 2 canceled
	batch *Batch
	err   error
}

// ErrDelayedCanceled is returned by Delayed.Wait for a canceled batch.
var ErrDelayedCanceled = errors.New("delayed batch canceled")

// At returns when the batch is due.
func (d *Delayed) At() time.Time { return d.at }

// Cancel prevents the batch from running. It returns true only if the
// batch will never run; false if it has already been submitted.
func (d *Delayed) Cancel() bool {
	d.mu.Lock()
	if d.state != 0 {
		d.mu.Unlock()
		return false
	}
	d.state = 2
	d.err = ErrDelayedCanceled
	d.timer.Stop()
	d.mu.Unlock()
	d.c.forgetDelayed(d)
	close(d.done)
	return true
}

// Wait blocks until the batch has run (returning its round), was canceled,
// could not be submitted, or ctx ends.
func (d *Delayed) Wait(ctx context.Context) (Round, error) {
	select {
	case <-d.done:
	case <-ctx.Done():
		return Round{}, fmt.Errorf("wait for delayed batch: %w", ctx.Err())
	}
	d.mu.Lock()
	b, err := d.batch, d.err
	d.mu.Unlock()
	if err != nil {
		return Round{}, err
	}
	return b.Wait(ctx)
}

// fire submits the batch when due.
func (d *Delayed) fire() {
	d.mu.Lock()
	if d.state != 0 {
		d.mu.Unlock()
		return
	}
	d.state = 1
	d.mu.Unlock()
	d.c.forgetDelayed(d)
	b, err := d.c.Submit(context.Background(), d.tasks...)
	d.mu.Lock()
	d.batch, d.err = b, err
	d.mu.Unlock()
	close(d.done)
}

// SubmitAt submits tasks as a batch at t (at once if t is past). Pending
// delayed batches are canceled when the schedule stops.
func (c *Context) SubmitAt(t time.Time, tasks ...Task) (*Delayed, error) {
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
	d := &Delayed{c: c, at: t, tasks: tasks, done: make(chan struct{})}
	if gen.delayed == nil {
		gen.delayed = map[*Delayed]struct{}{}
	}
	gen.delayed[d] = struct{}{}
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
	d.mu.Lock()
	defer d.mu.Unlock()
	tm, err := w.TryAfterFunc(until(c.clk, t), d.fire)
	if err != nil {
		delete(gen.delayed, d)
		return nil, fmt.Errorf("schedule %s: submit at %s: %w", c.name, t.Format(time.RFC3339Nano), err)
	}
	d.timer = tm
	return d, nil
}

func (c *Context) forgetDelayed(d *Delayed) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != nil {
		delete(c.gen.delayed, d)
	}
}

// cancelDelayed cancels every pending delayed batch of gen and stops its
// wheel.
func (c *Context) cancelDelayed(gen *generation) {
	c.mu.Lock()
	pending := make([]*Delayed, 0, len(gen.delayed))
	for d := range gen.delayed {
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
