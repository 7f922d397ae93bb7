package schedule

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/fom-go/fom/config"
	"github.com/fom-go/fom/statistics"
)

// Plan computes when the next round fires. It is a pure function of the
// previous round: cron uses its start, fixedRate its planned fire plus the
// rate, fixedDelay its end plus the delay. For the first fire, prev is a
// Round with Number 0 whose Planned, Start and End are the time the
// schedule started. prev.Results is valid only during the call: the
// schedule uses its slice again for a later round, so a plan that keeps
// results past Next copies them. (fom's plans read only the times.)
type Plan interface {
	Next(prev Round) (next time.Time, ok bool)
	String() string
}

// CronPlan parses a cron spec (seconds optional, descriptors, CRON_TZ=).
func CronPlan(spec string) (Plan, error) {
	s, err := config.ParseCron(spec)
	if err != nil {
		return nil, fmt.Errorf("parse cron %q: %w", spec, err)
	}
	return cronPlan{spec: spec, s: s}, nil
}

type cronPlan struct {
	spec string
	s    cron.Schedule
}

func (p cronPlan) Next(prev Round) (time.Time, bool) {
	t := p.next(prev.Start)
	return t, !t.IsZero()
}

const allHours = 1<<24 - 1

// next is robfig's Next with daylight-saving changes handled the way cron
// users expect of a job at a fixed hour (as Vixie cron does): a fire whose
// wall time falls in a spring-forward gap runs once at the end of the gap
// instead of being skipped, and a wall time that repeats in a fall-back
// runs only at its first occurrence. Specs whose hour is a wildcard, and
// @every, follow elapsed time and are left as they are.
func (p cronPlan) next(from time.Time) time.Time {
	spec, ok := p.s.(*cron.SpecSchedule)
	if !ok || spec.Hour&allHours == allHours {
		return p.s.Next(from)
	}
	for range 4 {
		t := p.s.Next(from)
		if t.IsZero() {
			return t
		}
		if g, ok := gapFire(spec, from, t); ok {
			return g
		}
		if !repeatedWallTime(t, zoneOf(spec, from)) {
			return t
		}
		from = t
	}
	return p.s.Next(from)
}

// zoneOf is the zone spec's wall times are read in: its CRON_TZ, else the
// zone of the time it is asked about (robfig's rule).
func zoneOf(spec *cron.SpecSchedule, from time.Time) *time.Location {
	if spec.Location == time.Local {
		return from.Location()
	}
	return spec.Location
}

// gapFire finds a spring-forward gap between from and t in which spec
// would have fired, and returns the end of that gap.
func gapFire(spec *cron.SpecSchedule, from, t time.Time) (time.Time, bool) {
	loc := zoneOf(spec, from)
	from, t = from.In(loc), t.In(loc)
	_, off0 := from.Zone()
	_, off1 := t.Zone()
	if off1 <= off0 {
		return time.Time{}, false
	}
	// Binary search for the first instant with a new offset.
	lo, hi := from, t
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2)
		if _, o := mid.Zone(); o == off0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	// Offsets change on whole seconds: hi is within a second after it.
	if tr := hi.Truncate(time.Second); func() bool { _, o := tr.Zone(); return o != off0 }() {
		hi = tr
	} else {
		hi = tr.Add(time.Second)
	}
	_, offAfter := hi.Zone()
	gap := time.Duration(offAfter-off0) * time.Second
	if gap <= 0 {
		return time.Time{}, false
	}
	// Would spec fire at a wall time inside the gap, read in the old offset?
	fixed := time.FixedZone("", off0)
	shadow := *spec
	shadow.Location = fixed
	start := hi.In(fixed).Truncate(time.Second)
	w := shadow.Next(start.Add(-time.Second))
	if !w.IsZero() && w.Before(start.Add(gap)) && hi.Before(t) {
		return hi, true
	}
	return time.Time{}, false
}

// repeatedWallTime reports whether t is the second occurrence of its wall
// time in loc, in the hour a fall-back repeats. robfig returns times in the
// caller's zone (UTC on most servers), so t is read in the spec's zone
// first.
func repeatedWallTime(t time.Time, loc *time.Location) bool {
	t = t.In(loc)
	_, off := t.Zone()
	_, before := t.Add(-3 * time.Hour).Zone()
	if before <= off {
		return false
	}
	earlier := t.Add(-time.Duration(before-off) * time.Second)
	y1, m1, d1 := t.Date()
	y0, m0, d0 := earlier.Date()
	return y1 == y0 && m1 == m0 && d1 == d0 && t.Hour() == earlier.Hour() && t.Minute() == earlier.Minute() && t.Second() == earlier.Second()
}
func (p cronPlan) String() string { return "cron " + p.spec }

// FixedRatePlan fires every d, measured from the previous round's planned
// fire, so that the lateness of one round is not added to the next (as
// Java's scheduleAtFixedRate). When that fire has already passed by the
// end of the previous round (it overran, or the process was suspended),
// the next round runs once at once and the rate counts from the previous
// round's start: never a burst of catch-up rounds.
func FixedRatePlan(d time.Duration) Plan { return ratePlan(d) }

type ratePlan time.Duration

func (p ratePlan) Next(prev Round) (time.Time, bool) {
	d := time.Duration(p)
	base := prev.Planned
	if base.IsZero() {
		base = prev.Start
	}
	next := base.Add(d)
	if next.Before(prev.End) {
		next = prev.Start.Add(d)
		if next.Before(prev.End) {
			next = prev.End
		}
	}
	return next, true
}
func (p ratePlan) String() string {
	return "fixedRate " + statistics.ShortDuration(time.Duration(p))
}

// FixedDelayPlan fires d after the end of the previous round.
func FixedDelayPlan(d time.Duration) Plan { return delayPlan(d) }

type delayPlan time.Duration

func (p delayPlan) Next(prev Round) (time.Time, bool) { return prev.End.Add(time.Duration(p)), true }
func (p delayPlan) String() string {
	return "fixedDelay " + statistics.ShortDuration(time.Duration(p))
}

// PlanFunc makes a Plan of a function, such as a job's own
// Next(prev Round) (time.Time, bool) method.
func PlanFunc(desc string, fn func(prev Round) (time.Time, bool)) Plan {
	return funcPlan{desc: desc, fn: fn}
}

type funcPlan struct {
	desc string
	fn   func(prev Round) (time.Time, bool)
}

func (p funcPlan) Next(prev Round) (time.Time, bool) { return p.fn(prev) }
func (p funcPlan) String() string                    { return p.desc }

// PlanOf builds the plan a settings value selects; nil means no plan.
func PlanOf(s config.Settings) (Plan, error) { return planOf(s) }

// NextFires returns up to n fires of plan after from, each computed from
// the one before as if its round took no time.
func NextFires(plan Plan, from time.Time, n int) []time.Time {
	var out []time.Time
	prev := Round{Planned: from, Start: from, End: from}
	for range n {
		next, ok := plan.Next(prev)
		if !ok {
			break
		}
		out = append(out, next)
		prev = Round{Number: prev.Number + 1, Planned: next, Start: next, End: next}
	}
	return out
}

// planOf builds the plan a settings value selects; nil means no plan.
func planOf(s config.Settings) (Plan, error) {
	switch {
	case s.Cron != "":
		return CronPlan(s.Cron)
	case s.FixedRate > 0:
		return FixedRatePlan(s.FixedRate), nil
	case s.FixedDelay > 0:
		return FixedDelayPlan(s.FixedDelay), nil
	}
	return nil, nil
}
