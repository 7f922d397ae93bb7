package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/fom-go/fom/config"
	"github.com/fom-go/fom/fom"
)

// knobs has custom knobs, a boolean one among them, and a boolean built-in
// key tagged "yes".
type knobs struct {
	fom.Schedule `name:"knobs" fixedRate:"1h" enableTaskConflict:"yes"`
	Batch        fom.Value[int]  `fom:"batch" default:"10" min:"1" max:"10000"`
	DryRun       fom.Value[bool] `fom:"dryRun" default:"false"`
}

func (*knobs) Run(context.Context) (any, error) { return nil, nil }

// TestConfigEditor: the job's knobs come first, then the built-in keys by
// group; booleans are toggles that save on and off (a tag's "yes" left as
// it is is no edit); numbers and durations show their unit and bounds;
// fixed keys are shown but are not inputs.
func TestConfigEditor(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	if _, err := f.app.Register(&knobs{}); err != nil {
		t.Fatal(err)
	}
	page := f.do("GET", "/fom/schedules/knobs", "").body
	var order []string
	for _, part := range strings.Split(page, `<legend>`)[1:] {
		order = append(order, part[:strings.Index(part, "<")])
	}
	want := "Job settings (declared by the job)|Plan: when rounds fire|Pool: workers and queue|Timeouts|Behaviour"
	if strings.Join(order, "|") != want {
		t.Fatalf("groups %q, want %q", order, want)
	}
	job := page[strings.Index(page, "Job settings"):strings.Index(page, "Plan: when")]
	if !strings.Contains(job, `data-testid="entry-batch"`) || !strings.Contains(job, `data-testid="entry-dryRun"`) || strings.Contains(job, "entry-threadMax") {
		t.Fatal("the job group does not hold exactly the job's knobs")
	}
	for _, s := range []string{
		`type="checkbox" role="switch" id="cfg-dryRun" name="cfg.dryRun" value="true" data-testid="input-dryRun"`,
		`id="cfg-enableTaskConflict" name="cfg.enableTaskConflict" value="true" checked`,
		`data-testid="hint-threadMax">workers, 1–10000<`,
		`data-testid="hint-fixedRate">Go duration (30s, 5m); empty or at least 10ms<`,
		`inputmode="numeric"`,
		`<code data-testid="value-name">knobs</code>`,
	} {
		if !strings.Contains(page, s) {
			t.Errorf("the editor lacks %s", s)
		}
	}
	if strings.Contains(page, `name="cfg.name"`) || strings.Contains(page, `name="cfg.initialDelay"`) {
		t.Error("a fixed key is an input")
	}

	cookie, token := f.csrf()
	post := func(form url.Values) resp {
		form.Set("csrf_token", token)
		return f.do("POST", "/fom/schedules/knobs/config", form.Encode(), "Cookie", cookie, "Content-Type", "application/x-www-form-urlencoded")
	}
	cfg := f.app.Schedule("knobs").Config()
	// The form as the browser sends it untouched: nothing changes.
	untouched := url.Values{"cfg.dryRun": {"false"}, "cfg.enableTaskConflict": {"false", "true"}, "cfg.batch": {"10"}, "cfg.threadMax": {"1"}}
	if r := post(untouched); r.status != http.StatusSeeOther || !strings.Contains(r.header.Get("Location"), "nothing+changed") && !strings.Contains(r.header.Get("Location"), "nothing%20changed") {
		t.Fatalf("untouched form: %d %v", r.status, r.header)
	}
	if src := sourceOf(cfg, "enableTaskConflict"); src != "tag" {
		t.Fatalf("an untouched yes became %s", src)
	}
	// Toggle dryRun on and enableTaskConflict off.
	if r := post(url.Values{"cfg.dryRun": {"false", "true"}, "cfg.enableTaskConflict": {"false"}}); r.status != http.StatusSeeOther {
		t.Fatalf("toggles: %d %s", r.status, r.body)
	}
	if cfg.Get("dryRun") != "true" || cfg.Get("enableTaskConflict") != "false" {
		t.Fatalf("after toggling: dryRun=%s enableTaskConflict=%s", cfg.Get("dryRun"), cfg.Get("enableTaskConflict"))
	}
	var entries []entryView
	f.do("GET", "/fom/api/schedules/knobs/config", "").expect(t, 200, "ok").data(t, &entries)
	for _, e := range entries {
		if e.Key == "taskOverTime" && (e.Group != "timeouts" || e.Kind != "duration" || e.Hint == "") {
			t.Fatalf("API entry %+v", e)
		}
		if e.Key == "batch" && (e.Group != "job" || e.Kind != "int" || e.Hint != "integer, 1 to 10000") {
			t.Fatalf("a bounded knob %+v", e)
		}
	}
	// A knob's bounds hold for the page's edits as for a built-in key's.
	if r := f.do("PATCH", "/fom/api/schedules/knobs/config", `{"batch":"-5"}`); r.status != http.StatusBadRequest || !strings.Contains(r.body, "must be between 1 and 10000, got -5") {
		t.Fatalf("batch -5: %d %s", r.status, r.body)
	}
	if !strings.Contains(f.do("GET", "/fom/schedules/knobs", "").body, "integer, 1 to 10000") {
		t.Fatal("the editor does not show the knob's bounds")
	}
}

func sourceOf(cfg *config.Config, key string) string {
	for _, e := range cfg.Entries() {
		if e.Key == key {
			return e.Source.String()
		}
	}
	return ""
}
