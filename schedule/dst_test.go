package schedule

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

// Cron plans across every clock change of 2026 in zones with whole-hour,
// half-hour, 45-minute and two-hour shifts, in both hemispheres and with
// negative daylight saving, against an oracle that reads the wall clock
// minute by minute: a fixed-hour spec fires once for each matching wall
// time (at its first occurrence, or at the end of the gap that skips it),
// a spec whose hour is a wildcard at every instant whose wall time
// matches.
func TestCronAcrossEveryClockChange(t *testing.T) {
	t.Parallel()
	zones := []string{
		"Australia/Lord_Howe", "Antarctica/Troll", "Pacific/Chatham", "America/St_Johns",
		"Australia/Adelaide", "Australia/Sydney", "America/New_York", "Europe/Berlin",
		"Europe/Dublin", "Africa/Casablanca", "America/Santiago", "Asia/Gaza", "America/Havana",
	}
	specs := []string{
		"0 0 3 * * *", "0 0 23 * * *", "0 30 1 * * *", "0 30 2 * * *", "0 0 2 * * *",
		"0 15 2 * * *", "0 45 1 * * *", "0 */10 2 * * *", "0 0 0 * * *", "0 59 23 * * *",
		"0 */15 * * * *", "0 0 * * * *", "0 30 * * * *", "0 0 1 * * SUN",
	}
	for _, zone := range zones {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatalf("zone %s: %v", zone, err)
		}
		changes := clockChanges(loc, 2026)
		if len(changes) == 0 && zone != "Asia/Gaza" {
			t.Fatalf("%s: no clock change found in 2026", zone)
		}
		for _, spec := range specs {
			p, err := CronPlan("CRON_TZ=" + zone + " " + spec)
			if err != nil {
				t.Fatal(err)
			}
			parsed := p.(cronPlan).s.(*cron.SpecSchedule)
			for _, ch := range changes {
				from, to := ch.Add(-26*time.Hour), ch.Add(24*time.Hour)
				want := oracleFires(parsed, loc, from, to.Add(2*time.Hour))
				var got []time.Time
				prev := from
				for len(got) < 10000 {
					next, ok := p.Next(Round{Planned: prev, Start: prev, End: prev})
					if !ok || next.After(to) {
						break
					}
					if !next.After(prev) {
						t.Fatalf("%s %q: next %v not after %v", zone, spec, next, prev)
					}
					got = append(got, next)
					prev = next
				}
				want = slices.DeleteFunc(want, func(x time.Time) bool { return x.After(to) })
				if !slices.EqualFunc(got, want, time.Time.Equal) {
					t.Errorf("%s %q around %s:\n got %s\nwant %s", zone, spec, ch.In(loc), fmtTimes(got, loc), fmtTimes(want, loc))
				}
			}
		}
	}
}

// clockChanges are the instants loc's offset changes in year, to the minute.
func clockChanges(loc *time.Location, year int) []time.Time {
	var out []time.Time
	t := time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC)
	end := t.AddDate(1, 0, 0)
	for ; t.Before(end); t = t.Add(time.Hour) {
		a, b := offsetAt(t, loc), offsetAt(t.Add(time.Hour), loc)
		if a == b {
			continue
		}
		m := t
		for offsetAt(m, loc) == a {
			m = m.Add(time.Minute)
		}
		out = append(out, m)
	}
	return out
}

// oracleFires lists spec's fires in (from, to] by reading loc's wall clock
// at every minute.
func oracleFires(spec *cron.SpecSchedule, loc *time.Location, from, to time.Time) []time.Time {
	shadow := *spec
	shadow.Location = time.UTC
	matches := func(w time.Time) bool { return shadow.Next(w.Add(-time.Second)).Equal(w) }
	fixedHour := spec.Hour&allHours != allHours
	seen := map[time.Time]bool{}
	var out []time.Time
	prevWall := wallOf(from.In(loc))
	for i := from.Add(time.Minute); !i.After(to); i = i.Add(time.Minute) {
		w := wallOf(i.In(loc))
		if fixedHour {
			// Wall times the clock jumped over: the gap's end stands in.
			for skipped := prevWall.Add(time.Minute); skipped.Before(w); skipped = skipped.Add(time.Minute) {
				if matches(skipped) && !seen[skipped] {
					seen[skipped] = true
					if len(out) == 0 || !out[len(out)-1].Equal(i) {
						out = append(out, i)
					}
				}
			}
		}
		if matches(w) && (!fixedHour || !seen[w]) {
			seen[w] = true
			if len(out) == 0 || !out[len(out)-1].Equal(i) {
				out = append(out, i)
			}
		}
		prevWall = w
	}
	return out
}

func fmtTimes(ts []time.Time, loc *time.Location) string {
	s := ""
	for _, t := range ts {
		s += fmt.Sprint(t.In(loc).Format("01-02 15:04 -0700"), ", ")
	}
	return s
}
