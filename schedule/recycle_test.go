package schedule

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// spares returns the groups idle runners keep for their next round. A
// runner sets its spare before it locks the set to go idle.
func spares(rs *Runners) []*group {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var out []*group
	for _, r := range rs.idle {
		if r.spare != nil {
			out = append(out, r.spare)
		}
	}
	return out
}

// idleSpares waits until every runner is idle again and returns the
// spares they keep.
func (h *harness) idleSpares() []*group {
	h.t.Helper()
	rs := h.c.runners
	deadline := time.Now().Add(5 * time.Second)
	for {
		rs.mu.Lock()
		busy := rs.running
		rs.mu.Unlock()
		if busy == 0 {
			return spares(rs)
		}
		if time.Now().After(deadline) {
			h.t.Fatal("the runners did not go idle")
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// A round of one task run on the round goroutine leaves its group to its
// runner, which uses it again for the next round: no group per fire.
func TestARoundsGroupIsUsedAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]string{"cron": "0 0 * * * *"}, Job{Tasks: func(context.Context) ([]Task, error) {
		return []Task{TaskFunc("t", func(context.Context) (any, error) { return "a value", nil })}, nil
	}})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	var first *group
	for n := int64(1); n <= 5; n++ {
		if err := h.c.ExecNow(); err != nil {
			t.Fatal(err)
		}
		h.waitSleeping(n)
		kept := h.idleSpares() // one runner: the next round finds it idle
		if len(kept) != 1 {
			t.Fatalf("round %d left %d spare groups", n, len(kept))
		}
		g := kept[0]
		if g.ctx != nil || g.first.task != nil || g.oneResult[0].Value != nil || g.number != 0 {
			t.Fatalf("round %d's spare group still holds its round: %+v", n, g)
		}
		if first == nil {
			first = g
		}
		if g != first {
			t.Fatalf("round %d used another group", n)
		}
	}
}

// A stop that comes while the round goroutine runs its task itself cancels
// the task from a goroutine of its own (stopLocked), which reads the run
// while the task may return on its own: the round's group is then not
// kept for the next round (a spare cleared under that goroutine's read
// was a data race, seen by the race detector during an App's Stop).
func TestAGroupAStopMayStillReadIsNotUsedAgain(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h := newHarness(t, map[string]string{"cron": "0 0 * * * *"}, Job{Tasks: func(context.Context) ([]Task, error) {
		return []Task{TaskFunc("t", func(context.Context) (any, error) {
			once.Do(func() { close(started) })
			<-release // returns when the test says, whatever its context
			return nil, nil
		})}, nil
	}})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	if err := h.c.ExecNow(); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := h.c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	close(release)
	h.waitState(Stopped)
	if kept := h.idleSpares(); len(kept) != 0 {
		t.Fatalf("the round a stop interrupted left its group for the next round")
	}
}

// Rounds whose group other goroutines may still hold do not give it back:
// several tasks (workers run them), or a deadline.
func TestAGroupOthersMayHoldIsNotUsedAgain(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		tags  map[string]string
		tasks []Task
	}{
		"two tasks":    {map[string]string{"cron": "0 0 * * * *"}, []Task{ok("a"), ok("b")}},
		"taskOverTime": {map[string]string{"cron": "0 0 * * * *", "taskOverTime": "1h"}, []Task{ok("a")}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, tc.tags, Job{Tasks: func(context.Context) ([]Task, error) { return tc.tasks, nil }})
			if err := h.c.Startup(); err != nil {
				t.Fatal(err)
			}
			for n := int64(1); n <= 3; n++ {
				if err := h.c.ExecNow(); err != nil {
					t.Fatal(err)
				}
				h.waitSleeping(n)
				if len(h.idleSpares()) != 0 {
					t.Fatalf("round %d left its group for the next", n)
				}
			}
		})
	}
}

// Results handed to OnComplete and a task's context kept past its return
// stay what they were while later rounds use the group again. Run with
// -race: the goroutines reading kept contexts race with nothing.
func TestRecycledRoundsKeepWhatTheyHandedOut(t *testing.T) {
	t.Parallel()
	const rounds = 50
	var (
		mu   sync.Mutex
		kept []Round
		n    atomic.Int64
		wg   sync.WaitGroup
		stop = make(chan struct{})
		bad  atomic.Value
	)
	task := TaskFunc("t", func(ctx context.Context) (any, error) {
		v := n.Add(1)
		wg.Add(1)
		go func() { // a task that leaves work behind with its context
			defer wg.Done()
			for {
				if FromContext(ctx) == nil || ctx.Value(taskKey{}) != "t" || ctx.Err() != nil {
					bad.Store("a kept task context changed")
					return
				}
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Microsecond):
				}
			}
		}()
		return v, nil
	})
	h := newHarness(t, map[string]string{"cron": "0 0 * * * *"}, Job{
		Tasks: func(context.Context) ([]Task, error) { return []Task{task}, nil },
		OnComplete: func(_ context.Context, r Round) {
			mu.Lock()
			kept = append(kept, r)
			mu.Unlock()
		},
	})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= rounds; i++ {
		if err := h.c.ExecNow(); err != nil {
			t.Fatal(err)
		}
		h.waitSleeping(i)
	}
	close(stop)
	wg.Wait()
	if msg := bad.Load(); msg != nil {
		t.Fatal(msg)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(kept) != rounds {
		t.Fatalf("%d rounds completed", len(kept))
	}
	for i, r := range kept {
		if len(r.Results) != 1 || r.Results[0].Value != int64(i+1) || r.Number != int64(i+1) {
			t.Fatalf("round %d kept by OnComplete now reads %+v", i+1, r)
		}
	}
	if len(h.idleSpares()) == 0 {
		t.Fatal("no runner kept a round's group for another")
	}
}

// A one-task batch of a job without OnComplete gives its group back once
// its completion and its worker are done with it, cleared; the next batch
// takes it from there.
func TestABatchsGroupIsUsedAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]string{"threadMax": "1"}, Job{})
	ctx := context.Background()
	seen := map[*group]int{}
	for i := range 20 {
		g := newGate("t")
		b, err := h.c.Submit(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		waitChan(t, g.started, "the task's start")
		seen[b.g]++ // b.g is cleared by the batch's end, which waits for the gate
		g.open()
		r, err := b.Wait(ctx)
		if err != nil || len(r.Results) != 1 || r.Results[0].Value != "t" || r.Number != int64(i+1) {
			t.Fatalf("batch %d: %+v, %v", i+1, r, err)
		}
		h.waitFor("the worker to let go of the group", func() bool { return h.c.Info().Active == 0 })
	}
	if len(seen) == 20 {
		t.Fatal("every batch had a group of its own")
	}
	h.c.mu.Lock()
	home := &h.c.gen.reused().groups
	h.c.mu.Unlock()
	for range 20 {
		g, _ := home.Get().(*group)
		if g == nil {
			break
		}
		if g.ctx != nil || g.first.task != nil || g.first.ctx != nil || g.oneResult[0].Value != nil || g.results != nil || g.owner != nil {
			t.Fatalf("a group waiting to be used again still holds its batch: %+v", g)
		}
	}
}

// Batches whose groups are used again hand out what they were: every
// round its own result, and a context a task keeps past its return still
// names its task and schedule. The pool's views (ActiveTasks,
// WaitingTasks) read runs only under its lock; run with -race.
func TestBatchesUsingGroupsAgainKeepWhatTheyHandedOut(t *testing.T) {
	t.Parallel()
	const submitters, each = 4, 200
	h := newHarness(t, map[string]string{"threadMax": "2", "queueSize": "1000"}, Job{})
	var (
		wg, kept sync.WaitGroup
		stop     = make(chan struct{})
		bad      atomic.Value
	)
	task := func(id string, v int) Task {
		return TaskFunc(id, func(ctx context.Context) (any, error) {
			kept.Add(1)
			go func() { // work left behind with the task's context
				defer kept.Done()
				<-stop
				if FromContext(ctx) != h.c || ctx.Value(taskKey{}) != id || ctx.Err() != nil || ctx.Value("other") != nil {
					bad.Store("a kept task context changed: " + id)
				}
			}()
			return v, nil
		})
	}
	views := make(chan struct{})
	go func() {
		defer close(views)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, ti := range h.c.ActiveTasks() {
				if ti.ID == "" || ti.Round == 0 {
					bad.Store("an active task without its id or batch")
				}
			}
			h.c.WaitingTasks()
		}
	}()
	for s := range submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := range each {
				id := "s" + strconv.Itoa(s) + "-" + strconv.Itoa(i)
				b, err := h.c.Submit(ctx, task(id, s*each+i))
				if err != nil {
					bad.Store(err.Error())
					return
				}
				r, err := b.Wait(ctx)
				if err != nil || len(r.Results) != 1 || r.Results[0].TaskID != id || r.Results[0].Value != s*each+i || r.Number != b.Number() {
					bad.Store(fmt.Sprintf("batch %s: %+v, %v", id, r, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	kept.Wait()
	<-views
	if msg := bad.Load(); msg != nil {
		t.Fatal(msg)
	}
}

// A job's OnComplete still runs on a goroutine of its own: it may wait
// for another batch of the same pool, whose one worker would otherwise be
// the one running it.
func TestABatchsOnCompleteMayWaitForAnotherBatch(t *testing.T) {
	t.Parallel()
	var (
		c      atomic.Pointer[Context]
		nested = make(chan Round, 1)
	)
	h := newHarness(t, map[string]string{"threadMax": "1"}, Job{OnComplete: func(ctx context.Context, r Round) {
		if r.Number != 1 {
			return
		}
		b, err := c.Load().Submit(ctx, ok("nested"))
		if err != nil {
			return
		}
		if inner, err := b.Wait(ctx); err == nil {
			nested <- inner
		}
	}})
	c.Store(h.c)
	b, err := h.c.Submit(context.Background(), ok("outer"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the outer batch's OnComplete did not return")
	}
	if r := <-nested; len(r.Results) != 1 || r.Results[0].Value != "nested" {
		t.Fatalf("nested batch: %+v", r)
	}
}

// Done and Wait after the end: a closed channel, the round at once.
func TestABatchDoneAfterItsEnd(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, Job{})
	b, err := h.c.Submit(context.Background(), ok("a"))
	if err != nil {
		t.Fatal(err)
	}
	h.waitFor("the batch's end", b.finished)
	waitChan(t, b.Done(), "Done after the end")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Wait must not need it
	if r, err := b.Wait(ctx); err != nil || r.Results[0].Value != "a" {
		t.Fatalf("Wait after the end: %+v, %v", r, err)
	}
}

// A shutdown drops queued batches whose groups are used again: each ends
// canceled, and the schedule takes batches again after a restart.
func TestQueuedBatchesEndAtShutdown(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]string{"cron": "0 0 * * * *", "threadMax": "1", "queueSize": "10"}, Job{})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	g := newGate("blocker")
	first, err := h.c.Submit(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	waitChan(t, g.started, "the blocker's start")
	var queued []*Batch
	for range 5 {
		b, err := h.c.Submit(ctx, ok("queued"))
		if err != nil {
			t.Fatal(err)
		}
		queued = append(queued, b)
	}
	if err := h.c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	h.waitState(Stopped)
	for _, b := range append(queued, first) {
		r, err := b.Wait(ctx)
		if err != nil || len(r.Results) != 1 || r.Results[0].Status != StatusCanceled {
			t.Fatalf("batch %d at shutdown: %+v, %v", b.Number(), r, err)
		}
	}
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	b, err := h.c.Submit(ctx, ok("after"))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := b.Wait(ctx); err != nil || r.Results[0].Value != "after" {
		t.Fatalf("after a restart: %+v, %v", r, err)
	}
}

// roundRecorder keeps the rounds a schedule records.
type roundRecorder struct {
	mu     sync.Mutex
	rounds []Round
}

func (r *roundRecorder) RecordResult(string, Result) {}
func (r *roundRecorder) RecordRound(_ string, rd Round) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rounds = append(r.rounds, rd)
}

// A delayed batch of one task ends into its outcome and its Batch is used
// again: Wait gives back the round the schedule recorded (number, times
// to the nanosecond, status, value, error), for a task that succeeded,
// failed or was rejected; the context a task keeps still names it.
func TestADelayedBatchsRoundComesBackFromItsOutcome(t *testing.T) {
	t.Parallel()
	rec := &roundRecorder{}
	h := newHarness(t, map[string]string{"threadMax": "1", "queueSize": "0"}, Job{}, func(o *Options) { o.Recorder = rec })
	boom := errors.New("boom")
	var kept atomic.Value
	block := newGate("block")
	tasks := []Task{
		TaskFunc("fine", func(ctx context.Context) (any, error) { kept.Store(ctx); return 42, nil }),
		TaskFunc("failing", func(context.Context) (any, error) { return nil, boom }),
	}
	var ds []*Delayed
	for _, task := range tasks {
		d, err := h.c.SubmitAfter(time.Second, task)
		if err != nil {
			t.Fatal(err)
		}
		h.clk.Advance(time.Second)
		if _, err := d.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		h.waitFor("the worker to be free", func() bool { return h.c.Info().Active == 0 })
		ds = append(ds, d)
	}
	// The one worker held, the next delayed task finds no room.
	if _, err := h.c.Submit(context.Background(), block); err != nil {
		t.Fatal(err)
	}
	waitChan(t, block.started, "the blocker's start")
	rejected, err := h.c.SubmitAfter(time.Second, ok("rejected"))
	if err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(time.Second)
	r, err := rejected.Wait(context.Background())
	block.open()
	if err != nil || r.Results[0].Status != StatusRejected || !r.Results[0].Started.IsZero() || r.Results[0].TaskID != "rejected" {
		t.Fatalf("rejected delayed batch: %+v, %v", r, err)
	}
	ds = append(ds, rejected)

	rec.mu.Lock()
	recorded := map[int64]Round{}
	for _, rd := range rec.rounds {
		recorded[rd.Number] = rd
	}
	rec.mu.Unlock()
	for i, d := range ds {
		got, err := d.Wait(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := recorded[got.Number]
		if got.Number == 0 || !got.Batch || got.Cause != CauseSubmit || !got.Start.Equal(want.Start) || !got.Planned.Equal(want.Planned) ||
			!got.End.Equal(want.End) || len(got.Results) != 1 {
			t.Fatalf("delayed batch %d: got %+v, recorded %+v", i, got, want)
		}
		g, w := got.Results[0], want.Results[0]
		if g.TaskID != w.TaskID || g.Status != w.Status || g.Value != w.Value || g.Err != w.Err ||
			!g.Submitted.Equal(w.Submitted) || !g.Started.Equal(w.Started) || g.Cost != w.Cost {
			t.Fatalf("delayed batch %d's result: got %+v, recorded %+v", i, g, w)
		}
	}
	if r, _ := ds[0].Wait(context.Background()); r.Results[0].Value != 42 || r.Results[0].Status != StatusSuccess {
		t.Fatalf("fine: %+v", r)
	}
	if r, _ := ds[1].Wait(context.Background()); !errors.Is(r.Results[0].Err, boom) || r.Results[0].Status != StatusFailed {
		t.Fatalf("failing: %+v", r)
	}
	more := func() { // a delayed batch of one task, run to its end
		d, err := h.c.SubmitAfter(time.Second, ok("more"))
		if err != nil {
			t.Fatal(err)
		}
		h.clk.Advance(time.Second)
		if _, err := d.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 { // the Batches and groups are used again meanwhile
		more()
	}
	ctx := kept.Load().(context.Context)
	if FromContext(ctx) != h.c || ctx.Value(taskKey{}) != "fine" || ctx.Err() != nil || ctx.Done() == nil || ctx.Value("other") != nil {
		t.Fatal("the context a delayed task kept changed")
	}
	defer func() { // and a stop still cancels it
		if err := h.c.Close(context.Background()); err != nil || ctx.Err() == nil {
			t.Errorf("after the schedule closed: %v, the kept context's Err %v", err, ctx.Err())
		}
	}()
	h.c.mu.Lock()
	home := &h.c.gen.reused().batches
	h.c.mu.Unlock()
	// The race detector makes a sync.Pool drop a quarter of what it is
	// given: a few more batches make sure one is kept.
	for try := 0; ; try++ {
		if b, _ := home.Get().(*Batch); b != nil {
			if b.c != nil || b.g != nil || b.dout != nil || b.d != nil || b.one[0].TaskID != "" {
				t.Fatalf("a Batch waiting to be used again still holds its batch: %+v", b)
			}
			break
		}
		if try == 10 {
			t.Fatal("no delayed batch's Batch was kept for the next")
		}
		more()
	}
}
