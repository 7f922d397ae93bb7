package web

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/statistics"
	"github.com/fom-go/fom/store"
)

// stuckJob's task ignores its context and its timeout.
type stuckJob struct {
	fom.Schedule `name:"stuck" execOnLoad:"true" fixedRate:"1h" taskOverTime:"20ms"`
	release      chan struct{}
}

func (j *stuckJob) Run(context.Context) (any, error) { <-j.release; return nil, nil }

func TestStalledScheduleIsShownAsStalled(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	job := &stuckJob{release: make(chan struct{})}
	defer close(job.release)
	if _, err := f.app.Register(job); err != nil {
		t.Fatal(err)
	}
	var v scheduleView
	deadline := time.Now().Add(5 * time.Second)
	// The task counts as abandoned once its timeout is decided, a moment
	// before the outcome reaches the statistics: wait for both.
	for !v.Stalled || v.Counts["timeout"] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("never stalled with its timeout counted: %+v", v)
		}
		time.Sleep(5 * time.Millisecond)
		f.do("GET", "/fom/api/schedules/stuck", "").expect(t, 200, "ok").data(t, &v)
	}
	if v.Abandoned != 1 || v.Counts["timeout"] != 1 {
		t.Fatalf("view %+v", v)
	}
	table := f.do("GET", "/fom/fragments/schedules", "").body
	row := table[strings.Index(table, `data-testid="row-stuck"`):]
	row = row[:strings.Index(row, "</tr>")]
	if !strings.Contains(row, `data-testid="stalled"`) || !strings.Contains(row, "held by tasks past their timeout") {
		t.Fatalf("row does not show the stall: %s", row)
	}
	if page := f.do("GET", "/fom/schedules/stuck", "").body; !strings.Contains(page, `data-testid="stall-reason"`) {
		t.Fatal("schedule page does not say why")
	}
	if alpha := f.do("GET", "/fom/fragments/schedules", "").body; strings.Count(alpha, `data-testid="stalled"`) != 1 {
		t.Fatal("only the stuck schedule is stalled")
	}
}

// TestUnsavedFailuresAreShown: failures dropped before a flush are counted
// on the schedule page and in the statistics API.
func TestUnsavedFailuresAreShown(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	st := f.app.Schedule("beta").Stats()
	for range 150 {
		st.Record(statistics.Sample{TaskID: "beta", Status: statistics.Failed})
	}
	page := f.do("GET", "/fom/schedules/beta", "").body
	if !strings.Contains(page, "50 failures since the start were not saved") {
		t.Fatal("the page does not show the unsaved failures")
	}
	var body struct {
		Unsaved int64 `json:"unsavedFailures"`
	}
	f.do("GET", "/fom/api/schedules/beta/stats", "").expect(t, 200, "ok").data(t, &body)
	if body.Unsaved != 50 {
		t.Fatalf("API unsaved %d", body.Unsaved)
	}
}

// TestEditAfterTheStoreFileWasRemoved is refused, not acknowledged and
// lost; Stop reports the statistics it could not save.
func TestEditAfterTheStoreFileWasRemoved(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	app, err := fom.New(fom.WithDataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := app.Register(&alpha{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHandler(app, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, app: app, h: h, dir: dir}
	if err := os.Remove(filepath.Join(dir, "fom.db")); err != nil {
		t.Fatal(err)
	}
	r := f.do("PATCH", "/fom/api/schedules/alpha/config", `{"remark":"lost?"}`)
	if r.status != 503 || !strings.Contains(r.env.Msg, "removed or replaced") || !strings.Contains(r.env.Msg, "fom.db") {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if got := sc.Config().Get("remark"); got == "lost?" {
		t.Fatal("the refused edit is in force")
	}
	sc.Stats().Record(statistics.Sample{TaskID: "alpha", Status: statistics.Failed})
	if err := app.Stop(context.Background()); !errors.Is(err, store.ErrGone) {
		t.Fatalf("stop: %v", err)
	}
}

// failsOnce fails its first round and succeeds after.
type failsOnce struct {
	fom.Schedule `name:"flaky" execOnLoad:"true" fixedRate:"1h"`
	runs         int
}

func (j *failsOnce) Run(context.Context) (any, error) {
	j.runs++
	if j.runs == 1 {
		return nil, errors.New("first run fails")
	}
	return "ok", nil
}

// TestTableAndMetricsTellTheLastRound: the row shows the last round's
// outcome with a relative time (absolute on hover), colours only a
// non-zero count of tasks not ok, and /metrics has the last success and
// outcome an alert can use.
func TestTableAndMetricsTellTheLastRound(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	if _, err := f.app.Register(&failsOnce{}); err != nil {
		t.Fatal(err)
	}
	f.sleeping("flaky")
	row := func(name string) string {
		table := f.do("GET", "/fom/fragments/schedules", "").body
		r := table[strings.Index(table, `data-testid="row-`+name+`"`):]
		return r[:strings.Index(r, "</tr>")]
	}
	r := row("flaky")
	for _, want := range []string{`data-testid="outcome">failed<`, `class="num bad" data-label="not ok" data-testid="failed">1<`, `data-testid="last" title="20`, "no full success since the start", " ms late",
		`data-health="failing"`, `data-testid="failing">failing since `, `(1 round), no success since the start<`, `data-testid="last-error">first run fails<`} {
		if !strings.Contains(r, want) {
			t.Errorf("row lacks %q: %s", want, r)
		}
	}
	if a := row("alpha"); !strings.Contains(a, `class="num" data-label="not ok" data-testid="failed">0<`) {
		t.Errorf("a zero is coloured: %s", a)
	}
	metrics := f.do("GET", "/fom/metrics", "").body
	var list []scheduleView
	f.do("GET", "/fom/api/schedules", "").expect(t, 200, "ok").data(t, &list)
	for _, v := range list {
		if v.Name == "flaky" && (v.Health != "failing" || v.ConsecutiveFailures != 1 || v.FailingSince == nil || v.LastError != "first run fails" || v.LastOutcome != "failed") {
			t.Errorf("API: %+v", v)
		}
		if v.Name == "alpha" && v.ConsecutiveFailures != 0 {
			t.Errorf("API: %+v", v)
		}
	}
	if !strings.Contains(metrics, `fom_last_round_outcome{outcome="failed",schedule="flaky"} 1`) || strings.Contains(metrics, `fom_last_success_timestamp_seconds{schedule="flaky"}`) ||
		!strings.Contains(metrics, `fom_consecutive_failures{schedule="flaky"} 1`) {
		t.Fatalf("metrics after a failed round:\n%s", grepLines(metrics, "flaky"))
	}
	f.do("POST", "/fom/api/schedules/flaky/exec", "").expect(t, 200, "ok")
	f.sleeping("flaky")
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(row("flaky"), `>success<`); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no success shown")
		}
	}
	metrics = f.do("GET", "/fom/metrics", "").body
	if r := row("flaky"); !strings.Contains(r, `data-health="ok"`) || strings.Contains(r, "failing since") || strings.Contains(r, "last-error") {
		t.Errorf("after a success the row still fails: %s", r)
	}
	if !strings.Contains(metrics, `fom_last_round_outcome{outcome="success",schedule="flaky"} 1`) || !strings.Contains(metrics, `fom_last_success_timestamp_seconds{schedule="flaky"}`) ||
		!strings.Contains(metrics, `fom_consecutive_failures{schedule="flaky"} 0`) {
		t.Fatalf("metrics after a good round:\n%s", grepLines(metrics, "flaky"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestRelativeTimes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	for want, at := range map[string]time.Time{
		"—": {}, "now": now.Add(300 * time.Millisecond), "12 s ago": now.Add(-12 * time.Second), "in 12 s": now.Add(12 * time.Second),
		"3 min ago": now.Add(-3*time.Minute - 5*time.Second), "in 2 h": now.Add(2*time.Hour + time.Minute), "3 d ago": now.Add(-72 * time.Hour),
	} {
		if got := relTime(at, now); got != want {
			t.Errorf("%v: %q, want %q", at, got, want)
		}
	}
}

// TestAuditTrail: every operator action, carried out or refused, is
// recorded with who sent it and, for edits, the old and new values; the
// page and the API show it, newest first (it is in the store, like edits).
func TestAuditTrail(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{BasicAuthUser: "ops", BasicAuthPassword: "s3cret"})
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:s3cret"))
	f.do("PATCH", "/fom/api/schedules/alpha/config", `{"threadMax":"4","remark":"nightly"}`, "Authorization", auth).expect(t, 200, "ok")
	f.do("PATCH", "/fom/api/schedules/alpha/config", `{"threadMax":"0"}`, "Authorization", auth).expect(t, 400, "")
	f.do("PUT", "/fom/api/schedules/alpha/log-level", `{"level":"warn"}`, "Authorization", auth).expect(t, 200, "ok")
	f.do("POST", "/fom/api/schedules/alpha/stop", "", "Authorization", auth).expect(t, 200, "ok")
	f.do("DELETE", "/fom/api/schedules/alpha/config/threadMax", "", "Authorization", auth).expect(t, 200, "ok")
	var entries []store.AuditEntry
	f.do("GET", "/fom/api/schedules/alpha/audit", "", "Authorization", auth).expect(t, 200, "ok").data(t, &entries)
	want := []struct{ action, detail, outcome string }{
		{"reset", `threadMax: "4" → "1"`, "ok"},
		{"stop", "", "ok"},
		{"logLevel", `level: "info" → "warn"`, "ok"},
		{"config", `threadMax: "4" → "0"`, "must be between 1 and 10000"},
		{"config", `remark: "<script>alert('remark')</script>" → "nightly"; threadMax: "1" → "4"`, "ok"},
	}
	if len(entries) != len(want) {
		t.Fatalf("%d entries: %+v", len(entries), entries)
	}
	for i, w := range want {
		e := entries[i]
		if e.Action != w.action || e.Detail != w.detail || !strings.Contains(e.Outcome, w.outcome) || !strings.HasPrefix(e.Principal, "ops@") {
			t.Errorf("entry %d: %+v, want %+v", i, e, w)
		}
	}
	page := f.do("GET", "/fom/schedules/alpha", "", "Authorization", auth).body
	if strings.Count(page, `data-testid="audit-row"`) != 5 {
		t.Error("the page does not show the five actions")
	}
	f.do("GET", "/fom/api/schedules/alpha/audit?limit=0", "", "Authorization", auth).expect(t, 400, `limit "0": a number from 1 to 1000`)
}

// TestPlanPreview: the next fires of a plan being edited, in the spec's
// zone, before anything is saved; a plan fom would refuse says why.
func TestPlanPreview(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	var pv planPreview
	f.do("GET", "/fom/api/schedules/alpha/preview?"+url.Values{"cron": {"CRON_TZ=Europe/Berlin 0 30 9 * * MON-FRI"}, "fixedRate": {""}}.Encode(), "").expect(t, 200, "ok").data(t, &pv)
	if pv.Zone != "Europe/Berlin" || len(pv.Fires) != 5 || !strings.HasPrefix(pv.Plan, "cron CRON_TZ=Europe/Berlin") {
		t.Fatalf("preview %+v", pv)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	for i, fire := range pv.Fires {
		b := fire.In(berlin)
		if b.Hour() != 9 || b.Minute() != 30 || b.Weekday() == time.Saturday || b.Weekday() == time.Sunday || (i > 0 && !fire.After(pv.Fires[i-1])) {
			t.Fatalf("fire %d: %v", i, b)
		}
	}
	if f.app.Schedule("alpha").Config().Get("cron") != "" {
		t.Fatal("a preview saved the edit")
	}
	r := f.do("GET", "/fom/api/schedules/alpha/preview?"+url.Values{"cron": {"0 0 12 L * ?"}, "fixedRate": {""}}.Encode(), "")
	if r.status != 400 || !strings.Contains(r.env.Msg, "Quartz's last-day (L) is not supported") {
		t.Fatalf("bad cron: %d %s", r.status, r.body)
	}
	// The editor's fragment takes the form's fields.
	frag := f.do("GET", "/fom/schedules/alpha/preview?"+url.Values{"cfg.cron": {""}, "cfg.fixedRate": {"90m"}}.Encode(), "").body
	if !strings.Contains(frag, `data-testid="preview-fires"`) || strings.Count(frag, "<li>") != 5 || !strings.Contains(frag, "fixedRate 1h30m") {
		t.Fatalf("fragment: %s", frag)
	}
	if frag := f.do("GET", "/fom/schedules/alpha/preview?"+url.Values{"cfg.cron": {"* * * * * *"}}.Encode(), "").body; !strings.Contains(frag, "at most one of cron, fixedRate, fixedDelay") {
		t.Fatalf("two plans: %s", frag)
	}
}

// TestTableFilterAndSort: the table (and its self-refresh) filters by
// name, state and health and sorts; with 1 000 schedules an operator finds
// the one that fails.
func TestTableFilterAndSort(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	if _, err := f.app.Register(&failsOnce{}); err != nil {
		t.Fatal(err)
	}
	f.sleeping("flaky")
	names := func(query string) []string {
		body := f.do("GET", "/fom/fragments/schedules?"+query, "").body
		var out []string
		for _, part := range strings.Split(body, `data-testid="row-`)[1:] {
			out = append(out, part[:strings.Index(part, `"`)])
		}
		return out
	}
	for query, want := range map[string]string{
		"q=ALP":                  "alpha",
		"state=INITED":           "beta",
		"health=failing":         "flaky",
		"health=ok&sort=name":    "alpha beta",
		"sort=name":              "alpha beta flaky",
		"sort=notok":             "flaky alpha beta",
		"q=zzz":                  "",
		"state=SLEEPING&q=flaky": "flaky",
	} {
		if got := strings.Join(names(query), " "); got != want {
			t.Errorf("%s: %q, want %q", query, got, want)
		}
	}
	if body := f.do("GET", "/fom/fragments/schedules?q=zzz", "").body; !strings.Contains(body, `data-testid="no-match"`) || !strings.Contains(body, `hx-include="#filter"`) {
		t.Error("an empty filter result says nothing, or the refresh forgets the filter")
	}
	// Without JavaScript the form reloads the page with the same filter.
	page := f.do("GET", "/fom/?health=failing", "").body
	if !strings.Contains(page, `data-testid="row-flaky"`) || strings.Contains(page, `data-testid="row-alpha"`) || !strings.Contains(page, `<option value="failing" selected>`) {
		t.Error("the page does not filter from its query")
	}
}

// TestTablePages: the table shows and refreshes one page (100 rows by
// default, ?per= from 10 to 1000); a page past the end shows the last;
// the pager's links keep the filter; rows carry no form of their own, and
// their buttons post through the page's one form with its CSRF token.
func TestTablePages(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	for i := range 248 { // with alpha and beta: 250
		if _, err := f.app.Register(&beta{}, fom.Named(fmt.Sprintf("job-%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	rows := func(query string) (int, string) {
		body := f.do("GET", "/fom/fragments/schedules?"+query, "").body
		_, pager, _ := strings.Cut(body, `data-testid="pager">`)
		pager, _, _ = strings.Cut(pager, "</td>")
		return strings.Count(body, `data-testid="row-`), pager
	}
	for query, want := range map[string]string{
		"":                      "100 rows 1–100 of 250 · page 1 of 3",
		"page=3":                "50 rows 201–250 of 250 · page 3 of 3",
		"page=9":                "50 rows 201–250 of 250 · page 3 of 3",
		"page=2&per=10":         "10 rows 11–20 of 250 · page 2 of 25",
		"per=5":                 "10 rows 1–10 of 250 · page 1 of 25",
		"per=5000":              "250 ",
		"q=job-1&page=2&per=50": "50 rows 51–100 of 100 · page 2 of 2",
	} {
		n, pager := rows(query)
		text := regexp.MustCompile(`<[^>]*>`).ReplaceAllString(pager, "")
		text = strings.TrimSpace(strings.NewReplacer("‹ previous", "", "next ›", "").Replace(text))
		if got := fmt.Sprintf("%d %s", n, text); got != want {
			t.Errorf("%q: %q, want %q", query, got, want)
		}
	}
	body := f.do("GET", "/fom/fragments/schedules?q=job&page=2", "").body
	if !strings.Contains(body, `href="/fom/?page=3&amp;q=job"`) || !strings.Contains(body, `hx-get="/fom/fragments/schedules?page=2"`) {
		t.Errorf("the pager or the refresh forgets the filter or the page")
	}
	if strings.Contains(body, "<form") || strings.Contains(body, "csrf_token") {
		t.Error("a refresh of the rows carries forms or tokens")
	}
	// A row's exec button posts through #row-actions: the page's token works.
	cookie, token := f.csrf()
	r := f.do("POST", "/fom/schedules/alpha/exec", "csrf_token="+token, "Cookie", cookie, "Content-Type", "application/x-www-form-urlencoded")
	if r.status != http.StatusSeeOther {
		t.Fatalf("exec through the page's form: %d %s", r.status, r.body)
	}
	r = f.do("POST", "/fom/schedules/alpha/log-level", "csrf_token="+token+"&level=debug", "Cookie", cookie, "Content-Type", "application/x-www-form-urlencoded", "HX-Request", "true")
	if r.status >= 400 || f.app.Schedule("alpha").LogLevel().String() != "debug" {
		t.Fatalf("log level through the page's form: %d %s", r.status, r.body)
	}
}
