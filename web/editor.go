package web

import (
	"strconv"
	"strings"

	"github.com/a-h/templ"

	"github.com/fom-go/fom/config"
)

// The config editor shows the job's own knobs first, then the built-in
// keys in groups; each key says its kind (booleans are toggles), its unit
// and its bounds. This is presentation only: config validates every value.

// Editor groups, in the order the page shows them.
const (
	groupJob       = "job"
	groupPlan      = "plan"
	groupPool      = "pool"
	groupTimeouts  = "timeouts"
	groupBehaviour = "behaviour"
)

func groupTitle(g string) string {
	switch g {
	case groupJob:
		return "Job settings (declared by the job)"
	case groupPlan:
		return "Plan: when rounds fire"
	case groupPool:
		return "Pool: workers and queue"
	case groupTimeouts:
		return "Timeouts"
	}
	return "Behaviour"
}

// Kinds of values, for inputs and hints.
const (
	kindBool     = "bool"
	kindDuration = "duration"
	kindInt      = "int"
	kindText     = "text"
)

// keyMeta is how the editor presents a key.
type keyMeta struct {
	Group, Kind, Hint string
}

// metaOf returns the presentation of a built-in key, or of a custom one
// (a boolean when its default is one).
func metaOf(e entryView) keyMeta {
	if e.Custom {
		switch e.Kind { // the field's type, with the bounds of its tag
		case kindBool, kindDuration, kindInt:
			return keyMeta{groupJob, e.Kind, customHint(e)}
		case "number":
			return keyMeta{groupJob, kindText, customHint(e)}
		case "":
		default:
			return keyMeta{groupJob, kindText, e.Hint}
		}
		if _, err := config.ParseBool(e.Default); err == nil && e.Default != "" && e.Default != "0" && e.Default != "1" {
			return keyMeta{groupJob, kindBool, ""}
		}
		return keyMeta{groupJob, kindText, ""}
	}
	interval := "Go duration (30s, 5m); empty or at least " + config.MinInterval.String()
	switch e.Key {
	case config.KeyCron:
		return keyMeta{groupPlan, kindText, "6 fields with seconds, 5 without, or @every/@daily; CRON_TZ=Zone first for a zone"}
	case config.KeyFixedRate, config.KeyFixedDelay:
		return keyMeta{groupPlan, kindDuration, interval}
	case config.KeyInitialDelay:
		return keyMeta{groupPlan, kindDuration, "Go duration, 0s or more"}
	case config.KeyDeadTime:
		return keyMeta{groupPlan, kindText, "RFC 3339 time, e.g. 2026-12-31T23:00:00Z"}
	case config.KeyExecOnLoad:
		return keyMeta{groupPlan, kindBool, ""}
	case config.KeyMisfire:
		return keyMeta{groupPlan, kindText, config.MisfireOnce + " or " + config.MisfireSkip}
	case config.KeyThreadCore:
		return keyMeta{groupPool, kindInt, "workers, 0–" + strconv.Itoa(config.MaxThreads)}
	case config.KeyThreadMax:
		return keyMeta{groupPool, kindInt, "workers, 1–" + strconv.Itoa(config.MaxThreads)}
	case config.KeyQueueSize:
		return keyMeta{groupPool, kindInt, "tasks, 0–" + strconv.Itoa(config.MaxQueueSize)}
	case config.KeyThreadAliveTime:
		return keyMeta{groupPool, kindDuration, "Go duration, more than 0"}
	case config.KeyTaskOverTime:
		return keyMeta{groupTimeouts, kindDuration, "Go duration; 0s for none, else at least " + config.MinTaskOverTime.String()}
	case config.KeyDetectTimeoutOnEachTask:
		return keyMeta{groupTimeouts, kindBool, ""}
	case config.KeyEnable, config.KeyEnableTaskConflict, config.KeyIgnoreExecRequestWhenRunning:
		return keyMeta{groupBehaviour, kindBool, ""}
	case config.KeyRemark:
		return keyMeta{groupBehaviour, kindText, "at most " + strconv.Itoa(config.MaxValueLen) + " bytes"}
	}
	return keyMeta{groupBehaviour, kindText, ""}
}

// customHint is a custom key's unit and bounds.
func customHint(e entryView) string {
	unit := map[string]string{kindDuration: "Go duration", kindInt: "integer", "number": "number"}[e.Kind]
	switch {
	case unit == "":
		return e.Hint
	case e.Hint == "":
		return unit
	}
	return unit + ", " + e.Hint
}

// cfgGroup is one group of the editor.
type cfgGroup struct {
	Title   string
	Entries []cfgEntry
}

// groupEntries orders entries into the editor's groups, dropping empty
// ones; within a group, the keys keep config's order.
func groupEntries(entries []cfgEntry) []cfgGroup {
	order := []string{groupJob, groupPlan, groupPool, groupTimeouts, groupBehaviour}
	by := map[string][]cfgEntry{}
	for _, e := range entries {
		by[e.Group] = append(by[e.Group], e)
	}
	var out []cfgGroup
	for _, g := range order {
		if len(by[g]) > 0 {
			out = append(out, cfgGroup{Title: groupTitle(g), Entries: by[g]})
		}
	}
	return out
}

// isOn reports whether a boolean value is true; a value that is not a
// boolean counts as off.
func isOn(v string) bool {
	b, err := config.ParseBool(v)
	return err == nil && b
}

// sameValue reports whether a form's value for key leaves it as it is: the
// same text, or for a boolean the same truth ("yes" and "true").
func sameValue(kind, cur, typed string) bool {
	if strings.TrimSpace(cur) == strings.TrimSpace(typed) {
		return true
	}
	if kind != kindBool {
		return false
	}
	a, errA := config.ParseBool(cur)
	b, errB := config.ParseBool(typed)
	return errA == nil && errB == nil && a == b
}

// inputMode is the keyboard a phone offers for a kind.
func inputMode(kind string) templ.Attributes {
	if kind == kindInt {
		return templ.Attributes{"inputmode": "numeric"}
	}
	return nil
}
