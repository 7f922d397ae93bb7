package schedule

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// oddGate admits fires on even seconds only, and records what it was asked.
type oddGate struct {
	mu    sync.Mutex
	asked []time.Time
}

func (g *oddGate) Admit(_ context.Context, _ string, planned time.Time) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, planned)
	return planned.Sub(t0)/time.Second%2 == 0, nil
}

func (g *oddGate) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.asked)
}

// TestGateDecidesPlannedRoundsOnly: a refused fire runs nothing and the plan
// goes on from it; exec-now is never asked; RunMissed is.
func TestGateDecidesPlannedRoundsOnly(t *testing.T) {
	t.Parallel()
	gate := &oddGate{}
	var ran atomic.Int32
	var causes sync.Map // round number -> cause
	h := newHarness(t, map[string]string{"fixedRate": "1s"}, Job{Tasks: func(context.Context) ([]Task, error) {
		ran.Add(1)
		return nil, nil
	}, OnComplete: func(_ context.Context, r Round) { causes.Store(r.Number, r.Cause) }}, func(o *Options) { o.Gate = gate })
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	h.waitSleeping(0)
	for i := 1; i <= 4; i++ { // fires at t0+1s .. t0+4s: two admitted
		h.clk.Advance(time.Second)
		want := t0.Add(time.Duration(i+1) * time.Second)
		h.waitFor("next fire armed", func() bool { i := h.c.Info(); return i.State == Sleeping && i.Next.Equal(want) })
	}
	if ran.Load() != 2 || gate.count() != 4 || h.c.Info().Rounds != 2 {
		t.Fatalf("ran %d rounds of %d asked (info %+v), want 2 of 4", ran.Load(), gate.count(), h.c.Info())
	}
	if err := h.c.ExecNow(); err != nil {
		t.Fatal(err)
	}
	h.waitFor("exec-now ran", func() bool { return ran.Load() == 3 && h.c.State() == Sleeping })
	if gate.count() != 4 {
		t.Fatal("exec-now was gated")
	}
	// Another process recorded t0+1s last: t0+2s was missed and runs once,
	// gated; the plan then goes on at the rate.
	if !h.c.Resume(t0.Add(time.Second), true) {
		t.Fatal("Resume refused while sleeping")
	}
	h.waitFor("missed fire ran", func() bool { return ran.Load() == 4 && h.c.State() == Sleeping })
	if gate.count() != 5 {
		t.Fatal("the missed fire was not gated")
	}
	if c, _ := causes.Load(int64(4)); c != CauseCatchUp {
		t.Fatalf("the missed fire's round is labelled %v, want catchup", c)
	}
	// With misfires skipped, t0+2s and t0+3s are passed over; t0+4s is
	// due now (not missed) and runs, then the rate goes on.
	if !h.c.Resume(t0.Add(time.Second), false) {
		t.Fatal("Resume refused while sleeping")
	}
	h.waitFor("due fire ran", func() bool {
		i := h.c.Info()
		return ran.Load() == 5 && i.State == Sleeping && i.Next.Equal(t0.Add(5*time.Second))
	})
	if gate.count() != 6 {
		t.Fatalf("asked %d times, want 6: the skipped fires are not asked", gate.count())
	}
	if c, _ := causes.Load(int64(5)); c != CausePlan {
		t.Fatalf("a fire due now after skipped misfires is labelled %v, want plan", c)
	}
}

func TestOutcomeOfARound(t *testing.T) {
	t.Parallel()
	res := func(ss ...Status) Round {
		var r Round
		for _, s := range ss {
			r.Results = append(r.Results, Result{Status: s})
		}
		return r
	}
	for want, r := range map[Outcome]Round{
		OutcomeSuccess: res(StatusSuccess, StatusSuccess),
		OutcomePartial: res(StatusSuccess, StatusFailed),
		OutcomeFailed:  res(StatusFailed, StatusRejected),
		OutcomeTimeout: res(StatusTimeout, StatusFailed),
	} {
		if got := OutcomeOf(r); got != want {
			t.Errorf("%v: %s, want %s", r.Results, got, want)
		}
	}
	if OutcomeOf(Round{}) != OutcomeSuccess {
		t.Error("a round without tasks did not fail")
	}
}

// TestInfoTellsTheLastRound: outcome, last success and lateness.
func TestInfoTellsTheLastRound(t *testing.T) {
	t.Parallel()
	fail := false
	h := newHarness(t, map[string]string{"fixedRate": "10s"}, Job{Tasks: func(context.Context) ([]Task, error) {
		if fail {
			return []Task{TaskFunc("t", func(context.Context) (any, error) { return nil, context.Canceled })}, nil
		}
		return []Task{ok("t")}, nil
	}})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	h.waitSleeping(0)
	h.clk.Advance(10*time.Second + 250*time.Millisecond)
	h.waitSleeping(1)
	i := h.c.Info()
	if i.LastOutcome != OutcomeSuccess || !i.LastSuccess.Equal(t0.Add(10*time.Second+250*time.Millisecond)) || i.LastLate != 250*time.Millisecond {
		t.Fatalf("after a good round: %s %v %v", i.LastOutcome, i.LastSuccess, i.LastLate)
	}
	fail = true
	h.clk.Advance(9*time.Second + 750*time.Millisecond)
	h.waitSleeping(2)
	if j := h.c.Info(); j.LastOutcome != OutcomeFailed || !j.LastSuccess.Equal(i.LastSuccess) {
		t.Fatalf("after a failed round: %s %v", j.LastOutcome, j.LastSuccess)
	}
}

// stackGate admits every fire and keeps the stack it was asked from.
type stackGate struct{ stacks chan string }

func (g stackGate) Admit(context.Context, string, time.Time) (bool, error) {
	buf := make([]byte, 64<<10)
	select {
	case g.stacks <- string(buf[:runtime.Stack(buf, false)]):
	default:
	}
	return true, nil
}

// TestGatedRoundIsNotLentTheWheel: a gated round asks its gate (a store,
// over the network) first, so it runs on a runner, never on the wheel's
// own goroutine.
func TestGatedRoundIsNotLentTheWheel(t *testing.T) {
	t.Parallel()
	gate := stackGate{stacks: make(chan string, 1)}
	h := newHarness(t, map[string]string{"fixedRate": "1s"}, Job{}, func(o *Options) { o.Gate = gate })
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	h.waitSleeping(0)
	h.clk.Advance(time.Second)
	select {
	case stack := <-gate.stacks:
		if strings.Contains(stack, "wheel.(*Wheel).lend") {
			t.Errorf("a gated round ran on the wheel's goroutine:\n%s", stack)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the gate was never asked")
	}
}
