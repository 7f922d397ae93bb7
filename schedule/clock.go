package schedule

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// maxWait bounds every wait, so that a wall-clock jump (a suspended laptop,
// an NTP step) delays a fire by at most this much.
const maxWait = time.Minute

// timerAt returns a timer that fires at t (wall time), or at once if t is past.
//
// With a fake clock, the timer is armed at exactly t even if the clock is
// advanced by another goroutine while it is being armed: the deadline is
// absolute, and a timer armed across an Advance is armed again.
func timerAt(clk clockwork.Clock, t time.Time) clockwork.Timer {
	if _, fake := clk.(*clockwork.FakeClock); !fake {
		return clk.NewTimer(wallUntil(clk, t))
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

// wallUntil is the wall-clock time until t, ignoring monotonic readings.
func wallUntil(clk clockwork.Clock, t time.Time) time.Duration {
	return t.Round(0).Sub(clk.Now().Round(0))
}

// reached reports whether wall time has reached t.
func reached(clk clockwork.Clock, t time.Time) bool {
	return !clk.Now().Round(0).Before(t.Round(0))
}
