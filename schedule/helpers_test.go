package schedule

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/fom-go/fom/config"
	"github.com/fom-go/fom/schedule/wheel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is a Monday, so cron tables are easy to read.
var t0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

type harness struct {
	t   *testing.T
	clk *clockwork.FakeClock
	cfg *config.Config
	c   *Context
}

func newHarness(t *testing.T, tags map[string]string, job Job, opts ...func(*Options)) *harness {
	t.Helper()
	cfg, err := config.New("job", config.Spec{Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	clk := clockwork.NewFakeClockAt(t0)
	w, err := wheel.New(wheel.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	// The shared wheel and runners are what an App gives its schedules; a
	// test that wants runtime timers or plain goroutines sets them to nil.
	runners := NewRunners(0, 0)
	o := Options{Clock: clk, Wheel: w, Runners: runners}
	for _, f := range opts {
		f(&o)
	}
	if job.Tasks == nil && len(job.Fixed) == 0 {
		job.Tasks = func(context.Context) ([]Task, error) { return nil, nil }
	}
	c, err := New(cfg, job, o)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, clk: clk, cfg: cfg, c: c}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
		runners.Close()
		if o.Runners != nil && o.Runners != runners { // a test's own
			o.Runners.Close()
		}
	})
	return h
}

// waitFor waits, on the context's change signal, until cond holds.
func (h *harness) waitFor(desc string, cond func() bool) {
	h.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		ch := h.c.changes()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-time.After(2 * time.Millisecond): // outcomes of batches do not signal
		case <-deadline:
			h.t.Fatalf("timed out waiting for %s (state %s, info %+v)", desc, h.c.State(), h.c.Info())
		}
	}
}

func (h *harness) waitState(s State) {
	h.t.Helper()
	h.waitFor("state "+s.String(), func() bool { return h.c.State() == s })
}

// waitSleeping waits until round n completed and the next fire is armed.
func (h *harness) waitSleeping(rounds int64) {
	h.t.Helper()
	h.waitFor("sleeping after round", func() bool {
		i := h.c.Info()
		return i.State == Sleeping && i.Rounds == rounds
	})
}

func (h *harness) apply(kv ...string) {
	h.t.Helper()
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	if err := h.cfg.Apply(m); err != nil {
		h.t.Fatal(err)
	}
}

// gate is a task that reports its start and blocks until released or,
// unless stubborn, until its context ends.
type gate struct {
	id       string
	started  chan struct{}
	release  chan struct{}
	stubborn bool
	once     sync.Once
	canceled atomic.Bool
}

func newGate(id string) *gate {
	return &gate{id: id, started: make(chan struct{}), release: make(chan struct{})}
}

func (g *gate) ID() string { return g.id }
func (g *gate) Exec(ctx context.Context) (any, error) {
	close(g.started)
	if g.stubborn {
		<-g.release
		return "late", nil
	}
	select {
	case <-g.release:
		return g.id, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
func (g *gate) OnCancel(time.Duration) { g.canceled.Store(true) }
func (g *gate) open()                  { g.once.Do(func() { close(g.release) }) }

func waitChan(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func tasksOf(ts ...Task) func(context.Context) ([]Task, error) {
	return func(context.Context) ([]Task, error) { return ts, nil }
}

func ok(id string) Task {
	return TaskFunc(id, func(context.Context) (any, error) { return id, nil })
}

// wheelAndRunners makes a wheel with opts and runners of at most limit
// goroutines (NewRunners(0, limit)), both stopped when the test ends:
// after the schedules' Close, which a test registers later.
func wheelAndRunners(t *testing.T, limit int, opts ...wheel.Option) (*wheel.Wheel, *Runners) {
	t.Helper()
	w, err := wheel.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	runners := NewRunners(0, limit)
	t.Cleanup(func() {
		runners.Close()
		w.Stop()
	})
	return w, runners
}
