package schedule

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fom-go/fom/config"
)

func TestPlanNext(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no tzdata:", err)
	}
	mustCron := func(s string) Plan {
		p, err := CronPlan(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	round := func(start, end string) Round { return Round{Start: at(start), End: at(end)} }
	tests := []struct {
		name string
		plan Plan
		prev Round
		want string // RFC 3339; "" for no further fire
	}{
		{"cron with seconds", mustCron("*/15 * * * * *"), round("2026-01-05T00:00:07Z", "2026-01-05T00:00:09Z"), "2026-01-05T00:00:15Z"},
		{"cron five fields", mustCron("30 2 * * *"), round("2026-01-05T03:00:00Z", "2026-01-05T03:00:00Z"), "2026-01-06T02:30:00Z"},
		{"cron from round start, not end", mustCron("0 * * * * *"), round("2026-01-05T00:00:00Z", "2026-01-05T00:05:30Z"), "2026-01-05T00:01:00Z"},
		{"descriptor hourly", mustCron("@hourly"), round("2026-01-05T10:20:00Z", "2026-01-05T10:20:00Z"), "2026-01-05T11:00:00Z"},
		{"descriptor every", mustCron("@every 90s"), round("2026-01-05T10:00:00Z", "2026-01-05T10:00:00Z"), "2026-01-05T10:01:30Z"},
		{"weekday names", mustCron("0 0 9 * * MON-FRI"), round("2026-01-09T10:00:00Z", "2026-01-09T10:00:00Z"), "2026-01-12T09:00:00Z"},
		// 2026-03-08 02:30 does not exist in New York: the fire runs once
		// at the end of the gap, 03:00 EDT, rather than being skipped.
		{"CRON_TZ spring forward", mustCron("CRON_TZ=America/New_York 30 2 * * *"), Round{Start: time.Date(2026, 3, 7, 12, 0, 0, 0, ny)}, "2026-03-08T03:00:00-04:00"},
		{"CRON_TZ day after spring forward", mustCron("CRON_TZ=America/New_York 30 2 * * *"), Round{Start: time.Date(2026, 3, 8, 12, 0, 0, 0, ny)}, "2026-03-09T02:30:00-04:00"},
		// 2026-11-01 01:30 happens twice; it fires once, at the first.
		{"CRON_TZ fall back", mustCron("CRON_TZ=America/New_York 30 1 * * *"), Round{Start: time.Date(2026, 10, 31, 12, 0, 0, 0, ny)}, "2026-11-01T01:30:00-04:00"},
		{"CRON_TZ after fall back", mustCron("CRON_TZ=America/New_York 30 1 * * *"), Round{Start: time.Date(2026, 11, 1, 1, 30, 0, 0, ny)}, "2026-11-02T01:30:00-05:00"},
		{"hour wildcard follows elapsed time in fall back", mustCron("CRON_TZ=America/New_York 0 30 * * * *"), Round{Start: time.Date(2026, 11, 1, 1, 30, 0, 0, ny)}, "2026-11-01T01:30:00-05:00"},
		{"hour wildcard across spring forward", mustCron("CRON_TZ=America/New_York 0 30 * * * *"), Round{Start: time.Date(2026, 3, 8, 1, 30, 0, 0, ny)}, "2026-03-08T03:30:00-04:00"},
		{"no gap fire when the spec misses the gap", mustCron("CRON_TZ=America/New_York 0 4 * * *"), Round{Start: time.Date(2026, 3, 7, 12, 0, 0, 0, ny)}, "2026-03-08T04:00:00-04:00"},
		{"fixedRate from start", FixedRatePlan(10 * time.Second), round("2026-01-05T00:00:00Z", "2026-01-05T00:00:04Z"), "2026-01-05T00:00:10Z"},
		// Lateness of a start is not carried into the next fire.
		{"fixedRate from the planned fire", FixedRatePlan(10 * time.Second), Round{Planned: at("2026-01-05T00:00:00Z"), Start: at("2026-01-05T00:00:02Z"), End: at("2026-01-05T00:00:04Z")}, "2026-01-05T00:00:10Z"},
		// An overrun: once at once, then the rate from that round's start.
		{"fixedRate overrun runs at the end", FixedRatePlan(10 * time.Second), Round{Planned: at("2026-01-05T00:00:00Z"), Start: at("2026-01-05T00:00:00Z"), End: at("2026-01-05T00:00:25Z")}, "2026-01-05T00:00:25Z"},
		// A round started an hour late (a suspended process) and quick:
		// the next fire counts from its start, no second catch-up round.
		{"fixedRate after a long suspension", FixedRatePlan(10 * time.Second), Round{Planned: at("2026-01-05T00:00:10Z"), Start: at("2026-01-05T01:00:00Z"), End: at("2026-01-05T01:00:01Z")}, "2026-01-05T01:00:10Z"},
		{"fixedDelay from end", FixedDelayPlan(10 * time.Second), round("2026-01-05T00:00:00Z", "2026-01-05T00:00:04Z"), "2026-01-05T00:00:14Z"},
		// The process runs in UTC (or any zone) while the spec names its
		// own: a fixed-hour job still runs once at a fall-back and once
		// in a spring-forward gap, in either hemisphere.
		{"UTC caller, New York fall back", mustCron("CRON_TZ=America/New_York 30 1 * * *"), round("2026-11-01T05:30:00Z", "2026-11-01T05:30:00Z"), "2026-11-02T06:30:00Z"},
		{"UTC caller, New York before fall back", mustCron("CRON_TZ=America/New_York 30 1 * * *"), round("2026-10-31T12:00:00Z", "2026-10-31T12:00:00Z"), "2026-11-01T05:30:00Z"},
		{"UTC caller, Berlin fall back", mustCron("CRON_TZ=Europe/Berlin 30 2 * * *"), round("2026-10-25T00:30:00Z", "2026-10-25T00:30:00Z"), "2026-10-26T01:30:00Z"},
		{"UTC caller, Berlin spring forward", mustCron("CRON_TZ=Europe/Berlin 30 2 * * *"), round("2026-03-28T12:00:00Z", "2026-03-28T12:00:00Z"), "2026-03-29T01:00:00Z"},
		{"UTC caller, Sydney fall back", mustCron("CRON_TZ=Australia/Sydney 30 2 * * *"), round("2026-04-04T15:30:00Z", "2026-04-04T15:30:00Z"), "2026-04-05T16:30:00Z"},
		{"UTC caller, Sydney spring forward", mustCron("CRON_TZ=Australia/Sydney 30 2 * * *"), round("2026-10-03T12:00:00Z", "2026-10-03T12:00:00Z"), "2026-10-03T16:00:00Z"},
		{"Tokyo caller, Berlin fall back", mustCron("CRON_TZ=Europe/Berlin 30 2 * * *"), Round{Start: at("2026-10-25T00:30:00Z").In(time.FixedZone("JST", 9*3600))}, "2026-10-26T01:30:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.plan.Next(tt.prev)
			if tt.want == "" {
				if ok {
					t.Fatalf("got %v, want no fire", got)
				}
				return
			}
			if !ok || !got.Equal(at(tt.want)) {
				t.Fatalf("got %v (%v), want %s", got, ok, tt.want)
			}
		})
	}
	for _, bad := range []string{"61 * * * *", "0 0 0 30 2 *", "CRON_TZ=Europe/Berlin", "TZ=", "CRON_TZ= 0 * * * *"} {
		if _, err := CronPlan(bad); err == nil {
			t.Fatalf("bad cron %q accepted", bad)
		}
	}
}

// gatedRounds returns a Tasks func whose every round runs one gate task,
// handing each gate to the test.
func gatedRounds() (func(context.Context) ([]Task, error), chan *gate) {
	gates := make(chan *gate, 16)
	return func(context.Context) ([]Task, error) {
		g := newGate("t")
		gates <- g
		return []Task{g}, nil
	}, gates
}

func TestFixedRateAndCatchUp(t *testing.T) {
	t.Parallel()
	tasks, gates := gatedRounds()
	var starts []time.Time
	var mu sync.Mutex
	h := newHarness(t, map[string]string{"fixedRate": "10s"}, Job{Tasks: tasks, OnComplete: func(_ context.Context, r Round) {
		mu.Lock()
		starts = append(starts, r.Start)
		mu.Unlock()
	}})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	h.waitSleeping(0)
	h.clk.Advance(10 * time.Second)
	g := <-gates
	waitChan(t, g.started, "round 1")
	h.clk.Advance(35 * time.Second) // the round overruns three fires
	g.open()
	// Missed fires collapse into one round at once, then the rate resumes
	// from that round's start.
	g = <-gates
	g.open()
	h.waitSleeping(2)
	if next := h.c.Info().Next; !next.Equal(t0.Add(55 * time.Second)) {
		t.Fatalf("next %v, want t0+55s", next)
	}
	mu.Lock()
	defer mu.Unlock()
	if !starts[0].Equal(t0.Add(10*time.Second)) || !starts[1].Equal(t0.Add(45*time.Second)) {
		t.Fatalf("starts %v", starts)
	}
}

func TestFixedDelay(t *testing.T) {
	t.Parallel()
	tasks, gates := gatedRounds()
	h := newHarness(t, map[string]string{"fixedDelay": "10s", "execOnLoad": "true"}, Job{Tasks: tasks})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	g := <-gates
	waitChan(t, g.started, "round 1")
	h.clk.Advance(3 * time.Second)
	g.open()
	h.waitSleeping(1)
	if next := h.c.Info().Next; !next.Equal(t0.Add(13 * time.Second)) {
		t.Fatalf("next %v, want end+10s = t0+13s", next)
	}
}

func TestInitialDelayAndCron(t *testing.T) {
	t.Parallel()
	var rounds atomic.Int32
	h := newHarness(t, map[string]string{"cron": "*/20 * * * * *", "initialDelay": "5s"}, Job{Tasks: func(context.Context) ([]Task, error) {
		rounds.Add(1)
		return nil, nil
	}})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	if next := h.c.Info().Next; !next.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("first fire %v, want t0+5s", next)
	}
	h.clk.Advance(5 * time.Second)
	h.waitSleeping(1)
	if next := h.c.Info().Next; !next.Equal(t0.Add(20 * time.Second)) {
		t.Fatalf("cron next %v, want t0+20s", next)
	}
}

func TestCustomPlanEndsSchedule(t *testing.T) {
	t.Parallel()
	plan := PlanFunc("twice", func(prev Round) (time.Time, bool) {
		if prev.Number >= 2 {
			return time.Time{}, false
		}
		return prev.Start.Add(time.Minute), true
	})
	h := newHarness(t, nil, Job{Plan: plan})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	h.waitSleeping(0)
	h.clk.Advance(time.Minute)
	h.waitSleeping(1)
	h.clk.Advance(time.Minute)
	h.waitState(Stopped)
	if i := h.c.Info(); i.Rounds != 2 || i.Plan != "twice" {
		t.Fatalf("info %+v", i)
	}
}

// A plan reads the previous round's results during Next: the round's
// group, which its runner uses again for the next round, is not reused
// before then, and the results are not copied for it.
func TestCustomPlanReadsTheRoundItIsHanded(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	seen := make(chan string, 8)
	plan := PlanFunc("checks", func(prev Round) (time.Time, bool) {
		if prev.Number > 0 {
			if len(prev.Results) != 1 || prev.Results[0].Value != prev.Number {
				seen <- fmt.Sprintf("round %d handed %+v", prev.Number, prev.Results)
			} else {
				seen <- ""
			}
		}
		return prev.Start.Add(time.Minute), prev.Number < 3
	})
	task := TaskFunc("n", func(context.Context) (any, error) { return n.Add(1), nil })
	h := newHarness(t, nil, Job{Plan: plan, Tasks: func(context.Context) ([]Task, error) { return []Task{task}, nil }})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	h.waitSleeping(0)
	for i := 1; i <= 3; i++ {
		h.clk.Advance(time.Minute)
		if msg := <-seen; msg != "" {
			t.Fatal(msg)
		}
	}
	h.waitState(Stopped)
}

// A job's Fixed tasks run every round with no Tasks func, submitted at
// the round's start; a job with neither has no work.
func TestFixedTasksRunEveryRound(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	rounds := make(chan Round, 4)
	task := TaskFunc("fixed", func(context.Context) (any, error) { return n.Add(1), nil })
	h := newHarness(t, map[string]string{"fixedRate": "1m"}, Job{Fixed: []Task{task}, OnComplete: func(_ context.Context, r Round) { rounds <- r }})
	h.c.job.Tasks = nil // the harness fills in an empty Tasks
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	h.waitSleeping(0)
	for i := int64(1); i <= 2; i++ {
		h.clk.Advance(time.Minute)
		r := <-rounds
		if len(r.Results) != 1 || r.Results[0].Value != i || !r.Results[0].Started.Equal(r.Start) {
			t.Fatalf("round %d: %+v, start %v", i, r.Results, r.Start)
		}
	}
	cfg, err := config.New("none", config.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg, Job{}, Options{}); !errors.Is(err, ErrNoWork) {
		t.Fatalf("a job without Tasks or Fixed: %v, want ErrNoWork", err)
	}
}

func TestPlanEditRecomputesNextAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]string{"cron": "0 0 * * * *"}, Job{})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	h.waitSleeping(0)
	h.apply("cron", "", "fixedRate", "30s")
	h.waitFor("replanned", func() bool { return h.c.Info().Next.Equal(t0.Add(30 * time.Second)) })
	h.clk.Advance(30 * time.Second)
	h.waitSleeping(1)
	if i := h.c.Info(); i.Plan != "fixedRate 30s" || !i.Next.Equal(t0.Add(time.Minute)) {
		t.Fatalf("info %+v", i)
	}
}

func TestWallClockJumpIsNoticedWithinAMinute(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]string{"cron": "0 0 * * * *"}, Job{})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	h.waitSleeping(0)
	// Waits are never longer than a minute, so advancing in one-minute steps
	// reaches the hourly fire; a single timer for the whole hour would be
	// armed exactly once.
	for range 60 {
		h.clk.Advance(time.Minute)
	}
	h.waitSleeping(1)
}

// TestRuntimeTimerPath runs plans without a shared wheel, on one runtime
// timer per wait.
func TestRuntimeTimerPath(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]string{"fixedRate": "10s"}, Job{}, func(o *Options) { o.Wheel = nil })
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	h.waitSleeping(0)
	for round := int64(1); round <= 3; round++ {
		h.clk.Advance(10 * time.Second)
		h.waitSleeping(round)
	}
	if next := h.c.Info().Next; !next.Equal(t0.Add(40 * time.Second)) {
		t.Fatalf("next %v", next)
	}
	d, err := h.c.SubmitAfter(time.Second, ok("later")) // a wheel of its own
	if err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(time.Second)
	if r, err := d.Wait(context.Background()); err != nil || len(r.Results) != 1 {
		t.Fatalf("%+v %v", r, err)
	}
}

// TestFixedRateDoesNotDrift starts every round late on the fake clock: the
// next fire still counts from the planned one, so lateness never adds up.
func TestFixedRateDoesNotDrift(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]string{"fixedRate": "10s"}, Job{})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	h.waitSleeping(0)
	for i := int64(1); i <= 5; i++ {
		late := t0.Add(time.Duration(i)*10*time.Second + 300*time.Millisecond)
		h.clk.Advance(late.Sub(h.clk.Now()))
		h.waitSleeping(i)
		if want := t0.Add(time.Duration(i+1) * 10 * time.Second); !h.c.Info().Next.Equal(want) {
			t.Fatalf("round %d started 300ms late: next %v, want %v", i, h.c.Info().Next, want)
		}
	}
}

// TestClearingThePlanOfASleepingSchedule leaves a managed pool at once:
// no panic, no lost schedule, Submit still works, a restart is a pool.
func TestClearingThePlanOfASleepingSchedule(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"cron", "fixedRate", "fixedDelay"} {
		t.Run(key, func(t *testing.T) {
			t.Parallel()
			v := map[string]string{"cron": "0 * * * * *", "fixedRate": "10s", "fixedDelay": "10s"}[key]
			h := newHarness(t, map[string]string{key: v}, Job{})
			if err := h.c.Startup(); err != nil {
				t.Fatal(err)
			}
			h.waitSleeping(0)
			h.apply(key, "")
			h.waitState(Inited)
			if i := h.c.Info(); i.Plan != "none" || !i.Next.IsZero() {
				t.Fatalf("info after clearing %s: %+v", key, i)
			}
			b, err := h.c.Submit(context.Background(), ok("adhoc"))
			if err != nil {
				t.Fatal(err)
			}
			if r, err := b.Wait(context.Background()); err != nil || r.Results[0].Status != StatusSuccess {
				t.Fatalf("batch %+v %v", r, err)
			}
			h.clk.Advance(time.Hour) // nothing fires
			if err := h.c.Startup(); err != nil {
				t.Fatal(err)
			}
			if s := h.c.State(); s != Inited {
				t.Fatalf("restarted without a plan: %s, want INITED", s)
			}
		})
	}
}

// TestClearingThePlanDuringARound ends the activation after that round.
func TestClearingThePlanDuringARound(t *testing.T) {
	t.Parallel()
	tasks, gates := gatedRounds()
	h := newHarness(t, map[string]string{"fixedRate": "10s", "execOnLoad": "true"}, Job{Tasks: tasks})
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	g := <-gates
	waitChan(t, g.started, "round 1")
	h.apply("fixedRate", "")
	g.open()
	h.waitState(Inited)
	if i := h.c.Info(); i.Rounds != 1 || !i.Next.IsZero() {
		t.Fatalf("info %+v", i)
	}
}
