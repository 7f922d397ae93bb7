package schedule

import (
	"fmt"
	"time"
)

// A task that ignores its context keeps its worker after its timeout: its
// outcome is recorded, the round goes on, and the task is *abandoned* until
// it returns. When every worker of a schedule is held that way the
// schedule is *stalled*: nothing queued can start. Two things keep that
// visible and bounded:
//
//   - Info reports Abandoned and Stalled, so the page and API show why a
//     RUNNING schedule makes no progress.
//   - While stalled, a queued task whose wait for a worker reaches
//     taskOverTime times out like a running one would ("waited ... for a
//     worker"), so a round stuck behind an abandoned task still completes
//     and its deadline keeps its meaning. A queue moving normally is left
//     alone: a task's own deadline counts from its start.
//
// The check is one heap entry per generation, armed by every timeout and
// re-armed while abandoned tasks remain.

// stallState counts what holds the workers.
type stallState struct {
	waiting   []queued // queued, undecided
	abandoned int      // active runs already decided (timed out or canceled)
	max       int      // worker slots
}

func (s stallState) stalled() bool { return s.abandoned > 0 && s.abandoned >= s.max }

func (p *pool) stallState() stallState {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := stallState{max: p.max}
	for r := p.active.head; r != nil; r = r.nextActive {
		if r.isDone() {
			st.abandoned++
		}
	}
	for _, r := range p.queue.waiting() {
		// A batch submitted with no taskOverTime has a group that is used
		// again: it does not time out in the queue after an edit, and its
		// runs are not named here, where they could be used again by then.
		if !r.isDone() && r.group.home == nil {
			st.waiting = append(st.waiting, queued{r, r.submitted})
		}
	}
	return st
}

// queued is a queued run with its submission instant, read under the
// pool's lock: a run taken by a worker meanwhile may be used again.
type queued struct {
	r         *taskRun
	submitted time.Time
}

// unqueue removes runs from the queue and returns those it found there.
func (p *pool) unqueue(runs []*taskRun) []*taskRun {
	drop := make(map[*taskRun]bool, len(runs))
	for _, r := range runs {
		drop[r] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var found []*taskRun
	p.queue.keep(func(r *taskRun) bool {
		if drop[r] {
			found = append(found, r)
			return false
		}
		return true
	})
	return found
}

// checkStall times out queued tasks that waited taskOverTime while the
// schedule was stalled, and re-arms itself while abandoned tasks remain.
func (c *Context) checkStall(gen *generation, now time.Time) {
	over := c.cfg.Current().TaskOverTime
	if over <= 0 || gen.stopping.Load() {
		return
	}
	st := gen.pool.stallState()
	if st.abandoned == 0 {
		return // the stuck tasks returned
	}
	next := now.Add(over)
	if st.stalled() {
		var expired []*taskRun
		for _, q := range st.waiting {
			if due := q.submitted.Add(over); !now.Before(due) {
				expired = append(expired, q.r)
			} else if due.Before(next) {
				next = due
			}
		}
		// Taken out of the queue first, so no worker can pick one up and
		// its task id is ours to release.
		if expired = gen.pool.unqueue(expired); len(expired) > 0 {
			c.interrupt(now, StatusTimeout, ErrTimeout,
				fmt.Sprintf("waited %s for a worker: all %d were held by tasks past their timeout", over, st.max), expired...)
			for _, r := range expired {
				c.releaseID(r)
				r.group.release()
			}
		}
	}
	armStall(gen, next)
}

// armStall arms gen's stall check at t, unless the generation stops.
func armStall(gen *generation, t time.Time) {
	if gen.stopping.Load() {
		return
	}
	gen.tmo.add(deadline{at: t, stall: &gen.stall})
	if gen.stopping.Load() { // cancelAll may have dropped it just before
		gen.tmo.removeStall(&gen.stall)
	}
}
