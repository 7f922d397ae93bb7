package schedule

import (
	"context"
	"fmt"
	"time"
)

// Batch is an ad-hoc submission.
type Batch struct {
	number int64
	done   chan struct{}
	round  Round
}

// Number is the batch's number; batches are numbered apart from rounds.
func (b *Batch) Number() int64 { return b.number }

// Done is closed once every task has an outcome and OnComplete returned.
func (b *Batch) Done() <-chan struct{} { return b.done }

// Wait blocks until the batch is complete or ctx ends.
func (b *Batch) Wait(ctx context.Context) (Round, error) {
	select {
	case <-b.done:
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
	bctx, cancel := context.WithCancel(context.WithValue(ctx, scheduleKey{}, c))
	stop := context.AfterFunc(gen.ctx, cancel)
	now := c.clk.Now()
	g := newGroup(bctx, n, true, now, now)
	b := &Batch{number: n, done: make(chan struct{})}
	c.submitAll(gen, g, tasks, c.cfg.Current(), nil)
	go func() {
		defer gen.wg.Done()
		defer cancel()
		defer stop()
		<-g.wait()
		if g.hasDeadline() {
			gen.tmo.remove(nil, g)
		}
		b.round = g.round(c.clk)
		c.complete(bctx, b.round)
		close(b.done)
	}()
	return b, nil
}

// SubmitAfter submits tasks as a batch after d.
func (c *Context) SubmitAfter(d time.Duration, tasks ...Task) (*Delayed, error) {
	return c.submitDelayed(time.Time{}, d, tasks)
}
