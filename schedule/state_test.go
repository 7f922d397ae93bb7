package schedule

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestStateTable(t *testing.T) {
	t.Parallel()
	g := newGate("slow")
	var terminated atomic.Int32
	h := newHarness(t, map[string]string{"fixedRate": "10s"}, Job{
		Tasks:       tasksOf(g),
		OnTerminate: func(Summary) { terminated.Add(1) },
	})
	c := h.c
	want := func(err, sentinel error) {
		t.Helper()
		if !errors.Is(err, sentinel) {
			t.Fatalf("got %v, want %v", err, sentinel)
		}
	}
	// INITED
	if c.State() != Inited {
		t.Fatalf("new context is %s", c.State())
	}
	want(c.Shutdown(), ErrNotStarted)
	want(c.ExecNow(), ErrNotStarted)
	if err := c.Shutdown(); err.Error() != "schedule job is not started" {
		t.Fatalf("message %q does not name the schedule", err)
	}
	_, err := c.Submit(context.Background())
	want(err, ErrNoTasks)

	// INITED -> SLEEPING
	if err := c.Startup(); err != nil {
		t.Fatal(err)
	}
	if c.State() != Sleeping {
		t.Fatalf("after Startup: %s", c.State())
	}
	want(c.Startup(), ErrAlreadyStarted)
	if got := c.Info().Next; !got.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("next %v", got)
	}

	// SLEEPING -> RUNNING
	h.clk.Advance(10 * time.Second)
	waitChan(t, g.started, "task start")
	if c.State() != Running {
		t.Fatalf("during round: %s", c.State())
	}
	want(c.Startup(), ErrAlreadyStarted)
	want(c.ExecNow(), ErrAlreadyRunning)

	// RUNNING -> STOPPING -> STOPPED
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	h.waitState(Stopped) // the gate returns on cancellation
	if !g.canceled.Load() {
		t.Fatal("task OnCancel not called")
	}
	if terminated.Load() != 1 {
		t.Fatalf("OnTerminate called %d times", terminated.Load())
	}
	want(c.Shutdown(), ErrAlreadyStopped)
	want(c.ExecNow(), ErrNotStarted)
	_, err = c.Submit(context.Background(), ok("x"))
	want(err, ErrAlreadyStopped)
	if got := c.Counts().Canceled; got != 1 {
		t.Fatalf("canceled count %d", got)
	}

	// STOPPED -> SLEEPING: a fresh pool that works.
	if err := c.Startup(); err != nil {
		t.Fatal(err)
	}
	b, err := c.Submit(context.Background(), ok("after-restart"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.Wait(context.Background())
	if err != nil || r.Results[0].Status != StatusSuccess {
		t.Fatalf("batch after restart: %+v %v", r, err)
	}
}

func TestStoppingRefusals(t *testing.T) {
	t.Parallel()
	g := newGate("stubborn")
	g.stubborn = true
	h := newHarness(t, map[string]string{"execOnLoad": "true"}, Job{Tasks: tasksOf(g)})
	c := h.c
	if err := c.Startup(); err != nil {
		t.Fatal(err)
	}
	waitChan(t, g.started, "task start")
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	// The stubborn task keeps the context in STOPPING.
	for _, err := range []error{c.Startup(), c.Shutdown(), c.ExecNow()} {
		if !errors.Is(err, ErrStopping) {
			t.Fatalf("in STOPPING got %v", err)
		}
	}
	if _, err := c.Submit(context.Background(), ok("x")); !errors.Is(err, ErrStopping) {
		t.Fatalf("submit in STOPPING: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := c.Wait(ctx)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait: %v", err)
	}
	if want := "schedule job did not stop, tasks still running: [stubborn"; len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
		t.Fatalf("wait error %q does not name the task", err)
	}
	a := c.ActiveTasks()
	if len(a) != 1 || !a[0].Abandoned || a[0].ID != "stubborn" {
		t.Fatalf("active %+v", a)
	}
	g.open()
	h.waitState(Stopped)
}

func TestExecNowWakesSleeping(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	h := newHarness(t, map[string]string{"cron": "0 0 * * * *"}, Job{Tasks: func(context.Context) ([]Task, error) {
		runs.Add(1)
		return []Task{ok("t")}, nil
	}})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	if err := h.c.ExecNow(); err != nil {
		t.Fatal(err)
	}
	h.waitSleeping(1)
	if runs.Load() != 1 {
		t.Fatalf("runs %d", runs.Load())
	}
	// The planned fire is unchanged by the exec-now round: next full hour.
	if got := h.c.Info().Next; !got.Equal(t0.Add(time.Hour)) {
		t.Fatalf("next %v", got)
	}
}

func TestExecNowStorm(t *testing.T) {
	t.Parallel()
	for _, ignore := range []bool{false, true} {
		t.Run(map[bool]string{false: "queue", true: "ignore"}[ignore], func(t *testing.T) {
			t.Parallel()
			var concurrent, maxConcurrent, rounds atomic.Int32
			gates := make(chan *gate, 10)
			h := newHarness(t, map[string]string{"cron": "@hourly", "ignoreExecRequestWhenRunning": map[bool]string{false: "false", true: "true"}[ignore]},
				Job{Tasks: func(context.Context) ([]Task, error) {
					n := concurrent.Add(1)
					if n > maxConcurrent.Load() {
						maxConcurrent.Store(n)
					}
					rounds.Add(1)
					g := newGate("t")
					gates <- g
					return []Task{g}, nil
				}, OnComplete: func(context.Context, Round) { concurrent.Add(-1) }})
			if err := h.c.Startup(); err != nil {
				t.Fatal(err)
			}
			if err := h.c.ExecNow(); err != nil {
				t.Fatal(err)
			}
			first := <-gates
			waitChan(t, first.started, "first round")
			var accepted, already, refused atomic.Int32
			var wg sync.WaitGroup
			for range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					switch err := h.c.ExecNow(); {
					case err == nil:
						accepted.Add(1)
					case errors.Is(err, ErrExecAlreadyRequested):
						already.Add(1)
					case errors.Is(err, ErrAlreadyRunning):
						refused.Add(1)
					default:
						t.Errorf("unexpected %v", err)
					}
				}()
			}
			wg.Wait()
			first.open()
			if ignore {
				if refused.Load() != 64 {
					t.Fatalf("refused %d of 64", refused.Load())
				}
				h.waitSleeping(1)
				return
			}
			if accepted.Load() != 1 || already.Load() != 63 {
				t.Fatalf("accepted %d, already requested %d", accepted.Load(), already.Load())
			}
			second := <-gates
			second.open()
			h.waitSleeping(2)
			if rounds.Load() != 2 || maxConcurrent.Load() != 1 {
				t.Fatalf("rounds %d, max concurrent rounds %d", rounds.Load(), maxConcurrent.Load())
			}
		})
	}
}

func TestManagedPool(t *testing.T) {
	t.Parallel()
	var completes atomic.Int32
	h := newHarness(t, nil, Job{Tasks: tasksOf(ok("round")), OnComplete: func(context.Context, Round) { completes.Add(1) }})
	b, err := h.c.Submit(context.Background(), ok("a"), ok("b"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !r.Batch || r.Number != 1 || len(r.Results) != 2 || r.Results[1].Value != "b" {
		t.Fatalf("round %+v", r)
	}
	if err := h.c.Startup(); err != nil { // no plan, no execOnLoad: stays INITED
		t.Fatal(err)
	}
	if h.c.State() != Inited || h.c.Info().Rounds != 0 {
		t.Fatalf("managed pool after Startup: %+v", h.c.Info())
	}
	h.apply("execOnLoad", "true")
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	h.waitFor("round then INITED", func() bool { i := h.c.Info(); return i.State == Inited && i.Rounds == 1 })
	if completes.Load() != 2 {
		t.Fatalf("OnComplete called %d times", completes.Load())
	}
}

func TestDeadTimeStopsSleeping(t *testing.T) {
	t.Parallel()
	var sum atomic.Value
	h := newHarness(t, map[string]string{"fixedRate": "1h", "deadTime": t0.Add(90 * time.Minute).Format(time.RFC3339)},
		Job{Tasks: tasksOf(ok("t")), OnTerminate: func(s Summary) { sum.Store(s) }})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	h.waitSleeping(0)
	h.clk.Advance(time.Hour)
	h.waitSleeping(1)
	h.clk.Advance(30 * time.Minute) // dead time wakes the sleeper before the next fire
	h.waitState(Stopped)
	s := sum.Load().(Summary)
	if s.Rounds != 1 || !s.Last.Equal(t0.Add(time.Hour)) {
		t.Fatalf("summary %+v", s)
	}
	if r := h.c.Info().StopReason; r != "deadTime 2026-01-05T01:30:00Z passed" {
		t.Fatalf("stop reason %q", r)
	}
	// Started again after it: refused, and STOPPED stays.
	if err := h.c.Startup(); !errors.Is(err, ErrPastDeadTime) || h.c.State() != Stopped {
		t.Fatalf("startup after the dead time: %v, %s", err, h.c.State())
	}
}

func TestShutdownDuringRound(t *testing.T) {
	t.Parallel()
	running := newGate("running")
	queued := newGate("queued")
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	var round atomic.Value
	h := newHarness(t, map[string]string{"execOnLoad": "true", "threadMax": "1"}, Job{
		Tasks:       tasksOf(running, queued),
		OnCancel:    func(id string, _ time.Duration) { note("job.OnCancel " + id) },
		OnComplete:  func(_ context.Context, r Round) { note("OnComplete"); round.Store(r) },
		OnTerminate: func(Summary) { note("OnTerminate") },
	})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	waitChan(t, running.started, "running task")
	h.waitFor("one waiting", func() bool { return len(h.c.WaitingTasks()) == 1 })
	if err := h.c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	h.waitState(Stopped)
	r := round.Load().(Round)
	for i, want := range []Status{StatusCanceled, StatusCanceled} {
		if r.Results[i].Status != want || !errors.Is(r.Results[i].Err, ErrCanceled) {
			t.Fatalf("result %d: %+v", i, r.Results[i])
		}
	}
	if !r.Results[1].Started.IsZero() {
		t.Fatal("queued task must not start")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 3 || order[0] != "job.OnCancel running" || order[1] != "OnComplete" || order[2] != "OnTerminate" {
		t.Fatalf("order %v", order)
	}
}

func TestManagedPoolRestartAfterClose(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, Job{})
	roundOf(t, h.c, ok("a"))
	if err := h.c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.c.State() != Stopped {
		t.Fatalf("after Close: %s", h.c.State())
	}
	if _, err := h.c.Submit(context.Background(), ok("b")); !errors.Is(err, ErrAlreadyStopped) {
		t.Fatalf("submit when stopped: %v", err)
	}
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	if h.c.State() != Inited {
		t.Fatalf("after restart: %s", h.c.State())
	}
	if r := roundOf(t, h.c, ok("c")); r.Results[0].Status != StatusSuccess {
		t.Fatalf("batch after restart %+v", r)
	}
}

// Every exec-now that returns nil is one round that starts after the call:
// a request folded into a re-run already queued is refused with
// ErrExecAlreadyRequested, never accepted and then merged.
func TestExecNowAcceptedMeansARound(t *testing.T) {
	t.Parallel()
	var rounds atomic.Int32
	h := newHarness(t, map[string]string{"cron": "@hourly", "ignoreExecRequestWhenRunning": "false"},
		Job{Tasks: tasksOf(ok("t")), OnComplete: func(context.Context, Round) { rounds.Add(1) }})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				switch err := h.c.ExecNow(); {
				case err == nil:
					accepted.Add(1)
				case errors.Is(err, ErrExecAlreadyRequested):
				default:
					t.Errorf("unexpected %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	h.waitFor("every accepted round ran", func() bool {
		return h.c.State() == Sleeping && rounds.Load() >= accepted.Load()
	})
	if a, r := accepted.Load(), rounds.Load(); a != r {
		t.Fatalf("%d exec-now calls returned nil, %d rounds ran", a, r)
	}
}
