package config

import (
	"strconv"
	"strings"
	"time"
)

// Settings is the typed view of a schedule's built-in keys. The engine reads
// it; operators change it through Config.Apply. A Settings value is never
// modified after it is published.
type Settings struct {
	Name                         string
	Cron                         string // empty: no cron plan
	FixedRate                    time.Duration
	FixedDelay                   time.Duration
	InitialDelay                 time.Duration
	DeadTime                     time.Time // zero: none
	ExecOnLoad                   bool
	Enable                       bool
	ThreadCore                   int
	ThreadMax                    int
	ThreadAliveTime              time.Duration
	QueueSize                    int
	TaskOverTime                 time.Duration // zero: no timeout
	DetectTimeoutOnEachTask      bool
	EnableTaskConflict           bool
	IgnoreExecRequestWhenRunning bool
	Remark                       string
	Misfire                      string // MisfireOnce or MisfireSkip
}

// DefaultSettings returns the settings of a schedule that sets no key.
func DefaultSettings(name string) Settings {
	v := map[string]string{}
	for _, b := range builtins() {
		v[b.name] = b.def
	}
	v[KeyName] = name
	s, _ := settingsFrom(v) // defaults always parse
	return s
}

// settingsFrom builds Settings from validated string values.
func settingsFrom(v map[string]string) (Settings, error) {
	var s Settings
	var err error
	dur := func(k string) time.Duration {
		if v[k] == "" || err != nil {
			return 0
		}
		var d time.Duration
		d, err = ParseDuration(v[k])
		return d
	}
	boolean := func(k string) bool {
		if err != nil {
			return false
		}
		var b bool
		b, err = ParseBool(v[k])
		return b
	}
	integer := func(k string) int {
		if err != nil {
			return 0
		}
		var n int
		n, err = strconv.Atoi(strings.TrimSpace(v[k]))
		return n
	}
	s.Name = v[KeyName]
	s.Cron = v[KeyCron]
	s.FixedRate = dur(KeyFixedRate)
	s.FixedDelay = dur(KeyFixedDelay)
	s.InitialDelay = dur(KeyInitialDelay)
	if v[KeyDeadTime] != "" && err == nil {
		s.DeadTime, err = time.Parse(time.RFC3339, v[KeyDeadTime])
	}
	s.ExecOnLoad = boolean(KeyExecOnLoad)
	s.Enable = boolean(KeyEnable)
	s.ThreadCore = integer(KeyThreadCore)
	s.ThreadMax = integer(KeyThreadMax)
	s.ThreadAliveTime = dur(KeyThreadAliveTime)
	s.QueueSize = integer(KeyQueueSize)
	s.TaskOverTime = dur(KeyTaskOverTime)
	s.DetectTimeoutOnEachTask = boolean(KeyDetectTimeoutOnEachTask)
	s.EnableTaskConflict = boolean(KeyEnableTaskConflict)
	s.IgnoreExecRequestWhenRunning = boolean(KeyIgnoreExecRequestWhenRunning)
	s.Remark = v[KeyRemark]
	s.Misfire = v[KeyMisfire]
	return s, err
}

// PlanKind names the plan a Settings value selects.
func (s Settings) PlanKind() string {
	switch {
	case s.Cron != "":
		return KeyCron
	case s.FixedRate > 0:
		return KeyFixedRate
	case s.FixedDelay > 0:
		return KeyFixedDelay
	}
	return ""
}
