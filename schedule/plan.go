package schedule

import (
	"fmt"
	"time"

	"github.com/fom-go/fom/config"
)

// Plan computes when the next round fires. It is a pure function of the
// previous round: cron uses its start, fixedRate its start plus the rate,
// fixedDelay its end plus the delay. For the first fire, prev is a Round
// with Number 0 whose Start and End are the time the schedule started.
type Plan interface {
	Next(prev Round) (next time.Time, ok bool)
	String() string
}

// CronPlan parses a cron spec (seconds optional, descriptors, CRON_TZ=).
func CronPlan(spec string) (Plan, error) {
	s, err := config.CronParser().Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("parse cron %q: %w", spec, err)
	}
	return cronPlan{spec: spec, s: s}, nil
}

type cronPlan struct {
	spec string
	s    interface{ Next(time.Time) time.Time }
}

func (p cronPlan) Next(prev Round) (time.Time, bool) {
	t := p.s.Next(prev.Start)
	return t, !t.IsZero()
}
func (p cronPlan) String() string { return "cron " + p.spec }

// FixedRatePlan fires every d, measured from the start of the previous round.
func FixedRatePlan(d time.Duration) Plan { return ratePlan(d) }

type ratePlan time.Duration

func (p ratePlan) Next(prev Round) (time.Time, bool) { return prev.Start.Add(time.Duration(p)), true }
func (p ratePlan) String() string                    { return "fixedRate " + time.Duration(p).String() }

// FixedDelayPlan fires d after the end of the previous round.
func FixedDelayPlan(d time.Duration) Plan { return delayPlan(d) }

type delayPlan time.Duration

func (p delayPlan) Next(prev Round) (time.Time, bool) { return prev.End.Add(time.Duration(p)), true }
func (p delayPlan) String() string                    { return "fixedDelay " + time.Duration(p).String() }

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
