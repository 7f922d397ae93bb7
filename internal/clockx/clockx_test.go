package clockx

import (
	"testing"
	"time"
	"unsafe"

	"github.com/jonboulle/clockwork"
)

// stepWall returns t with its wall clock reading moved by d and its
// monotonic reading kept: what time.Now() returns after an NTP step or a
// manual clock change. ok is false if this Go's time.Time is not laid out
// as expected (the test then skips).
func stepWall(t time.Time, d time.Duration) (time.Time, bool) {
	const hasMonotonic = 1 << 63
	const secShift, secBits = 30, 33
	p := (*struct {
		wall uint64
		ext  int64
		loc  *time.Location
	})(unsafe.Pointer(&t))
	if p.wall&hasMonotonic == 0 || d%time.Second != 0 {
		return t, false
	}
	mask := uint64(1<<secBits-1) << secShift
	sec := (p.wall & mask) >> secShift
	sec = uint64(int64(sec) + int64(d/time.Second))
	p.wall = p.wall&^mask | sec<<secShift&mask
	return t, true
}

// steppedClock is the real clock after a wall-clock step of step.
type steppedClock struct {
	clockwork.Clock
	step time.Duration
}

func (c steppedClock) Now() time.Time {
	t, _ := stepWall(time.Now(), c.step)
	return t
}

// TestRelativeWaitsIgnoreAWallClockStep: a deadline taken from a clock
// reading keeps its length when the wall clock is stepped back 10 s; a
// calendar time (no monotonic reading) follows the wall clock.
func TestRelativeWaitsIgnoreAWallClockStep(t *testing.T) {
	now := time.Now()
	stepped, ok := stepWall(now, -10*time.Second)
	if !ok || !stepped.Round(0).Equal(now.Round(0).Add(-10*time.Second)) || stepped.Sub(now) != 0 {
		t.Skip("time.Time layout differs; cannot simulate a wall-clock step")
	}
	real := clockwork.NewRealClock()
	deadline := real.Now().Add(2 * time.Second) // a task's deadline, with a monotonic reading
	after := steppedClock{Clock: real, step: -10 * time.Second}
	if d := Until(after, deadline); d > 2*time.Second || d < time.Second {
		t.Fatalf("a 2s deadline after a -10s wall step is %v away", d)
	}
	if Reached(steppedClock{Clock: real, step: 10 * time.Second}, deadline) {
		t.Fatal("a +10s wall step reached a 2s deadline at once")
	}
	cronFire := time.Now().Round(0).Add(2 * time.Second) // wall only, like a cron fire
	if d := Until(after, cronFire); d < 11*time.Second || d > 12*time.Second {
		t.Fatalf("a calendar fire 2s away after a -10s wall step is %v away, want ~12s", d)
	}
}

func TestOffBeatFallsHalfWayBetweenWholeSeconds(t *testing.T) {
	base := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		from  time.Duration // after base
		every time.Duration
		want  time.Duration // after base
	}{
		{0, 5 * time.Second, 4500 * time.Millisecond},
		{300 * time.Millisecond, 5 * time.Second, 4500 * time.Millisecond},
		{600 * time.Millisecond, 5 * time.Second, 5500 * time.Millisecond},
		{500 * time.Millisecond, 5 * time.Second, 5500 * time.Millisecond},  // on the half-second already
		{4500 * time.Millisecond, 5 * time.Second, 9500 * time.Millisecond}, // a period from the last stays on it
		{200 * time.Millisecond, time.Second, 500 * time.Millisecond},
		{200 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond}, // under a second: not moved
	} {
		got := OffBeat(base.Add(c.from), c.every).Sub(base)
		if got != c.want {
			t.Errorf("OffBeat(+%s, %s) = +%s, want +%s", c.from, c.every, got, c.want)
		}
		if d := got - c.from; d > c.every || d <= c.every-time.Second && c.every >= time.Second {
			t.Errorf("OffBeat(+%s, %s) is %s after it: not within a second before the period", c.from, c.every, d)
		}
	}
}

func TestUntilCalmFitsWorkBetweenTwoBursts(t *testing.T) {
	base := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	for _, c := range []struct{ from, work, want time.Duration }{
		{0, 0, 100 * ms},
		{50 * ms, 100 * ms, 50 * ms},
		{100 * ms, 100 * ms, 0},
		{700 * ms, 100 * ms, 0},
		{701 * ms, 100 * ms, 399 * ms},
		{300 * ms, 400 * ms, 0},
		{450 * ms, 400 * ms, 650 * ms},
		{900 * ms, 0, 200 * ms},
		{100 * ms, 2 * time.Second, 0}, // longer than a calm part: begins with one
		{200 * ms, 2 * time.Second, 900 * ms},
	} {
		if got := UntilCalm(base.Add(c.from), c.work); got != c.want {
			t.Errorf("UntilCalm(+%s, %s) = %s, want %s", c.from, c.work, got, c.want)
		}
	}
}

func TestNextCalmIsTheCalmPartOfTheNextSecond(t *testing.T) {
	base := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	for _, from := range []time.Duration{0, 50 * ms, 100 * ms, 999 * ms} {
		if got, want := NextCalm(base.Add(from)), base.Add(1100*ms); !got.Equal(want) {
			t.Errorf("NextCalm(+%s) = +%s, want +%s", from, got.Sub(base), want.Sub(base))
		}
	}
}
