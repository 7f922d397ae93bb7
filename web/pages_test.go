package web

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"golang.org/x/net/html"

	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/statistics"
)

// byTestID returns the text of every element with data-testid=id.
func byTestID(t *testing.T, body, id string) []string {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			for _, a := range n.Attr {
				if a.Key == "data-testid" && a.Val == id {
					out = append(out, strings.TrimSpace(text(n)))
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return out
}

func text(n *html.Node) string {
	if n.Type == html.TextNode {
		return n.Data
	}
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		b.WriteString(text(c))
	}
	return b.String()
}

func TestIndexPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	r := f.do("GET", "/fom/", "")
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
		t.Fatalf("status %d", r.status)
	}
	if got := byTestID(t, r.body, "state"); len(got) != 2 || got[0] != "SLEEPING" || got[1] != "INITED" {
		t.Fatalf("states %v", got)
	}
	if got := byTestID(t, r.body, "remark"); len(got) != 1 || got[0] != "<script>alert('remark')</script>" {
		t.Fatalf("remark %v", got)
	}
	if strings.Contains(r.body, "<script>alert(") {
		t.Fatal("remark not escaped")
	}
	if len(byTestID(t, r.body, "row-alpha")) != 1 || len(byTestID(t, r.body, "exec")) != 2 {
		t.Fatal("rows or buttons missing")
	}
	if !strings.Contains(r.header.Get("Set-Cookie"), "fom_csrf=") || !strings.Contains(r.header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("headers %v", r.header)
	}
	frag := f.do("GET", "/fom/fragments/schedules", "")
	if !strings.HasPrefix(strings.TrimSpace(frag.body), "<tbody") || len(byTestID(t, "<table>"+frag.body+"</table>", "row-beta")) != 1 {
		t.Fatalf("fragment %q", frag.body)
	}
	if r := f.do("GET", "/fom", ""); r.status != http.StatusMovedPermanently || r.header.Get("Location") != "/fom/" {
		t.Fatalf("redirect %d %v", r.status, r.header)
	}
}

func TestSchedulePageAndInlineErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	r := f.do("GET", "/fom/schedules/alpha", "")
	for _, id := range []string{"config-form", "day-chart", "bucket-chart", "failures", "active-tasks", "waiting-tasks", "input-size", "export-csv"} {
		if len(byTestID(t, r.body, id)) != 1 {
			t.Errorf("%s missing", id)
		}
	}
	if got := byTestID(t, r.body, "value-name"); len(got) != 1 || got[0] != "alpha" {
		t.Fatalf("fixed name %v", got)
	}
	cookie, tok := f.csrf()
	form := url.Values{"csrf_token": {tok}, "cfg.threadMax": {"0"}, "cfg.size": {"20"}, "cfg.remark": {"changed"}}
	r = f.do("POST", "/fom/schedules/alpha/config", form.Encode(), "Content-Type", "application/x-www-form-urlencoded", "Cookie", cookie)
	if r.status != http.StatusBadRequest {
		t.Fatalf("status %d", r.status)
	}
	if got := byTestID(t, r.body, "error-threadMax"); len(got) != 1 || got[0] != "must be between 1 and 10000, got 0" {
		t.Fatalf("inline error %v", got)
	}
	sc := f.app.Schedule("alpha")
	if sc.Config().Get("size") != "10" || sc.Config().Get("threadMax") != "1" {
		t.Fatal("something was saved")
	}
	if !strings.Contains(r.body, `value="20"`) {
		t.Fatal("the operator's typed value is lost")
	}
	form.Set("cfg.threadMax", "3")
	r = f.do("POST", "/fom/schedules/alpha/config", form.Encode(), "Content-Type", "application/x-www-form-urlencoded", "Cookie", cookie)
	if r.status != http.StatusSeeOther || sc.Config().Get("size") != "20" || sc.Config().Get("threadMax") != "3" {
		t.Fatalf("good save %d %v", r.status, sc.Config().Values())
	}
	r = f.do("GET", "/fom/schedules/alpha", "")
	if got := byTestID(t, r.body, "source-size"); len(got) != 1 || got[0] != "persisted edit" {
		t.Fatalf("source %v", got)
	}
	r = f.do("POST", "/fom/schedules/alpha/config/size/reset", "csrf_token="+tok, "Content-Type", "application/x-www-form-urlencoded", "Cookie", cookie)
	if r.status != http.StatusSeeOther || sc.Config().Get("size") != "10" {
		t.Fatalf("reset %d", r.status)
	}
	if r := f.do("GET", "/fom/schedules/nope", ""); r.status != 404 || len(byTestID(t, r.body, "not-found")) != 1 {
		t.Fatalf("unknown schedule page %d", r.status)
	}
}

func TestMountedUnderAnyPrefix(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{Prefix: "/admin/jobs/", AllowedHosts: []string{"example.com"}}) // httptest's Host
	// Inside a user's chi router.
	r := chi.NewRouter()
	r.Get("/health", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })
	r.Mount("/admin/jobs", f.h)
	// And inside a plain ServeMux.
	mux := http.NewServeMux()
	mux.Handle("/admin/jobs/", f.h)
	for name, h := range map[string]http.Handler{"chi": r, "mux": mux} {
		for _, path := range []string{"/admin/jobs/", "/admin/jobs/api/schedules", "/admin/jobs/schedules/alpha"} {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
			if w.Code != 200 {
				t.Fatalf("%s %s: %d", name, path, w.Code)
			}
			if strings.HasSuffix(path, "/") && !strings.Contains(w.Body.String(), `href="/admin/jobs/schedules/alpha"`) {
				t.Fatalf("%s: links do not carry the prefix", name)
			}
		}
	}
}

func TestAssetsAndMetrics(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	hh := f.h.(*handler)
	r := f.do("GET", hh.asset("htmx.min.js"), "")
	if r.status != 200 || !strings.Contains(r.header.Get("Cache-Control"), "immutable") || !strings.HasPrefix(r.header.Get("Content-Type"), "text/javascript") {
		t.Fatalf("asset %d %v", r.status, r.header)
	}
	if r := f.do("GET", "/fom/static/000000000000/htmx.min.js", ""); r.status != 404 {
		t.Fatalf("stale asset version %d", r.status)
	}
	page := f.do("GET", "/fom/", "")
	if !strings.Contains(page.body, hh.asset("fom.css")) || strings.Contains(page.body, "https://") {
		t.Fatal("the page must load its own versioned assets and nothing from elsewhere")
	}
	m := f.do("GET", "/fom/metrics", "")
	if m.status != 200 || !strings.Contains(m.body, `fom_schedule_state{schedule="alpha",state="SLEEPING"} 1`) {
		t.Fatalf("metrics %d %s", m.status, m.body)
	}
}

func TestModuleServesAndPortClashFailsStartup(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	// Supplied by value: taken as well as by pointer, never ignored.
	clash := fx.New(fx.NopLogger, fom.Module, Module,
		fx.Supply(fom.Config{DataDir: dir}), fx.Supply(Config{Addr: ln.Addr().String()}))
	err = clash.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "listen on "+ln.Addr().String()) {
		t.Fatalf("got %v", err)
	}
	clash.Stop(context.Background())

	var srv *Server
	app := fxtest.New(t, fx.NopLogger, fom.Module, Module,
		fx.Supply(&fom.Config{DataDir: t.TempDir()}), fx.Supply(&Config{Addr: "127.0.0.1:0"}),
		fom.Job(func() *alpha { return &alpha{} }), fx.Populate(&srv))
	app.RequireStart()
	res, err := http.Get("http://" + srv.Addr() + "/fom/api/schedules")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("%v %v", err, res)
	}
	res.Body.Close()
	app.RequireStop()
}

func TestLogLevelAndStatsSettingsForms(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	cookie, tok := f.csrf()
	form := func(path string, v url.Values, hdr ...string) resp {
		v.Set("csrf_token", tok)
		return f.do("POST", path, v.Encode(), append([]string{"Content-Type", "application/x-www-form-urlencoded", "Cookie", cookie}, hdr...)...)
	}
	sc := f.app.Schedule("alpha")
	if r := form("/fom/schedules/alpha/log-level", url.Values{"level": {"warn"}}, "HX-Request", "true"); r.status != http.StatusNoContent || sc.LogLevel().String() != "warn" {
		t.Fatalf("htmx log level %d %s", r.status, sc.LogLevel())
	}
	if r := form("/fom/schedules/alpha/log-level", url.Values{"level": {"shout"}}, "HX-Request", "true"); r.status != http.StatusBadRequest {
		t.Fatalf("bad level %d", r.status)
	}
	if r := form("/fom/schedules/alpha/log-level", url.Values{"level": {"debug"}}); r.status != http.StatusSeeOther || sc.LogLevel().String() != "debug" {
		t.Fatalf("form log level %d", r.status)
	}
	r := form("/fom/schedules/alpha/stats-settings", url.Values{"thresholds": {"100ms, 1s, 10s, 1m, 10m"}, "retentionDays": {"30"}})
	if r.status != http.StatusSeeOther || sc.Stats().Settings().RetentionDays != 30 {
		t.Fatalf("stats settings %d %+v", r.status, sc.Stats().Settings())
	}
	r = form("/fom/schedules/alpha/stats-settings", url.Values{"thresholds": {"1s, 1s, 10s, 1m, 10m"}})
	if loc := r.header.Get("Location"); r.status != http.StatusSeeOther || !strings.Contains(loc, "level=error") || sc.Stats().Settings().Thresholds[0] != 100*time.Millisecond {
		t.Fatalf("bad thresholds %d %s", r.status, loc)
	}
	if r := form("/fom/schedules/alpha/stats-settings", url.Values{"retentionDays": {"a week"}}); !strings.Contains(r.header.Get("Location"), "level=error") {
		t.Fatalf("bad retention %v", r.header)
	}
}

// TestDayChartGaps: days without tasks break the cost lines and carry a
// dashed mark, instead of drawing a cost of 0 ms.
func TestDayChartGaps(t *testing.T) {
	t.Parallel()
	day := func(i int, count int64, avg time.Duration) statistics.DaySummary {
		return statistics.DaySummary{Day: time.Date(2026, 11, 17+i, 0, 0, 0, 0, time.UTC), Count: count, Avg: avg, P95: 2 * avg, ByStatus: map[string]int64{"success": count}}
	}
	c := dayChart([]statistics.DaySummary{
		day(0, 5, time.Second), day(1, 6, time.Second), day(2, 0, 0), day(3, 0, 0), day(4, 4, 2*time.Second), day(5, 0, 0), day(6, 3, time.Second),
	})
	var segments []int
	for _, l := range c.Lines {
		if l.Class == "line-avg" {
			segments = append(segments, len(strings.Fields(l.Points)))
		}
	}
	if fmt.Sprint(segments) != "[2 2 2]" { // days 0-1, day 4 alone (a dot), day 6 alone
		t.Fatalf("avg line segments of %v points", segments)
	}
	var marks []string
	for _, b := range c.Bars {
		if b.Class == "bar-none" {
			marks = append(marks, b.Title)
		}
	}
	if fmt.Sprint(marks) != "[2026-11-19: no tasks ran 2026-11-20: no tasks ran 2026-11-22: no tasks ran]" {
		t.Fatalf("marks %v", marks)
	}
}
