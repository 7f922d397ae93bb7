package schedule

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fom-go/fom/config"
	"github.com/fom-go/fom/schedule/wheel"
)

// countingClock is a fake clock that counts its readings.
type countingClock struct {
	*clockwork.FakeClock
	reads atomic.Int64
}

func (c *countingClock) Now() time.Time {
	c.reads.Add(1)
	return c.FakeClock.Now()
}

func (c *countingClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// TestClockReadingsPerFire: a reading costs a tenth of a microsecond on a
// VM, a twentieth of what a whole fire of a re-armed runtime timer does,
// so a fire of a one-task schedule reads the schedule's clock twice: when
// its wake-up decides (the round's start, and its task's) and when the
// task ends (the round's end, and where the plan goes on from). The wheel
// has a clock of its own here, so that only the schedule's readings count.
func TestClockReadingsPerFire(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 64} {
		t.Run(fmt.Sprint(n, " schedules"), func(t *testing.T) {
			t.Parallel()
			fake := clockwork.NewFakeClockAt(t0)
			clk := &countingClock{FakeClock: fake}
			ran := make(chan struct{}, n)
			w, cs := onRunners(t, fake, clk, n, ran)
			const laps = 10
			var reads int64
			for range laps {
				for w.Pending() < n { // every schedule asleep, armed again
					runtime.Gosched()
				}
				// A round arms its next fire under its schedule's lock and
				// lets go of it just after: taking each lock once here means
				// every wake-up below finds its lock free, as on a real clock
				// a second later. (One that waits for it reads its start
				// again, by design: TestAWakeUpThatWaitsForTheLockReadsTheStartAfter.)
				for _, c := range cs {
					c.mu.Lock()
					//lint:ignore SA2001 taking the lock is the point: it waits for the round that holds it
					c.mu.Unlock()
				}
				before := clk.reads.Load()
				fake.Advance(time.Second)
				for range n {
					<-ran
				}
				for w.Pending() < n {
					runtime.Gosched()
				}
				reads += clk.reads.Load() - before
			}
			// A lent round (one schedule) reads at its start, as the wheel's
			// reading is as old as the rounds lent before it in the pass; a
			// round on a runner starts from its wake-up's reading.
			if per := float64(reads) / float64(laps*n); per > 2 {
				t.Errorf("%.2f clock readings a fire, want 2 at most", per)
			}
		})
	}
}

// signalingClock is a fake clock that tells, once armed, of its next
// reading.
type signalingClock struct {
	*clockwork.FakeClock
	armed atomic.Bool
	read  chan struct{}
}

func (c *signalingClock) Now() time.Time {
	now := c.FakeClock.Now()
	if c.armed.CompareAndSwap(true, false) {
		c.read <- struct{}{}
	}
	return now
}

func (c *signalingClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// TestAWakeUpThatWaitsForTheLockReadsTheStartAfter: a round on a runner
// starts at its wake-up's reading only if the wake-up took the schedule's
// lock at once; one that waited (an edit, a page view) reads its start
// after the wait, which counts as lateness.
func TestAWakeUpThatWaitsForTheLockReadsTheStartAfter(t *testing.T) {
	t.Parallel()
	fake := clockwork.NewFakeClockAt(t0)
	clk := &signalingClock{FakeClock: fake, read: make(chan struct{})}
	ran := make(chan struct{}, 1)
	w, cs := onRunners(t, fake, clk, 1, ran)
	c := cs[0]
	for w.Pending() < 1 {
		runtime.Gosched()
	}
	const wait = 10 * time.Millisecond
	c.mu.Lock() // the wheel hands the wake-up to a runner, which waits
	clk.armed.Store(true)
	fake.Advance(time.Second)
	<-clk.read // the wake-up's reading, before the lock
	fake.Advance(wait)
	c.mu.Unlock()
	<-ran
	c.mu.Lock()
	start := c.last
	c.mu.Unlock()
	if want := t0.Add(time.Second + wait); !start.Equal(want) {
		t.Errorf("the round started at %v, want %v (after the wait for the lock)", start.Sub(t0), want.Sub(t0))
	}
}

// onRunners starts n schedules of one task every second, on a wheel of
// the fake clock and four runners, reading clk; each fire sends on ran.
func onRunners(t *testing.T, fake *clockwork.FakeClock, clk clockwork.Clock, n int, ran chan<- struct{}) (*wheel.Wheel, []*Context) {
	t.Helper()
	w, runners := wheelAndRunners(t, 4, wheel.WithClock(fake))
	cs := make([]*Context, n)
	for i := range cs {
		name := fmt.Sprint("s", i)
		cfg, err := config.New(name, config.Spec{Tags: map[string]string{"fixedRate": "1s"}})
		if err != nil {
			t.Fatal(err)
		}
		task := TaskFunc(name+".run", func(context.Context) (any, error) { ran <- struct{}{}; return nil, nil })
		c, err := New(cfg, Job{Fixed: []Task{task}}, Options{Clock: clk, Wheel: w, Runners: runners})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Startup(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		cs[i] = c
	}
	return w, cs
}
