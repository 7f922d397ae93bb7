package schedule

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Batch is an ad-hoc submission.
//
// A batch is one allocation: it holds its tasks' context when the
// caller's can never be canceled (a Background, or values alone) and its
// round's one result; its Done channel is made only for a caller who asks
// before the end. Unless the job has an OnComplete, which may block or
// wait for another batch of the same pool, the batch completes on the
// goroutine that delivers its last outcome, not on a goroutine of its
// own, and its group (the latch its tasks report to) is used again by a
// later batch. A delayed batch of one task uses a Batch the schedule
// keeps for the next one: what it ends with goes to its Delayed.
type Batch struct {
	number int64
	round  Round
	mu     sync.Mutex
	done   latch // ended once round is final; guarded by mu

	c      *Context
	gen    *generation
	g      *group
	ctx    context.Context    // the tasks' parent: &own, or the caller's made cancelable
	cancel context.CancelFunc // of a cancelable caller's context; nil otherwise
	stop   func() bool        // unhooks cancel from the generation's context
	own    batchCtx
	one    [1]Result   // the round's one result, when its group is used again
	dout   *delayedOut // a delayed batch's outcome; the Batch is then used again
	d      *Delayed    // with dout
	span   func(Round) // ends the batch's span (Options.Tracer), or nil
}

// batchCtx is a batch's context when the caller's can never be canceled:
// the caller's values, the schedule (FromContext), and the generation's
// cancellation, without the three allocations of WithValue, WithCancel
// and AfterFunc.
type batchCtx struct {
	context.Context // the generation's: canceled when the schedule stops
	values          context.Context
	c               *Context
}

func (b *batchCtx) Value(key any) any {
	if _, ok := key.(scheduleKey); ok {
		return b.c
	}
	return b.values.Value(key)
}

// Number is the batch's number; batches are numbered apart from rounds.
func (b *Batch) Number() int64 { return b.number }

// Done is closed once every task has an outcome and OnComplete returned.
func (b *Batch) Done() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.done.waitLocked()
}

// finished reports whether the batch has ended, so that a Wait after the
// end makes no channel.
func (b *Batch) finished() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.done.ended
}

// Wait blocks until the batch is complete or ctx ends.
func (b *Batch) Wait(ctx context.Context) (Round, error) {
	if b.finished() {
		return b.round, nil
	}
	select {
	case <-b.Done():
		return b.round, nil
	case <-ctx.Done():
		return Round{}, fmt.Errorf("wait for batch %d: %w", b.number, ctx.Err())
	}
}

// Submit runs tasks now as an ad-hoc batch through the schedule's pool,
// with its timeouts, conflict detection, statistics and OnComplete.
// Allowed in INITED, RUNNING and SLEEPING. Canceling ctx cancels the
// batch's tasks.
func (c *Context) Submit(ctx context.Context, tasks ...Task) (*Batch, error) {
	return c.submit(ctx, tasks, nil, nil)
}

// submit is Submit; with d and out, it submits the one task of delayed
// batch d, in a Batch of the generation's that ends into out (see
// Batch.end) and is then used again: nothing else holds it.
func (c *Context) submit(ctx context.Context, tasks []Task, d *Delayed, out *delayedOut) (*Batch, error) {
	if len(tasks) == 0 {
		return nil, c.refuse(ErrNoTasks)
	}
	c.mu.Lock()
	switch c.state {
	case Stopping:
		c.mu.Unlock()
		return nil, c.refuse(ErrStopping)
	case Stopped:
		c.mu.Unlock()
		return nil, c.refuse(ErrAlreadyStopped)
	}
	gen := c.ensureGeneration()
	c.batches++
	n := c.batches
	gen.wg.Add(1)
	c.mu.Unlock()

	if ctx == nil {
		ctx = context.Background()
	}
	reuse := gen.reused()
	var b *Batch
	if out != nil {
		b, _ = reuse.batches.Get().(*Batch) // cleared by end
	}
	if b == nil {
		b = new(Batch)
	}
	b.number, b.c, b.gen, b.dout, b.d = n, c, gen, out, d
	delayedParent := gen.ctx
	if gen.tracer != nil {
		from := ctx
		if out != nil {
			from = gen.ctx
		}
		traced, end := gen.tracer.StartRound(from, RoundStart{Schedule: c.name, Number: n, Batch: true, Start: c.clk.Now()})
		b.span = end
		if out != nil {
			delayedParent = traced
		} else {
			ctx = traced
		}
	}
	switch {
	case out != nil:
		// A delayed batch's tasks derive from the generation's context
		// itself (a Background's values, and the schedule): this Batch is
		// used again, and a task may keep its context past its return.
		b.ctx = delayedParent
	case ctx.Done() == nil:
		b.own = batchCtx{Context: gen.ctx, values: ctx, c: c}
		b.ctx = &b.own
	default:
		b.ctx, b.cancel = context.WithCancel(context.WithValue(ctx, scheduleKey{}, c))
		b.stop = context.AfterFunc(gen.ctx, b.cancel)
	}
	now := c.clk.Now()
	ts := c.taskSettings()
	if c.job.OnComplete == nil {
		// Completed by whoever delivers the last outcome. Without a
		// timeout nothing but the batch and the pool holds its group, and
		// it is used again.
		if ts.overTime == 0 {
			b.g = batchGroup(&reuse.groups, b.ctx, n, now)
		} else {
			b.g = newGroup(b.ctx, n, true, now, now)
		}
		b.g.owner = b
		c.submitAll(gen, b.g, tasks, ts, nil)
		return b, nil
	}
	b.g = newGroup(b.ctx, n, true, now, now)
	c.submitAll(gen, b.g, tasks, ts, nil)
	go func() {
		<-b.g.wait()
		b.end()
	}()
	return b, nil
}

// end completes the batch once its group is: round, statistics,
// OnComplete, Done.
func (b *Batch) end() {
	c, g := b.c, b.g
	if g.hasDeadline() {
		b.gen.tmo.remove(nil, g)
	}
	b.round = g.round(c.clk)
	if b.span != nil {
		b.span(b.round)
	}
	if g.home != nil && len(b.round.Results) == 1 {
		b.one[0] = b.round.Results[0] // the group's own slice is used again
		b.round.Results = b.one[:]
	}
	b.g = nil
	g.release()
	gen := b.gen
	if out := b.dout; out != nil {
		if c.keepsRounds() {
			b.round.Results = slices.Clone(b.round.Results) // b.one is used again
		}
		c.complete(b.ctx, b.round)
		out.set(b.round)
		d := b.d
		*b = Batch{}
		gen.reused().batches.Put(b)
		d.end(out)
		gen.wg.Done()
		return
	}
	c.complete(b.ctx, b.round)
	b.mu.Lock()
	b.done.endLocked()
	b.mu.Unlock()
	if b.cancel != nil {
		b.stop()
		b.cancel()
	}
	gen.wg.Done()
}

// SubmitAfter submits tasks as a batch after d.
func (c *Context) SubmitAfter(d time.Duration, tasks ...Task) (*Delayed, error) {
	return c.submitDelayed(time.Time{}, d, tasks)
}
