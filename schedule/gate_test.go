package schedule

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
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

// holdGate holds a schedule or not, admits every fire it holds unless
// told to refuse, and records what it was asked and announced.
type holdGate struct {
	mu        sync.Mutex
	holds     bool
	refuse    bool // refuse even what it holds (its leases not trusted)
	asked     []time.Time
	announced []time.Time
}

func (g *holdGate) Admit(_ context.Context, _ string, planned time.Time) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, planned)
	return g.holds && !g.refuse, nil
}

func (g *holdGate) Holds(string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.holds
}

func (g *holdGate) Announce(_ string, planned time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.announced = append(g.announced, planned)
}

func (g *holdGate) set(holds, refuse bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.holds, g.refuse = holds, refuse
}

func (g *holdGate) askedFor() []time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]time.Time(nil), g.asked...)
}

func (g *holdGate) told() []time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]time.Time(nil), g.announced...)
}

func (g *holdGate) counts() (asked, announced int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.asked), len(g.announced)
}

// TestHolderParksWhatItDoesNotHold: a schedule the gate does not hold
// starts parked, and one whose fire the gate refused and does not hold
// arms no wait (no fire asked however long it parks); Unpark arms the
// first fire not yet past, Resume the fire after the one recorded
// elsewhere (a missed one runs at once, announced first); a held schedule
// whose fires are refused (an instance cut off from its database) keeps
// asking.
func TestHolderParksWhatItDoesNotHold(t *testing.T) {
	t.Parallel()
	gate := &holdGate{}
	var ran atomic.Int32
	h := newHarness(t, map[string]string{"fixedRate": "1s"}, Job{Tasks: func(context.Context) ([]Task, error) {
		ran.Add(1)
		return nil, nil
	}}, func(o *Options) { o.Gate = gate })
	asked := func(n int) {
		t.Helper()
		h.waitFor(fmt.Sprintf("%d fires asked", n), func() bool { a, _ := gate.counts(); return a == n && h.c.State() == Sleeping })
	}
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	h.waitSleeping(0) // not held: parked from the start
	for range 6 {
		h.clk.Advance(time.Second)
	}
	time.Sleep(50 * time.Millisecond) // a wake-up, were one armed, would have asked by now
	if a, _ := gate.counts(); a != 0 || ran.Load() != 0 {
		t.Fatalf("parked: asked %d times, ran %d rounds; want 0 and 0", a, ran.Load())
	}
	// Held again with no fire recorded, at t0+6s: the first fire not yet
	// past is t0+6s, due now; the missed ones before it do not run.
	gate.set(true, false)
	if !h.c.Unpark() {
		t.Fatal("Unpark: not parked")
	}
	if h.c.Unpark() {
		t.Fatal("Unpark twice")
	}
	h.waitFor("t0+6s ran, t0+7s armed", func() bool {
		i := h.c.Info()
		return ran.Load() == 1 && i.State == Sleeping && i.Next.Equal(t0.Add(7*time.Second))
	})
	// Held but refused (its leases not trusted): not parked.
	gate.set(true, true)
	h.clk.Advance(time.Second)
	asked(2)
	h.clk.Advance(time.Second)
	asked(3)
	// Lost to another instance: parked at the next refused fire; then
	// taken over from the fire recorded at t0+11s, at t0+12s: t0+12s is
	// missed and runs at once, announced first.
	gate.set(false, false)
	h.clk.Advance(time.Second) // t0+9s
	asked(4)
	h.clk.Advance(3 * time.Second)
	gate.set(true, false)
	_, before := gate.counts()
	if !h.c.Resume(t0.Add(11*time.Second), true) {
		t.Fatal("Resume refused while parked")
	}
	h.waitFor("the missed fire ran", func() bool { return ran.Load() == 2 && h.c.State() == Sleeping })
	gate.mu.Lock()
	last := gate.asked[len(gate.asked)-1]
	announcedFirst := len(gate.announced) > before && gate.announced[before].Equal(t0.Add(12*time.Second))
	gate.mu.Unlock()
	if !last.Equal(t0.Add(12*time.Second)) || !announcedFirst {
		t.Fatalf("the missed fire: asked for %s, announced first %v", last, announcedFirst)
	}
	h.waitFor("armed for t0+13s", func() bool { return h.c.Info().Next.Equal(t0.Add(13 * time.Second)) })
}

// withdrawGate admits each fire once the test lets it, and records the
// fires withdrawn.
type withdrawGate struct {
	asked     chan time.Time
	release   chan struct{}
	withdrawn chan time.Time
}

func (g *withdrawGate) Admit(_ context.Context, _ string, planned time.Time) (bool, error) {
	g.asked <- planned
	<-g.release
	return true, nil
}

func (g *withdrawGate) Withdraw(_ string, planned time.Time) { g.withdrawn <- planned }

// TestAFireAdmittedAndNotRunIsWithdrawn: a schedule stopped between its
// fire's admission and its round runs nothing, and tells the gate that
// the fire it admitted did not run.
func TestAFireAdmittedAndNotRunIsWithdrawn(t *testing.T) {
	t.Parallel()
	gate := &withdrawGate{asked: make(chan time.Time, 1), release: make(chan struct{}), withdrawn: make(chan time.Time, 1)}
	var ran atomic.Int32
	h := newHarness(t, map[string]string{"fixedRate": "1s"}, Job{Tasks: func(context.Context) ([]Task, error) {
		ran.Add(1)
		return nil, nil
	}}, func(o *Options) { o.Gate = gate })
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	h.waitSleeping(0)
	h.clk.Advance(time.Second)
	planned := <-gate.asked
	if err := h.c.ShutdownHere(); err != nil {
		t.Fatal(err)
	}
	close(gate.release)
	select {
	case w := <-gate.withdrawn:
		if !w.Equal(planned) {
			t.Fatalf("withdrew %v, the fire admitted was %v", w, planned)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the fire admitted and not run was not withdrawn")
	}
	h.waitFor("stopped", func() bool { return h.c.State() == Stopped })
	if ran.Load() != 0 {
		t.Fatalf("%d rounds ran after the stop", ran.Load())
	}
}

// ctxGate admits a fire once its caller's context ends, with that error.
type ctxGate struct{ asked chan time.Time }

func (g ctxGate) Admit(ctx context.Context, _ string, planned time.Time) (bool, error) {
	g.asked <- planned
	<-ctx.Done()
	return false, ctx.Err()
}

// TestAFireNotAdmittedBecauseItsScheduleStoppedIsNoWarning: a schedule
// stopped while its fire waits for admission (every schedule of an
// instance of a cluster at its graceful stop) warns of nothing: the fire
// runs elsewhere.
func TestAFireNotAdmittedBecauseItsScheduleStoppedIsNoWarning(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.InfoLevel)
	gate := ctxGate{asked: make(chan time.Time, 1)}
	h := newHarness(t, map[string]string{"fixedRate": "1s"}, Job{Tasks: func(context.Context) ([]Task, error) {
		return nil, nil
	}}, func(o *Options) { o.Gate, o.Logger = gate, zap.New(core) })
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	h.waitSleeping(0)
	h.clk.Advance(time.Second)
	<-gate.asked
	if err := h.c.ShutdownHere(); err != nil {
		t.Fatal(err)
	}
	h.waitFor("stopped", func() bool { return h.c.State() == Stopped })
	if w := logs.FilterLevelExact(zapcore.WarnLevel).All(); len(w) > 0 {
		t.Fatalf("warned %q at the stop", w[0].Message)
	}
}

// readied reports whether c's copy has made what its first fire needs.
func readied(c *Context) bool {
	c.mu.Lock()
	g := c.gen
	c.mu.Unlock()
	g.pool.mu.Lock()
	defer g.pool.mu.Unlock()
	return g.pool.helper != nil
}

// TestACopyIsReadiedBeforeItsFirstFireOnlyWhereItFires: a copy started
// where its gate holds it, or taken over (Unpark, Resume), has what its
// first fire needs made before that fire (readyLocked: the worker its
// round lends itself as, and its statistics' ring); a parked copy, which
// may never fire here, has none of it; nor has a lone copy (no gate),
// which would hold it from its start.
func TestACopyIsReadiedBeforeItsFirstFireOnlyWhereItFires(t *testing.T) {
	t.Parallel()
	job := Job{Tasks: func(context.Context) ([]Task, error) { return nil, nil }}
	lone := newHarness(t, map[string]string{"fixedRate": "1s"}, job)
	if err := lone.c.Startup(); err != nil {
		t.Fatal(err)
	}
	lone.waitSleeping(0)
	if readied(lone.c) {
		t.Fatal("a lone copy: readied at its start")
	}
	start := func(holds bool) *harness {
		gate := &holdGate{holds: holds}
		h := newHarness(t, map[string]string{"fixedRate": "1s"}, job, func(o *Options) { o.Gate = gate })
		if err := h.c.Startup(); err != nil {
			t.Fatal(err)
		}
		h.waitSleeping(0)
		return h
	}
	if h := start(true); !readied(h.c) {
		t.Fatal("held at its start: not readied before its first fire")
	}
	h := start(false)
	if readied(h.c) {
		t.Fatal("parked at its start: readied")
	}
	if !h.c.Unpark() || !readied(h.c) {
		t.Fatal("unparked: not readied")
	}
	h = start(false)
	if !h.c.Resume(t0, false) || !readied(h.c) {
		t.Fatal("resumed: not readied")
	}
}

// TestAReadiedCopyHasItsTaskEntryAndRunners: a copy readied (held at its
// start, or unparked) has its one fixed task's conflict entry made, idle,
// where its first fire finds it without a lookup, and its runners
// started, idle; a parked copy has neither.
func TestAReadiedCopyHasItsTaskEntryAndRunners(t *testing.T) {
	t.Parallel()
	ran := make(chan struct{}, 1)
	task := TaskFunc("the-task", func(context.Context) (any, error) { ran <- struct{}{}; return nil, nil })
	start := func(holds bool) (*harness, *Runners) {
		rs := NewRunners(time.Hour, 3)
		t.Cleanup(rs.Close)
		gate := &holdGate{holds: holds}
		h := newHarness(t, map[string]string{"fixedRate": "1s"}, Job{Fixed: []Task{task}}, func(o *Options) { o.Gate, o.Runners = gate, rs })
		if err := h.c.Startup(); err != nil {
			t.Fatal(err)
		}
		h.waitSleeping(0)
		return h, rs
	}
	entry := func(h *harness) *heldID {
		h.c.mu.Lock()
		defer h.c.mu.Unlock()
		return h.c.gen.lastHeld.Load()
	}
	h, rs := start(true)
	e := entry(h)
	if e == nil || e.id != "the-task" || h.c.conflicts.Running("the-task") {
		t.Fatalf("held at its start: entry %+v, running %v; want the-task's, idle", e, h.c.conflicts.Running("the-task"))
	}
	waitIdle(t, rs, 3)
	h.clk.Advance(time.Second)
	waitChan(t, ran, "the first fire")
	h.waitSleeping(1)
	if got := entry(h); got != e {
		t.Fatalf("the first fire made another entry: %p, readied %p", got, e)
	}

	h, rs = start(false)
	if e := entry(h); e != nil || rs.Idle() != 0 {
		t.Fatalf("parked at its start: entry %+v, %d idle runners; want none", e, rs.Idle())
	}
	if !h.c.Unpark() {
		t.Fatal("not parked")
	}
	if e := entry(h); e == nil || e.id != "the-task" {
		t.Fatalf("unparked: entry %+v, want the-task's", e)
	}
	waitIdle(t, rs, 3)
}

// TestStartupFromContinuesFromALastFire: a copy started from a fire
// another process recorded arms the plan's fire after it in the same step
// (never the fire counted from now, which could run before a Resume came
// and run again after it): missed fires run as one catch-up round, or are
// skipped; the gate is told of a missed fire due at once, and the copy is
// readied; with a zero last fire it is StartupHere.
func TestStartupFromContinuesFromALastFire(t *testing.T) {
	t.Parallel()
	var ran atomic.Int32
	var cause atomic.Value
	job := Job{Tasks: func(context.Context) ([]Task, error) { ran.Add(1); return nil, nil },
		OnComplete: func(_ context.Context, r Round) { cause.Store(r.Cause) }}
	start := func(last time.Time, runMissed bool) (*harness, *holdGate) {
		gate := &holdGate{holds: true}
		h := newHarness(t, map[string]string{"cron": "* * * * * *"}, job, func(o *Options) { o.Gate = gate })
		if err := h.c.StartupFrom(last, runMissed); err != nil {
			t.Fatal(err)
		}
		return h, gate
	}
	// t0 is a whole second: the fires at t0-2s .. t0 were missed since t0-3s.
	h, gate := start(t0.Add(-3*time.Second), true)
	h.waitSleeping(1)
	if got := gate.askedFor(); len(got) != 1 || !got[0].Equal(t0.Add(-2*time.Second)) {
		t.Fatalf("asked for %v, want the first missed fire %s alone", got, t0.Add(-2*time.Second).Format("15:04:05"))
	}
	if got := gate.told(); len(got) == 0 || !got[0].Equal(t0.Add(-2*time.Second)) {
		t.Fatalf("announced %v, want the missed fire due at once first", got)
	}
	if c := cause.Load(); c != CauseCatchUp {
		t.Fatalf("the missed fire's round is labelled %v, want catchup", c)
	}
	if next := h.c.Info().Next; !next.Equal(t0.Add(time.Second)) {
		t.Fatalf("next fire %s after the catch-up, want %s", next.Format("15:04:05"), t0.Add(time.Second).Format("15:04:05"))
	}
	if !readied(h.c) {
		t.Fatal("started from a last fire: not readied")
	}

	// Misfires skipped: t0 is due now and runs; nothing before it.
	h, gate = start(t0.Add(-3*time.Second), false)
	h.waitSleeping(1)
	if got := gate.askedFor(); len(got) != 1 || !got[0].Equal(t0) {
		t.Fatalf("misfires skipped: asked for %v, want the fire due now, %s", got, t0.Format("15:04:05"))
	}

	// A last fire ahead of the plan counted from now: the fire after it,
	// not the next whole second.
	h, gate = start(t0.Add(4*time.Second), true)
	h.waitSleeping(0)
	if next := h.c.Info().Next; !next.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("next fire %s, want the one after the last fire, %s", next.Format("15:04:05"), t0.Add(5*time.Second).Format("15:04:05"))
	}
	if got := gate.askedFor(); len(got) != 0 {
		t.Fatalf("asked for %v before any fire was due", got)
	}

	// No last fire: the plan's next fire from now.
	h, _ = start(time.Time{}, true)
	h.waitSleeping(0)
	if next := h.c.Info().Next; !next.Equal(t0.Add(time.Second)) {
		t.Fatalf("no last fire: next %s, want %s", next.Format("15:04:05"), t0.Add(time.Second).Format("15:04:05"))
	}
	if ran.Load() != 2 {
		t.Fatalf("%d rounds ran, want 2", ran.Load())
	}
}
