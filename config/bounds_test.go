package config

import (
	"strings"
	"testing"
)

// TestBadValuesAreRefusedWithTheirReason covers every class of nonsense an
// operator or a tag can give: each is refused, naming schedule, key and
// value, and nothing is applied.
func TestBadValuesAreRefusedWithTheirReason(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key, value, want string
	}{
		{"cron", "CRON_TZ=Europe/Berlin", "needs a cron spec after the zone"},
		{"cron", "TZ=", "needs a zone name"},
		{"cron", "CRON_TZ= 0 * * * *", "needs a zone name"},
		{"cron", "CRON_TZ=Mars/Olympus 0 * * * *", "unknown time zone"},
		{"cron", "0 0 0 30 2 *", "never fires"},
		{"cron", "0 0 0 31 4,6,9,11 *", "never fires"},
		{"cron", "0 0 12 L * ?", "Quartz's last-day (L) is not supported"},
		{"cron", "0 0 12 ? * 6L", "Quartz's last-day (L) is not supported"},
		{"cron", "0 0 12 15W * ?", "Quartz's nearest weekday (W) is not supported"},
		{"cron", "0 0 12 ? * 6#3", "Quartz's nth weekday of the month (#) is not supported"},
		{"cron", "0 0 12 * * ? 2027", "Quartz year field is not supported"},
		{"cron", "*/0 * * * * *", "bad cron spec"},
		{"fixedRate", "1ns", "must be at least 10ms"},
		{"fixedRate", "9ms", "must be at least 10ms"},
		{"fixedDelay", "1us", "must be at least 10ms"},
		{"fixedRate", "10", "needs a unit"},
		{"taskOverTime", "1ns", "must be 0 (no timeout) or at least 1ms"},
		{"taskOverTime", "-1s", "must not be negative"},
		{"threadMax", "1000000000", "must be between 1 and 10000"},
		{"threadCore", "10001", "must be between 0 and 10000"},
		{"queueSize", "1000000000", "must be between 0 and 1000000"},
		{"threadMax", "4.5", "not an integer"},
		{"remark", strings.Repeat("x", 900<<10), "too long: 921600 bytes, at most 1024"},
		{"deadTime", "2020-01-01T00:00:00Z", "is not editable at runtime"},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+clip(tt.value), func(t *testing.T) {
			t.Parallel()
			c, err := New("job", Spec{Tags: map[string]string{"cron": "0 * * * * *"}})
			if err != nil {
				t.Fatal(err)
			}
			before := c.Values()
			err = c.Apply(map[string]string{tt.key: tt.value})
			if err == nil {
				t.Fatalf("%s=%q accepted", tt.key, tt.value)
			}
			msg := err.Error()
			for _, want := range []string{`schedule "job"`, `key "` + tt.key + `"`, tt.want} {
				if !strings.Contains(msg, want) {
					t.Errorf("message lacks %q: %s", want, msg)
				}
			}
			if len(msg) > 600 {
				t.Errorf("message of %d bytes repeats the value: %.200s", len(msg), msg)
			}
			if after := c.Values(); after["cron"] != before["cron"] || after[tt.key] != before[tt.key] {
				t.Errorf("half applied: %q -> %q", before[tt.key], after[tt.key])
			}
			// The same value in a tag is refused as well, never a panic.
			if tt.key != "deadTime" {
				if _, err := New("job", Spec{Tags: map[string]string{tt.key: tt.value}}); err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("as a tag: %v", err)
				}
			}
		})
	}
}

func TestValuesAreTrimmedExceptVerbatimCustomOnes(t *testing.T) {
	t.Parallel()
	c, err := New("job", Spec{
		Tags:   map[string]string{"threadMax": " 4 ", "cron": "  0 * * * * *\t"},
		Custom: []CustomKey{{Name: "greeting", Default: " hi ", Verbatim: true}, {Name: "batch", Default: " 5 "}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(map[string]string{"threadCore": " 2 ", "remark": "  nightly  "}); err != nil {
		t.Fatal(err)
	}
	got := c.Values()
	want := map[string]string{"threadMax": "4", "cron": "0 * * * * *", "threadCore": "2", "remark": "nightly", "greeting": " hi ", "batch": "5"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for _, e := range c.Entries() {
		if e.Key == "threadCore" && (e.Value != "2" || e.Source != SourcePersisted) {
			t.Errorf("entry %+v", e)
		}
	}
}

func TestCustomKeyCollisionsNameTheField(t *testing.T) {
	t.Parallel()
	_, err := New("job", Spec{Custom: []CustomKey{
		{Name: "threadMax", Field: "Job.Workers", Doc: "int (field Workers)"},
		{Name: "batch", Field: "Job.Batch", Doc: "int (field Batch)"},
		{Name: "batch", Field: "Job.Size", Doc: "int (field Size)"},
		{Name: "", Field: "Job.Nameless"},
	}})
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		`field Job.Workers: "threadMax" is a built-in key`,
		`field Job.Size: key "batch" is already declared by int (field Batch)`,
		`field Job.Nameless: empty key name`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %q: %v", want, err)
		}
	}
}

// TestNamesTheAdminPageCanServe: a schedule name is one path segment.
func TestNamesTheAdminPageCanServe(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"a;b", "a,b", ".", "..", "a/b", "a b", "a%2F", "ä", "a?b", "a#b", strings.Repeat("n", 129)} {
		if _, err := New(bad, Spec{}); err == nil || !strings.Contains(err.Error(), `key "name"`) {
			t.Errorf("name %q: %v", bad, err)
		}
		if _, err := New(bad, Spec{Tags: map[string]string{"name": bad}}); err == nil {
			t.Errorf("tagged name %q accepted", bad)
		}
	}
	for _, good := range []string{"cleanup", "sync.orders", "a-b_c.9", "A"} {
		if _, err := New(good, Spec{}); err != nil {
			t.Errorf("name %q: %v", good, err)
		}
	}
}

// TestReloadPutsEditsSavedElsewhereInForce without saving them again.
func TestReloadPutsEditsSavedElsewhereInForce(t *testing.T) {
	t.Parallel()
	saver := &failingSaver{}
	c, err := New("job", Spec{Tags: map[string]string{"cron": "0 * * * * *"}, Persister: saver})
	if err != nil {
		t.Fatal(err)
	}
	var seen []Change
	c.Subscribe(func(ch Change) { seen = append(seen, ch) })
	warnings, err := c.Reload(map[string]string{"threadMax": "4", "queueSize": "lots", "gone": "x"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Get("threadMax") != "4" || c.Get("queueSize") != "256" || len(warnings) != 2 || saver.calls.Load() != 0 {
		t.Fatalf("values %v, warnings %v, saves %d", c.Values(), warnings, saver.calls.Load())
	}
	if len(seen) != 1 || seen[0].Changed[0] != "threadMax" {
		t.Fatalf("subscribers saw %+v", seen)
	}
	if _, err := c.Reload(map[string]string{"threadMax": "4"}); err != nil || len(seen) != 1 {
		t.Fatalf("an unchanged reload notified: %v %d", err, len(seen))
	}
	if !c.HasEdits(c.Edits()) || c.HasEdits(map[string]string{"threadMax": "5"}) || c.HasEdits(nil) {
		t.Fatalf("HasEdits does not tell the edits in force %v", c.Edits())
	}
	if _, err := c.Reload(nil); err != nil || c.Get("threadMax") != "1" {
		t.Fatalf("edits reset elsewhere: %v %q", err, c.Get("threadMax"))
	}
	if !c.HasEdits(nil) || !c.HasEdits(map[string]string{}) {
		t.Fatal("no edits in force, and HasEdits says otherwise")
	}
}
