package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Names of the built-in keys. They follow spring-fom so that operators
// moving from it find the same words.
const (
	KeyName                         = "name"
	KeyCron                         = "cron"
	KeyFixedRate                    = "fixedRate"
	KeyFixedDelay                   = "fixedDelay"
	KeyInitialDelay                 = "initialDelay"
	KeyDeadTime                     = "deadTime"
	KeyExecOnLoad                   = "execOnLoad"
	KeyEnable                       = "enable"
	KeyThreadCore                   = "threadCore"
	KeyThreadMax                    = "threadMax"
	KeyThreadAliveTime              = "threadAliveTime"
	KeyQueueSize                    = "queueSize"
	KeyTaskOverTime                 = "taskOverTime"
	KeyDetectTimeoutOnEachTask      = "detectTimeoutOnEachTask"
	KeyEnableTaskConflict           = "enableTaskConflict"
	KeyIgnoreExecRequestWhenRunning = "ignoreExecRequestWhenRunning"
	KeyRemark                       = "remark"
	KeyMisfire                      = "misfire"
)

// Bounds on values, chosen so that a typo cannot turn a schedule into a
// busy loop or a pool into millions of goroutines. The README's key table
// documents them.
const (
	// MinInterval is the shortest fixedRate or fixedDelay: 100 rounds a
	// second. A shorter period is a busy loop, not a schedule.
	MinInterval = 10 * time.Millisecond
	// MinTaskOverTime is the shortest task timeout other than 0 (none).
	MinTaskOverTime = time.Millisecond
	// MaxThreads bounds threadMax (and so threadCore).
	MaxThreads = 10_000
	// MaxQueueSize bounds queueSize.
	MaxQueueSize = 1_000_000
	// MaxValueLen bounds a built-in key's value in bytes, remark included:
	// the admin page shows values on every refresh.
	MaxValueLen = 1024
	// MaxCustomValueLen bounds a custom key's value in bytes.
	MaxCustomValueLen = 64 << 10
)

// builtin describes one built-in key.
type builtin struct {
	name     string
	def      string
	editable bool
	doc      string
	parse    func(string) error
}

// builtins lists the built-in keys in the order the admin page shows them.
// It is a function, not a package variable, so that no package-level state
// exists.
func builtins() []builtin {
	return []builtin{
		{KeyName, "", false, "unique schedule name", parseName},
		{KeyCron, "", true, "cron spec (seconds optional, descriptors, CRON_TZ=)", parseCronValue},
		{KeyFixedRate, "", true, "next round = last round's planned fire + rate (at least 10ms)", parseOptionalInterval},
		{KeyFixedDelay, "", true, "next round = last round's end + delay (at least 10ms)", parseOptionalInterval},
		{KeyInitialDelay, "0s", false, "wait before the first round after each start", parseNonNegativeDuration},
		{KeyDeadTime, "", false, "RFC 3339 time after which the schedule shuts itself down", parseOptionalTime},
		{KeyExecOnLoad, "false", true, "run the first round at once on each start", parseBoolValue},
		{KeyEnable, "true", true, "start with the app (takes effect at the next app start)", parseBoolValue},
		{KeyThreadCore, "1", true, "workers kept alive when idle", intBetween(0, MaxThreads)},
		{KeyThreadMax, "1", true, "tasks running at once", intBetween(1, MaxThreads)},
		{KeyThreadAliveTime, "10s", true, "idle time before a worker above threadCore exits", parsePositiveDuration},
		{KeyQueueSize, "256", true, "tasks that may wait for a worker; more are rejected", intBetween(0, MaxQueueSize)},
		{KeyTaskOverTime, "0s", true, "task timeout (0 = none, else at least 1ms)", parseTaskOverTime},
		{KeyDetectTimeoutOnEachTask, "true", true, "time each task from its own start; false: one deadline per round from submission", parseBoolValue},
		{KeyEnableTaskConflict, "false", true, "skip a task whose id is still running in any schedule of the app", parseBoolValue},
		{KeyIgnoreExecRequestWhenRunning, "true", true, "exec-now while running: refuse (true) or queue one re-run (false)", parseBoolValue},
		{KeyRemark, "", true, "description shown in the admin page (at most 1024 bytes)", func(string) error { return nil }},
		{KeyMisfire, MisfireOnce, true, "in a cluster, a fire missed while its instance was gone: once (run it once, at once) or skip", parseMisfire},
	}
}

// ParseDuration parses a Go duration. A bare number is refused rather than
// guessed as seconds or milliseconds.
func ParseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New("empty duration")
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil && s != "0" {
		return 0, fmt.Errorf("a duration needs a unit, such as %ss or %sms", s, s)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("not a duration (use Go syntax such as 1500ms, 30s, 5m): %s", s)
	}
	return d, nil
}

// ParseBool accepts true/false (any case), 1/0, yes/no and on/off.
func ParseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1", "yes", "on":
		return true, nil
	case "false", "0", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("not a boolean (use true or false): %s", s)
}

// MaxNameLen bounds a schedule name.
const MaxNameLen = 128

// parseName accepts names the admin page and API can serve as one path
// segment: ASCII letters, digits, '-', '_' and '.', not "." or "..".
func parseName(s string) error {
	switch {
	case s == "":
		return errors.New("empty name")
	case s == "." || s == "..":
		return fmt.Errorf("name %q is a path step; use letters, digits, '-', '_' and '.'", s)
	case len(s) > MaxNameLen:
		return fmt.Errorf("name of %d bytes, at most %d", len(s), MaxNameLen)
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if !ok {
			return fmt.Errorf("name %q contains %q; use ASCII letters, digits, '-', '_' and '.'", s, r)
		}
	}
	return nil
}

func parseCronValue(s string) error {
	if s == "" {
		return nil
	}
	if _, err := ParseCron(s); err != nil {
		return fmt.Errorf("bad cron spec: %v", err)
	}
	return nil
}

func parseOptionalInterval(s string) error {
	if s == "" {
		return nil
	}
	d, err := ParseDuration(s)
	if err != nil {
		return err
	}
	if d < MinInterval {
		return fmt.Errorf("must be at least %s, got %s", MinInterval, s)
	}
	return nil
}

func parseTaskOverTime(s string) error {
	d, err := ParseDuration(s)
	if err != nil {
		return err
	}
	if d < 0 {
		return fmt.Errorf("must not be negative, got %s", s)
	}
	if d != 0 && d < MinTaskOverTime {
		return fmt.Errorf("must be 0 (no timeout) or at least %s, got %s", MinTaskOverTime, s)
	}
	return nil
}

func parsePositiveDuration(s string) error {
	d, err := ParseDuration(s)
	if err != nil {
		return err
	}
	if d <= 0 {
		return fmt.Errorf("must be greater than zero, got %s", s)
	}
	return nil
}

func parseNonNegativeDuration(s string) error {
	d, err := ParseDuration(s)
	if err != nil {
		return err
	}
	if d < 0 {
		return fmt.Errorf("must not be negative, got %s", s)
	}
	return nil
}

func parseOptionalTime(s string) error {
	if s == "" {
		return nil
	}
	if _, err := time.Parse(time.RFC3339, s); err != nil {
		return fmt.Errorf("not an RFC 3339 time such as 2026-01-02T15:04:05Z: %s", s)
	}
	return nil
}

// Misfire policies.
const (
	MisfireOnce = "once"
	MisfireSkip = "skip"
)

func parseMisfire(s string) error {
	if s != MisfireOnce && s != MisfireSkip {
		return fmt.Errorf("must be %s or %s, got %s", MisfireOnce, MisfireSkip, s)
	}
	return nil
}

func parseBoolValue(s string) error {
	_, err := ParseBool(s)
	return err
}

func intBetween(lo, hi int) func(string) error {
	return func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("not an integer: %s", s)
		}
		if n < lo || n > hi {
			return fmt.Errorf("must be between %d and %d, got %d", lo, hi, n)
		}
		return nil
	}
}
