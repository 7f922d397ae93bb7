// Package clockx has the clock helpers fom's engine and timing wheel share.
package clockx

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// TimerAt returns a timer that fires at t (wall time), or at once if t is past.
//
// With a fake clock, the timer is armed at exactly t even if another
// goroutine advances the clock while it is being armed: the deadline is
// absolute, and a timer armed across an Advance is armed again.
func TimerAt(clk clockwork.Clock, t time.Time) clockwork.Timer {
	if _, fake := clk.(*clockwork.FakeClock); !fake {
		return clk.NewTimer(WallUntil(clk, t))
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

// AfterFuncAt calls f in its own goroutine at t (wall time), or at once if
// t is past. Like TimerAt it is exact on a fake clock advanced concurrently.
func AfterFuncAt(clk clockwork.Clock, t time.Time, f func()) clockwork.Timer {
	if _, fake := clk.(*clockwork.FakeClock); !fake {
		return clk.AfterFunc(WallUntil(clk, t), f)
	}
	for {
		now := clk.Now()
		tm := clk.AfterFunc(t.Sub(now), f)
		if clk.Now().Equal(now) || !tm.Stop() {
			return tm // armed at t, or already fired (once)
		}
	}
}

// WallUntil is the wall-clock time until t, ignoring monotonic readings.
func WallUntil(clk clockwork.Clock, t time.Time) time.Duration {
	return t.Round(0).Sub(clk.Now().Round(0))
}

// Reached reports whether wall time has reached t.
func Reached(clk clockwork.Clock, t time.Time) bool {
	return !clk.Now().Round(0).Before(t.Round(0))
}
