package schedule

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/jonboulle/clockwork"

	"github.com/fom-go/fom/schedule/wheel"
)

// roundOf submits tasks as a batch and returns its round.
func roundOf(t *testing.T, c *Context, tasks ...Task) Round {
	t.Helper()
	b, err := c.Submit(context.Background(), tasks...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := b.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestTimeoutEachTask(t *testing.T) {
	t.Parallel()
	var hookSawLiveCtx atomic.Bool
	g := newGate("slow")
	quick := newGate("quick")
	h := newHarness(t, map[string]string{"taskOverTime": "5s", "threadMax": "2"}, Job{
		OnCancel: func(id string, elapsed time.Duration) { hookSawLiveCtx.Store(id == "slow" && elapsed == 5*time.Second) },
	})
	b, err := h.c.Submit(context.Background(), g, quick)
	if err != nil {
		t.Fatal(err)
	}
	waitChan(t, g.started, "slow start")
	waitChan(t, quick.started, "quick start")
	h.clk.Advance(2 * time.Second)
	quick.open()
	h.waitFor("quick done", func() bool { return h.c.Counts().Success == 1 })
	h.clk.Advance(3 * time.Second)
	r, err := b.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	slow := r.Results[0]
	if slow.Status != StatusTimeout || !errors.Is(slow.Err, ErrTimeout) || slow.Cost != 5*time.Second {
		t.Fatalf("slow %+v", slow)
	}
	if !strings.Contains(slow.Err.Error(), "schedule job task slow: task timed out (taskOverTime 5s)") {
		t.Fatalf("message %q", slow.Err)
	}
	if r.Results[1].Status != StatusSuccess || r.Results[1].Cost != 2*time.Second {
		t.Fatalf("quick %+v", r.Results[1])
	}
	if !hookSawLiveCtx.Load() || !g.canceled.Load() {
		t.Fatal("OnCancel hooks not called with the elapsed time")
	}
}

func TestTimeoutWholeRound(t *testing.T) {
	t.Parallel()
	first, second := newGate("first"), newGate("second")
	h := newHarness(t, map[string]string{"taskOverTime": "5s", "detectTimeoutOnEachTask": "false", "threadMax": "1"}, Job{})
	b, err := h.c.Submit(context.Background(), first, second)
	if err != nil {
		t.Fatal(err)
	}
	waitChan(t, first.started, "first start")
	h.clk.Advance(4 * time.Second)
	first.open() // frees the worker at t0+4s; second starts with 1s left
	waitChan(t, second.started, "second start")
	h.clk.Advance(time.Second)
	r, _ := b.Wait(context.Background())
	if r.Results[0].Status != StatusSuccess {
		t.Fatalf("first %+v", r.Results[0])
	}
	if s := r.Results[1]; s.Status != StatusTimeout || s.Cost != time.Second {
		t.Fatalf("second %+v", s)
	}
}

func TestRoundDeadlineCoversQueuedTasks(t *testing.T) {
	t.Parallel()
	g, never := newGate("running"), newGate("never")
	h := newHarness(t, map[string]string{"taskOverTime": "5s", "detectTimeoutOnEachTask": "false", "threadMax": "1"}, Job{})
	b, _ := h.c.Submit(context.Background(), g, never)
	waitChan(t, g.started, "start")
	h.clk.Advance(5 * time.Second)
	r, _ := b.Wait(context.Background())
	for i, res := range r.Results {
		if res.Status != StatusTimeout {
			t.Fatalf("result %d %+v", i, res)
		}
	}
	if !r.Results[1].Started.IsZero() {
		t.Fatal("the queued task must never start")
	}
	h.waitFor("pool drained", func() bool { return len(h.c.ActiveTasks()) == 0 })
	select {
	case <-never.started:
		t.Fatal("a timed-out queued task ran")
	default:
	}
}

func TestAbandonedTask(t *testing.T) {
	t.Parallel()
	g := newGate("stubborn")
	g.stubborn = true
	conflicts := NewConflicts()
	var completed atomic.Int32
	h := newHarness(t, map[string]string{"taskOverTime": "1s", "execOnLoad": "true"},
		Job{Tasks: tasksOf(g), OnComplete: func(context.Context, Round) { completed.Add(1) }},
		func(o *Options) { o.Conflicts = conflicts })
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	waitChan(t, g.started, "start")
	h.clk.Advance(time.Second)
	// The round completes at the deadline although the task ignores it.
	h.waitFor("round complete", func() bool { return completed.Load() == 1 })
	a := h.c.ActiveTasks()
	if len(a) != 1 || !a[0].Abandoned || a[0].ID != "stubborn" || !strings.Contains(a[0].Stack, "(*gate).Exec") {
		t.Fatalf("active %+v", a)
	}
	if !conflicts.Running("stubborn") {
		t.Fatal("an abandoned task's id must count as running")
	}
	if h.c.Counts().Timeout != 1 {
		t.Fatalf("counts %+v", h.c.Counts())
	}
	g.open()
	h.waitFor("returned", func() bool { return len(h.c.ActiveTasks()) == 0 && !conflicts.Running("stubborn") })
	if h.c.Counts().Success != 0 {
		t.Fatal("a late return must not change the recorded timeout")
	}
}

func TestQueueOverflowIsRecorded(t *testing.T) {
	t.Parallel()
	a, b, c := newGate("a"), newGate("b"), newGate("c")
	h := newHarness(t, map[string]string{"threadMax": "1", "queueSize": "1"}, Job{})
	batch, _ := h.c.Submit(context.Background(), a, b, c)
	waitChan(t, a.started, "a")
	if w := h.c.WaitingTasks(); len(w) != 1 || w[0].ID != "b" {
		t.Fatalf("waiting %+v", w)
	}
	if i := h.c.Info(); i.Waiting != 1 || i.Active != 1 || i.Counts.Rejected != 1 {
		t.Fatalf("info %+v", i)
	}
	a.open()
	b.open()
	r, _ := batch.Wait(context.Background())
	if r.Results[2].Status != StatusRejected || !errors.Is(r.Results[2].Err, ErrRejected) {
		t.Fatalf("c %+v", r.Results[2])
	}
	if got := h.c.Counts(); got.Success != 2 || got.Rejected != 1 || got.Total() != 3 {
		t.Fatalf("counts %+v", got)
	}
}

func TestResizeWhileRunning(t *testing.T) {
	t.Parallel()
	gates := []*gate{newGate("1"), newGate("2"), newGate("3")}
	h := newHarness(t, map[string]string{"threadMax": "1"}, Job{})
	batch, _ := h.c.Submit(context.Background(), gates[0], gates[1], gates[2])
	waitChan(t, gates[0].started, "1")
	h.apply("threadMax", "3")
	waitChan(t, gates[1].started, "2")
	waitChan(t, gates[2].started, "3")
	for _, g := range gates {
		g.open()
	}
	if _, err := batch.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestIdleWorkersAboveCoreExit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]string{"threadMax": "3", "threadCore": "1", "threadAliveTime": "10s"}, Job{})
	gates := []*gate{newGate("1"), newGate("2"), newGate("3")}
	b, _ := h.c.Submit(context.Background(), gates[0], gates[1], gates[2])
	for _, g := range gates {
		waitChan(t, g.started, g.id)
		g.open()
	}
	b.Wait(context.Background())
	p := &h.c.currentGen().pool
	workers := func() int { p.mu.Lock(); defer p.mu.Unlock(); return p.workers }
	h.waitFor("all idle", func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.idle) == 3 })
	h.clk.Advance(10 * time.Second)
	h.waitFor("two exited", func() bool { return workers() == 1 })
}

func TestConflicts(t *testing.T) {
	t.Parallel()
	shared := NewConflicts()
	g := newGate("sync-users")
	a := newHarness(t, nil, Job{}, func(o *Options) { o.Conflicts = shared })
	b := newHarness(t, map[string]string{"enableTaskConflict": "true"}, Job{}, func(o *Options) { o.Conflicts = shared })
	other := newHarness(t, map[string]string{"enableTaskConflict": "true"}, Job{}) // another app
	ba, _ := a.c.Submit(context.Background(), g)
	waitChan(t, g.started, "start")

	r := roundOf(t, b.c, ok("sync-users"), ok("sync-orders"))
	if r.Results[0].Status != StatusConflict || !errors.Is(r.Results[0].Err, ErrConflict) || r.Results[1].Status != StatusSuccess {
		t.Fatalf("round %+v", r.Results)
	}
	if r := roundOf(t, other.c, ok("sync-users")); r.Results[0].Status != StatusSuccess {
		t.Fatalf("a different app must not conflict: %+v", r.Results)
	}
	// Within one batch, a duplicate id conflicts with the first.
	g2 := newGate("dup")
	bb, _ := b.c.Submit(context.Background(), g2, ok("dup"))
	waitChan(t, g2.started, "dup")
	g2.open()
	rb, _ := bb.Wait(context.Background())
	if rb.Results[1].Status != StatusConflict {
		t.Fatalf("duplicate %+v", rb.Results)
	}
	g.open()
	ba.Wait(context.Background())
	if r := roundOf(t, b.c, ok("sync-users")); r.Results[0].Status != StatusSuccess {
		t.Fatalf("after return %+v", r.Results)
	}
}

// Once a batch has ended, its tasks' ids no longer count as running: the
// next run of the same id right after Wait is no conflict, even while the
// task's AfterExec still runs.
func TestABatchsIDsAreFreeOnceItEnded(t *testing.T) {
	t.Parallel()
	shared := NewConflicts()
	h := newHarness(t, map[string]string{"enableTaskConflict": "true"}, Job{}, func(o *Options) { o.Conflicts = shared })
	task := &slowAfter{release: make(chan struct{})}
	b, err := h.c.Submit(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.Wait(context.Background())
	if err != nil || r.Results[0].Status != StatusSuccess {
		t.Fatalf("batch: %+v, %v", r.Results, err)
	}
	running := shared.Running("sync-users")
	close(task.release)
	if running {
		t.Fatal("the batch ended with its task's id still running")
	}
}

// slowAfter is a task whose AfterExec waits for release.
type slowAfter struct{ release chan struct{} }

func (*slowAfter) ID() string                          { return "sync-users" }
func (*slowAfter) Exec(context.Context) (any, error)   { return nil, nil }
func (s *slowAfter) AfterExec(context.Context, Result) { <-s.release }

type hooked struct {
	id      string
	before  error
	ran     atomic.Bool
	after   atomic.Value
	panicky bool
}

func (h *hooked) ID() string                            { return h.id }
func (h *hooked) BeforeExec(context.Context) error      { return h.before }
func (h *hooked) AfterExec(_ context.Context, r Result) { h.after.Store(r) }
func (h *hooked) Exec(context.Context) (any, error) {
	h.ran.Store(true)
	if h.panicky {
		panic("boom")
	}
	return 42, nil
}

// afterExec waits for the result AfterExec was given. A task's AfterExec
// runs after its outcome is recorded, on the goroutine that ran it: the
// round may complete before the hook of a task a worker ran.
func (h *hooked) afterExec(t *testing.T) Result {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if r, ok := h.after.Load().(Result); ok {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("AfterExec of %s was not called", h.id)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func TestHooksAndPanics(t *testing.T) {
	t.Parallel()
	var results []Result
	var mu sync.Mutex
	h := newHarness(t, map[string]string{"threadMax": "2"}, Job{
		OnResult: func(r Result) {
			mu.Lock()
			results = append(results, r)
			mu.Unlock()
			panic("handler panics are recovered")
		},
		OnComplete: func(context.Context, Round) { panic("so are these") },
	})
	refused := &hooked{id: "refused", before: errors.New("not today")}
	boom := &hooked{id: "boom", panicky: true}
	good := &hooked{id: "good"}
	r := roundOf(t, h.c, refused, boom, good)
	if refused.ran.Load() || r.Results[0].Status != StatusFailed || !strings.Contains(r.Results[0].Err.Error(), "BeforeExec: not today") {
		t.Fatalf("refused %+v", r.Results[0])
	}
	var pe *PanicError
	if !errors.As(r.Results[1].Err, &pe) || pe.Value != "boom" || !strings.Contains(string(pe.Stack), "(*hooked).Exec") {
		t.Fatalf("boom %+v", r.Results[1])
	}
	if r.Results[2].Value != 42 || good.afterExec(t).Status != StatusSuccess {
		t.Fatalf("good %+v", r.Results[2])
	}
	if boom.afterExec(t).Status != StatusFailed {
		t.Fatal("AfterExec must see the recorded result")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(results) != 3 {
		t.Fatalf("OnResult called %d times", len(results))
	}
}

func TestTasksErrorAndPanicAreRecorded(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	var last atomic.Value
	h := newHarness(t, map[string]string{"fixedRate": "1s", "execOnLoad": "true"}, Job{
		Tasks: func(context.Context) ([]Task, error) {
			if calls.Add(1) == 1 {
				return nil, errors.New("db down")
			}
			panic("worse")
		},
		OnComplete: func(_ context.Context, r Round) { last.Store(r) },
	})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	h.waitSleeping(1)
	r := last.Load().(Round)
	if len(r.Results) != 1 || r.Results[0].TaskID != "job.Tasks" || !strings.Contains(r.Results[0].Err.Error(), "db down") {
		t.Fatalf("round %+v", r)
	}
	h.clk.Advance(time.Second)
	h.waitSleeping(2)
	var pe *PanicError
	if r := last.Load().(Round); !errors.As(r.Results[0].Err, &pe) {
		t.Fatalf("round %+v", r)
	}
}

func TestZeroTaskRoundCompletes(t *testing.T) {
	t.Parallel()
	var got atomic.Value
	h := newHarness(t, map[string]string{"execOnLoad": "true", "fixedRate": "1h"}, Job{
		Tasks:      func(context.Context) ([]Task, error) { return nil, nil },
		OnComplete: func(_ context.Context, r Round) { got.Store(r) },
	})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	h.waitSleeping(1)
	if r := got.Load().(Round); r.Number != 1 || len(r.Results) != 0 {
		t.Fatalf("round %+v", r)
	}
}

func TestTaskContextCarriesSchedule(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, Job{})
	r := roundOf(t, h.c, TaskFunc("who", func(ctx context.Context) (any, error) {
		Logger(ctx).Info("hello")
		return FromContext(ctx).Name(), nil
	}))
	if r.Results[0].Value != "job" {
		t.Fatalf("%+v", r.Results[0])
	}
}

func TestSubmitAfter(t *testing.T) {
	t.Parallel()
	var ran atomic.Int32
	h := newHarness(t, nil, Job{})
	task := TaskFunc("later", func(context.Context) (any, error) { ran.Add(1); return nil, nil })
	d, err := h.c.SubmitAfter(30*time.Second, task)
	if err != nil {
		t.Fatal(err)
	}
	if !d.At().Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("due at %v, want %v", d.At(), t0.Add(30*time.Second))
	}
	canceled, _ := h.c.SubmitAfter(30*time.Second, task)
	if !canceled.Cancel() || canceled.Cancel() {
		t.Fatal("Cancel must be true once, before the batch runs")
	}
	h.clk.Advance(29 * time.Second)
	if ran.Load() != 0 {
		t.Fatal("fired early")
	}
	h.clk.Advance(time.Second)
	r, err := d.Wait(context.Background())
	if err != nil || len(r.Results) != 1 || ran.Load() != 1 {
		t.Fatalf("round %+v err %v ran %d", r, err, ran.Load())
	}
	if d.Cancel() {
		t.Fatal("Cancel after the run must be false")
	}
	if _, err := canceled.Wait(context.Background()); !errors.Is(err, ErrDelayedCanceled) {
		t.Fatalf("wait canceled: %v", err)
	}
}

func TestDelayedBatchCanceledByStop(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]string{"fixedRate": "1h"}, Job{})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	d, err := h.c.SubmitAt(t0.Add(time.Hour), ok("later"))
	if err != nil {
		t.Fatal(err)
	}
	if !d.At().Equal(t0.Add(time.Hour)) {
		t.Fatalf("due at %v", d.At())
	}
	if err := h.c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	h.waitState(Stopped)
	if _, err := d.Wait(context.Background()); !errors.Is(err, ErrDelayedCanceled) {
		t.Fatalf("got %v", err)
	}
	if _, err := h.c.SubmitAfter(time.Second, ok("x")); !errors.Is(err, ErrAlreadyStopped) {
		t.Fatalf("submit after stop: %v", err)
	}
}

// TestManyDelayedBatches: delayed batches canceled at either end or in the
// middle of the pending list never run, the others run once each when due
// (a waiter blocked before the fire gets its round), and a stop cancels
// every one still pending.
func TestManyDelayedBatches(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]string{"fixedRate": "1h"}, Job{})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	const n = 30
	var ran [n]atomic.Int32
	ds := make([]*Delayed, n)
	for i := range ds {
		d, err := h.c.SubmitAfter(time.Duration(i+1)*time.Second, TaskFunc("t", func(context.Context) (any, error) { ran[i].Add(1); return nil, nil }))
		if err != nil {
			t.Fatal(err)
		}
		ds[i] = d
	}
	canceled := map[int]bool{0: true, n - 1: true, 10: true, 11: true, 20: true}
	for i := range canceled {
		if !ds[i].Cancel() {
			t.Fatalf("batch %d could not be canceled", i)
		}
	}
	waited := make(chan Round, 1)
	go func() { r, _ := ds[5].Wait(context.Background()); waited <- r }()
	h.clk.Advance(15 * time.Second)
	if _, err := ds[14].Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := <-waited; len(r.Results) != 1 {
		t.Fatalf("the waiter got %+v", r)
	}
	for i := range n {
		want := int32(0)
		if i < 15 && !canceled[i] {
			want = 1
		}
		if i < 15 {
			if _, err := ds[i].Wait(context.Background()); (err != nil) != canceled[i] {
				t.Fatalf("batch %d: %v", i, err)
			}
		}
		if got := ran[i].Load(); got != want {
			t.Fatalf("batch %d ran %d times, want %d", i, got, want)
		}
	}
	if err := h.c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	h.waitState(Stopped)
	for i := 15; i < n; i++ {
		if _, err := ds[i].Wait(context.Background()); !errors.Is(err, ErrDelayedCanceled) {
			t.Fatalf("batch %d after stop: %v", i, err)
		}
		if ran[i].Load() != 0 {
			t.Fatalf("batch %d ran after being canceled by the stop", i)
		}
	}
}

// TestDelayedCancelRacesFire: delayed batches of one and of three tasks
// come due on the real clock while other goroutines cancel them and wait
// on them. Each either was canceled (Cancel true once, it never ran, every
// waiter gets ErrDelayedCanceled) or ran exactly once (Cancel false, every
// waiter gets its round with all of its tasks).
func TestDelayedCancelRacesFire(t *testing.T) {
	t.Parallel()
	w, err := wheel.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop() }) // after the schedule's Close, registered below
	h := newHarness(t, map[string]string{"queueSize": "10000", "threadMax": "4"}, Job{}, func(o *Options) {
		o.Clock, o.Wheel = clockwork.NewRealClock(), w
	})
	const n = 2000
	var ran [n]atomic.Int32
	ds := make([]*Delayed, n)
	for i := range n {
		tasks := []Task{TaskFunc("t", func(context.Context) (any, error) { ran[i].Add(1); return nil, nil })}
		if i%3 == 0 {
			tasks = append(tasks, ok("b"), ok("c"))
		}
		d, err := h.c.SubmitAfter(time.Duration(i%5)*time.Millisecond, tasks...)
		if err != nil {
			t.Fatal(err)
		}
		ds[i] = d
	}
	type waited struct {
		r   Round
		err error
	}
	canceled := make([]bool, n)
	early := make([]waited, n)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < n; i += 4 {
				canceled[i] = ds[i].Cancel()
			}
		})
	}
	for g := range 2 {
		wg.Go(func() {
			for i := g; i < n; i += 2 {
				r, err := ds[i].Wait(context.Background())
				early[i] = waited{r, err}
			}
		})
	}
	wg.Wait()
	nCanceled := 0
	for i, d := range ds {
		r, err := d.Wait(context.Background())
		want := 1
		if i%3 == 0 {
			want = 3
		}
		for _, got := range []waited{early[i], {r, err}} {
			switch {
			case canceled[i] && !errors.Is(got.err, ErrDelayedCanceled):
				t.Fatalf("batch %d canceled, a waiter got %v", i, got.err)
			case !canceled[i] && (got.err != nil || len(got.r.Results) != want):
				t.Fatalf("batch %d ran, a waiter got %d results, %v", i, len(got.r.Results), got.err)
			}
		}
		if canceled[i] {
			if ran[i].Load() != 0 {
				t.Fatalf("batch %d canceled and ran", i)
			}
			nCanceled++
		} else if ran[i].Load() != 1 {
			t.Fatalf("batch %d ran %d times", i, ran[i].Load())
		}
		if d.Cancel() {
			t.Fatalf("batch %d canceled twice or after it ran", i)
		}
	}
	t.Logf("%d canceled, %d ran", nCanceled, n-nCanceled)
}

// TestPendingDelayedSize: a pending delayed batch is 80 bytes (the
// allocator's size class), the figure of its doc comment.
func TestPendingDelayedSize(t *testing.T) {
	if n := unsafe.Sizeof(Delayed{}); n > 80 {
		t.Fatalf("a Delayed is %d bytes", n)
	}
}
