package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// CronParser returns the parser fom uses for cron specs: seconds optional,
// descriptors such as @hourly and @every allowed, CRON_TZ= / TZ= prefixes.
// Call ParseCron rather than its Parse: ParseCron guards the inputs the
// parser itself cannot take.
func CronParser() cron.Parser {
	return cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
}

// cronProbe is the instant from which ParseCron checks that a spec fires
// at all. Cron specs have no year field, so every spec that fires does so
// within a few years of any instant; a fixed one keeps validation
// independent of the clock.
func cronProbe() time.Time { return time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC) }

// ParseCron parses a cron spec the way every part of fom does. Beyond the
// parser's own checks it refuses a time-zone prefix without a zone
// (CRON_TZ= alone), Quartz syntax the parser does not know (L, W, #, a
// year field) with what to write instead, and a spec that never fires
// (0 0 0 30 2 *). It never panics.
func ParseCron(spec string) (s cron.Schedule, err error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, errors.New("empty cron spec")
	}
	if err := checkZonePrefix(spec); err != nil {
		return nil, err
	}
	defer func() {
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("cannot parse cron spec %q", spec)
		}
	}()
	s, err = CronParser().Parse(spec)
	if err != nil {
		if hint := quartzHint(spec); hint != "" {
			return nil, errors.New(hint)
		}
		return nil, err
	}
	if s.Next(cronProbe()).IsZero() {
		return nil, errors.New("never fires (no date matches every field, such as 30 February)")
	}
	return s, nil
}

// checkZonePrefix refuses CRON_TZ= or TZ= without a zone name or without a
// spec after it.
func checkZonePrefix(spec string) error {
	var prefix string
	switch {
	case strings.HasPrefix(spec, "CRON_TZ="):
		prefix = "CRON_TZ="
	case strings.HasPrefix(spec, "TZ="):
		prefix = "TZ="
	default:
		return nil
	}
	zone, rest, _ := strings.Cut(spec[len(prefix):], " ")
	switch {
	case zone == "":
		return fmt.Errorf("%s needs a zone name right after it, such as %sEurope/Berlin 0 30 9 * * *", prefix, prefix)
	case strings.TrimSpace(rest) == "":
		return fmt.Errorf("%s%s needs a cron spec after the zone, such as %s%s 0 30 9 * * *", prefix, zone, prefix, zone)
	}
	return nil
}

// quartzHint explains Quartz syntax that spring-fom users bring along.
func quartzHint(spec string) string {
	fields := strings.Fields(spec)
	if len(fields) > 0 && (strings.HasPrefix(fields[0], "CRON_TZ=") || strings.HasPrefix(fields[0], "TZ=")) {
		fields = fields[1:]
	}
	if len(fields) == 7 {
		return "7 fields: the Quartz year field is not supported; write 6 fields (seconds minutes hours day-of-month month day-of-week) or 5 without seconds"
	}
	for _, f := range fields {
		for _, part := range strings.Split(strings.ToUpper(f), ",") {
			switch {
			case strings.Contains(part, "#"):
				return fmt.Sprintf("%q: Quartz's nth weekday of the month (#) is not supported; schedule the weekday over the days it can fall on (such as 1-7 for the first) and check the day in the job", f)
			case part == "L" || part == "LW" || strings.HasPrefix(part, "L-") || (len(part) > 1 && strings.HasSuffix(part, "L") && isDigits(part[:len(part)-1])):
				return fmt.Sprintf("%q: Quartz's last-day (L) is not supported; schedule days 28-31 and check in the job whether tomorrow is the 1st", f)
			case len(part) > 1 && strings.HasSuffix(part, "W") && isDigits(part[:len(part)-1]):
				return fmt.Sprintf("%q: Quartz's nearest weekday (W) is not supported; schedule the days around it on MON-FRI and check the date in the job", f)
			}
		}
	}
	return ""
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}
