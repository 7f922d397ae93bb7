// Package clockx has the clock helpers fom's engine and timing wheel share.
package clockx

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// TimerAt returns a timer that fires at t (see Until), or at once if t is past.
//
// With a fake clock, the timer is armed at exactly t even if another
// goroutine advances the clock while it is being armed: the deadline is
// absolute, and a timer armed across an Advance is armed again.
func TimerAt(clk clockwork.Clock, t time.Time) clockwork.Timer {
	if _, fake := clk.(*clockwork.FakeClock); !fake {
		return clk.NewTimer(Until(clk, t))
	}
	for {
		now := clk.Now()
		tm := clk.NewTimer(t.Sub(now))
		if clk.Now().Equal(now) {
			return tm
		}
		tm.Stop()
	}
}

// AfterFuncAt calls f in its own goroutine at t (see Until), or at once if
// t is past. Like TimerAt it is exact on a fake clock advanced concurrently.
func AfterFuncAt(clk clockwork.Clock, t time.Time, f func()) clockwork.Timer {
	if _, fake := clk.(*clockwork.FakeClock); !fake {
		return clk.AfterFunc(Until(clk, t), f)
	}
	for {
		now := clk.Now()
		tm := clk.AfterFunc(t.Sub(now), f)
		if clk.Now().Equal(now) || !tm.Stop() {
			return tm // armed at t, or already fired (once)
		}
	}
}

// Until is the time until t. Like time.Until it uses the monotonic clock
// when t carries a monotonic reading (a deadline or a fixedRate fire
// derived from a clock reading), so a wall-clock step does not stretch or
// shorten it, and the wall clock otherwise (a cron fire or a deadTime).
func Until(clk clockwork.Clock, t time.Time) time.Duration {
	return t.Sub(clk.Now())
}

// Reached reports whether t has come, by the same rule as Until.
func Reached(clk clockwork.Clock, t time.Time) bool {
	return !clk.Now().Before(t)
}

// OffBeat is the instant every after t, brought forward to the half-second
// before it when every is a second or more: never later than t + every,
// and more than a second before it never. Cron fires fall on whole
// seconds, and an aligned burst of many schedules takes the CPUs for some
// milliseconds after each; periodic work of fom's own (a cluster's lease
// renewal, the statistics' flush) falls half-way between two instead of
// adding to one. Truncation is on the Unix second, whatever t's zone.
func OffBeat(t time.Time, every time.Duration) time.Time {
	if every < time.Second {
		return t.Add(every)
	}
	return t.Add(every).Add(-500 * time.Millisecond).Truncate(time.Second).Add(500 * time.Millisecond)
}

// The calm part of a second: cron's aligned bursts fall on whole
// seconds, their fires recorded ahead up to 200 ms before and run for
// some tens of milliseconds after.
const (
	calmFrom = 100 * time.Millisecond
	calmTo   = 800 * time.Millisecond
)

// NextCalm is when the calm part of the second after t's begins: the
// burst at its whole second has run.
func NextCalm(t time.Time) time.Time {
	return t.Truncate(time.Second).Add(time.Second + calmFrom)
}

// UntilCalm is how long bulk work of fom's own (a starting App's cluster
// work, its declarations; a stopping one's handover of its leases and last
// flush), due at t and expected to take about work, waits to run in the
// calm part of a second: none when it fits before the calm part ends, else
// until the next calm part begins. Work longer than a calm part begins with
// one.
func UntilCalm(t time.Time, work time.Duration) time.Duration {
	into := time.Duration(t.UnixNano() % int64(time.Second))
	if into < 0 {
		into += time.Second
	}
	work = min(work, calmTo-calmFrom)
	switch {
	case into < calmFrom:
		return calmFrom - into
	case into+work <= calmTo:
		return 0
	default:
		return time.Second + calmFrom - into
	}
}
