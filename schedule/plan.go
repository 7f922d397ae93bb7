package schedule

import (
	"fmt"
	"slices"
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

// next is the first fire of the spec after from, with clock changes
// handled the way cron users expect of a job at a fixed hour (as Vixie
// cron does): a fire whose wall time falls in a spring-forward gap runs
// once at the end of the gap instead of being skipped, and a wall time
// that repeats in a fall-back runs only at its first occurrence. Specs
// whose hour is a wildcard follow elapsed time: every wall time that
// exists fires, a repeated one twice. @every is robfig's, as it is.
//
// robfig's Next steps through hours as elapsed time, which goes wrong
// across a change of other than a whole hour (Australia/Lord_Howe's 30
// minutes: a 03:00 fire skipped, a 01:30 one run twice). So while a clock
// change lies between from and robfig's answer, the fire is found on the
// wall clock instead: the spec's matching wall times, enumerated in UTC
// where robfig's arithmetic is exact, each mapped to the instants that
// show it in the zone.
func (p cronPlan) next(from time.Time) time.Time {
	spec, ok := p.s.(*cron.SpecSchedule)
	if !ok {
		return p.s.Next(from)
	}
	loc := zoneOf(spec, from)
	// Without a change of offset between from and robfig's fire (two
	// changes within two days are not in the tz database), robfig's
	// answer is the wall clock's: the common path, one Next.
	if t := p.s.Next(from); !t.IsZero() && t.Sub(from) <= 48*time.Hour && offsetAt(from, loc) == offsetAt(t, loc) {
		return t
	}
	return wallNext(spec, from, loc)
}

// wallNext finds the spec's first fire after from on loc's wall clock
// (see next).
func wallNext(spec *cron.SpecSchedule, from time.Time, loc *time.Location) time.Time {
	fixedHour := spec.Hour&allHours != allHours
	shadow := *spec
	shadow.Location = time.UTC
	// Wall times are enumerated from the earliest any instant after from
	// can show: from read in the smallest offset of the next two days.
	minOff, _ := offsetRange(from, 48*time.Hour, loc)
	w := shadow.Next(from.UTC().Add(time.Duration(minOff)*time.Second - time.Second))
	var best time.Time
	for n := 0; !w.IsZero() && n < 10000; n++ {
		if !best.IsZero() {
			// No later wall time can show an instant before best.
			_, maxOff := offsetRange(best.Add(-48*time.Hour), 48*time.Hour, loc)
			if w.Sub(best.UTC()) > time.Duration(maxOff)*time.Second {
				break
			}
		}
		for _, at := range instantsOf(w, loc, fixedHour) {
			if at.After(from) && (best.IsZero() || at.Before(best)) {
				best = at
			}
		}
		w = shadow.Next(w)
	}
	if best.IsZero() {
		return best
	}
	return best.In(from.Location())
}

// instantsOf returns the instants at which loc's clock shows the wall time
// w (given as a UTC time), earliest first: one, two in a fall-back's
// repeated hour (only the first when firstOnly), none in a spring-forward
// gap, where the end of the gap stands in when firstOnly.
func instantsOf(w time.Time, loc *time.Location, firstOnly bool) []time.Time {
	guess := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0, loc)
	var out []time.Time
	var offs [3]int
	for i, d := range []time.Duration{-6 * time.Hour, 0, 6 * time.Hour} {
		offs[i] = offsetAt(guess.Add(d), loc)
	}
	for i, off := range offs {
		if (i > 0 && off == offs[i-1]) || (i == 2 && off == offs[0]) {
			continue
		}
		at := w.Add(-time.Duration(off) * time.Second)
		if wallOf(at.In(loc)).Equal(w) && !slices.ContainsFunc(out, at.Equal) {
			out = append(out, at)
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	if len(out) > 0 {
		if firstOnly {
			return out[:1]
		}
		return out
	}
	if !firstOnly {
		return nil
	}
	// A gap: the clock jumps from before w to after it. Its end is the
	// first instant in the later offset.
	before, after := offs[0], offs[2]
	if after <= before {
		return nil
	}
	lo, hi := w.Add(-time.Duration(after)*time.Second), w.Add(-time.Duration(before)*time.Second)
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2)
		if offsetAt(mid, loc) == before {
			lo = mid
		} else {
			hi = mid
		}
	}
	// Offsets change on whole seconds.
	if t := hi.Truncate(time.Second); offsetAt(t, loc) != before {
		hi = t
	} else {
		hi = t.Add(time.Second)
	}
	return []time.Time{hi}
}

// wallOf is t's wall clock as a UTC time, to the second.
func wallOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
}

func offsetAt(t time.Time, loc *time.Location) int {
	_, off := t.In(loc).Zone()
	return off
}

// offsetRange is the smallest and largest offset of loc from t to t+d,
// read every six hours (no two changes are closer in the tz database).
func offsetRange(t time.Time, d time.Duration, loc *time.Location) (lo, hi int) {
	lo, hi = offsetAt(t, loc), offsetAt(t, loc)
	for s := 6 * time.Hour; s <= d; s += 6 * time.Hour {
		o := offsetAt(t.Add(s), loc)
		lo, hi = min(lo, o), max(hi, o)
	}
	return lo, hi
}

// zoneOf is the zone spec's wall times are read in: its CRON_TZ, else the
// zone of the time it is asked about (robfig's rule).
func zoneOf(spec *cron.SpecSchedule, from time.Time) *time.Location {
	if spec.Location == time.Local {
		return from.Location()
	}
	return spec.Location
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
