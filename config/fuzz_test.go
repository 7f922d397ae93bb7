package config

import (
	"maps"
	"testing"
)

// The seeds below run in every `go test`; `go test -fuzz FuzzX ./config`
// explores further. Every input that once crashed is kept as a seed.

func FuzzParseCron(f *testing.F) {
	for _, s := range []string{
		"0 * * * * *", "*/15 * * * *", "@hourly", "@every 90s", "@every -1s", "CRON_TZ=Europe/Berlin 30 2 * * *",
		"CRON_TZ=Europe/Berlin", "TZ=", "CRON_TZ=", "TZ=UTC", "CRON_TZ= ", "0 0 0 30 2 *", "0 0 12 L * ?", "0 0 12 ? * 6#3",
		"0 0 12 * * ? 2027", "1-0 * * * *", "*/0 * * * *", "0-99999999999999999999 * * * *", "@", "@every", "? ? ? ? ?",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := ParseCron(spec)
		if err != nil {
			return
		}
		if s.Next(cronProbe()).IsZero() {
			t.Fatalf("%q accepted but never fires", spec)
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"1500ms", "30s", "10", "0", "-1s", "1e3s", "", "1h1h", ".s", "9223372036854775807ns"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err == nil && d != 0 && s == "0" {
			t.Fatalf("%q parsed as %v", s, d)
		}
	})
}

// FuzzApply edits one key of a configured schedule: the edit is applied
// whole or not at all, and the settings always match the values.
func FuzzApply(f *testing.F) {
	for _, kv := range [][2]string{
		{"cron", ""}, {"fixedRate", ""}, {"cron", "TZ="}, {"threadMax", " 4 "}, {"threadMax", "1000000000"},
		{"queueSize", "-1"}, {"remark", "<script>"}, {"fixedDelay", "1ns"}, {"enable", "maybe"}, {"batch", "x"},
		{"threadCore", "2"}, {"taskOverTime", "1ns"}, {"name", "other"}, {"deadTime", "2020-01-01T00:00:00Z"},
	} {
		f.Add(kv[0], kv[1])
	}
	f.Fuzz(func(t *testing.T, key, value string) {
		c, err := New("job", Spec{
			Tags:   map[string]string{"cron": "0 * * * * *", "threadMax": "2"},
			Custom: []CustomKey{{Name: "batch", Default: "5", Parse: func(s string) error { _, err := ParseDuration(s + "s"); return err }}},
		})
		if err != nil {
			t.Fatal(err)
		}
		before := c.Values()
		err = c.Apply(map[string]string{key: value})
		after := c.Values()
		if err != nil && !maps.Equal(before, after) {
			t.Fatalf("refused edit %s=%q changed values: %v -> %v", key, value, before, after)
		}
		s, serr := settingsFrom(after)
		if serr != nil || s != c.Settings() {
			t.Fatalf("settings do not match values after %s=%q: %v", key, value, serr)
		}
		if _, err := New("job", Spec{Tags: map[string]string{"cron": "0 * * * * *"}, Persisted: map[string]string{key: value}}); err != nil {
			t.Fatalf("a persisted value must never fail the build: %v", err)
		}
	})
}
