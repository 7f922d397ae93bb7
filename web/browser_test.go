package web

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/fom-go/fom/fom"
)

type flaky struct {
	fom.Schedule `name:"importOrders" fixedRate:"1h" threadMax:"2" remark:"imports orders; every third page fails"`
	n            int
	mu           sync.Mutex
}

func (j *flaky) Tasks(context.Context) ([]fom.Task, error) {
	var ts []fom.Task
	for i := 1; i <= 3; i++ {
		ts = append(ts, fom.TaskFunc("page-"+strconv.Itoa(i), func(context.Context) (any, error) {
			j.mu.Lock()
			defer j.mu.Unlock()
			j.n++
			if j.n%3 == 0 {
				return nil, errors.New("shop API answered 503")
			}
			time.Sleep(time.Duration(j.n%4) * time.Millisecond)
			return j.n, nil
		}))
	}
	return ts, nil
}

// browserApp is one run of the app on a data dir, served on loopback.
type browserApp struct {
	app *fom.App
	srv *Server
	url string
}

func startBrowserApp(t *testing.T, dir string, extra ...any) *browserApp {
	t.Helper()
	app, err := fom.New(fom.WithDataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range append([]any{&alpha{}, &beta{}, &flaky{}}, extra...) {
		if _, err := app.Register(j); err != nil {
			t.Fatal(err)
		}
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(app, Config{Addr: "127.0.0.1:0", Options: Options{Refresh: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := &browserApp{app: app, srv: srv, url: "http://" + srv.Addr() + "/fom"}
	t.Cleanup(b.stop)
	return b
}

func (b *browserApp) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b.srv.Stop(ctx)
	b.app.Stop(ctx)
}

func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium on this CI machine: .ci/run installs Debian's chromium")
	}
	t.Skip("no Chromium installed (apt-get install -y chromium)")
	return ""
}

// TestAdminPageInChromium drives the admin page in real headless Chromium.
// (The README's pictures come from the quickstart: make screenshots.)
func TestAdminPageInChromium(t *testing.T) {
	path := chromium(t)
	dir := t.TempDir()
	// The first run has a schedule whose task ignores its timeout: stalled.
	stuck := &stuckJob{release: make(chan struct{})}
	var freeOnce sync.Once
	free := func() { freeOnce.Do(func() { close(stuck.release) }) }
	run1 := startBrowserApp(t, dir, stuck)
	t.Cleanup(free) // before run1 stops

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1440, 1000))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelCtx := chromedp.NewContext(allocCtx, chromedp.WithErrorf(func(format string, args ...any) {
		// This cdproto predates some enum values newer Chromium sends
		// (e.g. IPAddressSpace "Loopback"); those events are not ours.
		if msg := fmt.Sprintf(format, args...); !strings.Contains(msg, "could not unmarshal event") {
			stdlog.Print("chromedp: " + msg)
		}
	}))
	defer cancelCtx()
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	defer cancelTimeout()

	// Any script error or CSP refusal in the page fails the test.
	var consoleMu sync.Mutex
	var console []string
	chromedp.ListenTarget(ctx, func(ev any) {
		consoleMu.Lock()
		defer consoleMu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			console = append(console, "exception: "+e.ExceptionDetails.Error())
		case *log.EventEntryAdded:
			// The deliberate bad config edit answers 400; that is the page
			// working, not failing.
			if e.Entry.Level == log.LevelError && !strings.Contains(e.Entry.Text, "status of 400") {
				console = append(console, "console: "+e.Entry.Text)
			}
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.APITypeError {
				console = append(console, "console.error")
			}
		}
	})

	row := func(name, id string) string { return `[data-testid="row-` + name + `"] [data-testid="` + id + `"]` }
	// The table is swapped every 200ms, so read and click in one script
	// each rather than finding a node and then using it.
	textOf := func(sel string) string {
		var s string
		js := "(() => { const e = document.querySelector(" + strconv.Quote(sel) + "); return e ? e.textContent : '' })()"
		if err := chromedp.Run(ctx, chromedp.Evaluate(js, &s)); err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}
	click := func(sel string) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			var ok bool
			js := "(() => { const e = document.querySelector(" + strconv.Quote(sel) + "); if (!e) return false; e.click(); return true })()"
			if err := chromedp.Evaluate(js, &ok).Do(ctx); err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("no element %s to click", sel)
			}
			return nil
		})
	}
	waitText := func(sel string, ok func(string) bool, what string) string {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			s := textOf(sel)
			if ok(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s is %q", what, sel, s)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	atLeast := func(n int) func(string) bool {
		return func(s string) bool { v, err := strconv.Atoi(s); return err == nil && v >= n }
	}

	// Both pages fit common laptop widths: no horizontal scroll of the
	// page or of any card.
	for _, width := range []int64{1280, 1440} {
		for _, page := range []struct{ path, ready string }{{"/", `[data-testid="schedules"]`}, {"/schedules/alpha", `[data-testid="config-form"]`}} {
			var fits bool
			js := `document.documentElement.scrollWidth <= document.documentElement.clientWidth &&
				[...document.querySelectorAll('.card')].every(c => c.scrollWidth <= c.clientWidth + 1)`
			must(t, chromedp.Run(ctx, chromedp.EmulateViewport(width, 1000), chromedp.Navigate(run1.url+page.path),
				chromedp.WaitVisible(page.ready, chromedp.ByQuery), chromedp.Evaluate(js, &fits)))
			if !fits {
				t.Errorf("page %s scrolls sideways at %d px", page.path, width)
			}
		}
	}
	// At 390 px (a phone) the pages are readable without sideways
	// scrolling: the schedules table, the summary and the editor reflow;
	// only the wide statistics tables scroll inside their own card.
	for _, page := range []struct{ path, ready string }{{"/", `[data-testid="schedules"]`}, {"/schedules/alpha", `[data-testid="config-form"]`}} {
		var over []string
		js := `(() => {
			const out = [];
			if (document.documentElement.scrollWidth > document.documentElement.clientWidth) out.push('page ' + document.documentElement.scrollWidth);
			for (const c of document.querySelectorAll('.card')) {
				if (c.querySelector('[data-testid="days"], [data-testid="failures"] table, [data-testid="audit"] table')) continue;
				if (c.scrollWidth > c.clientWidth + 1) out.push((c.dataset.testid || c.textContent.trim().slice(0, 30)) + ' ' + c.scrollWidth + '>' + c.clientWidth);
			}
			return out })()`
		must(t, chromedp.Run(ctx, chromedp.EmulateViewport(390, 844), chromedp.Navigate(run1.url+page.path),
			chromedp.WaitVisible(page.ready, chromedp.ByQuery), chromedp.Evaluate(js, &over)))
		if len(over) > 0 {
			t.Errorf("page %s at 390 px scrolls sideways: %v", page.path, over)
		}
	}
	must(t, chromedp.Run(ctx, chromedp.EmulateViewport(1440, 1000)))

	// The table: the stuck schedule shows as stalled.
	must(t, chromedp.Run(ctx, chromedp.Navigate(run1.url+"/"), chromedp.WaitVisible(`[data-testid="schedules"]`, chromedp.ByQuery)))
	waitText(row("stuck", "stalled"), func(s string) bool { return s == "STALLED" }, "the stuck schedule's badge")

	// Press "exec now" and watch the round count rise.
	if got := textOf(row("importOrders", "rounds")); got != "0" {
		t.Fatalf("rounds before exec: %q", got)
	}
	for round := 1; round <= 3; round++ {
		must(t, chromedp.Run(ctx, click(row("importOrders", "exec")), chromedp.WaitVisible(`[data-testid="flash"]`, chromedp.ByQuery)))
		waitText(row("importOrders", "rounds"), atLeast(round), "round count after exec now")
	}
	waitText(row("importOrders", "failed"), atLeast(1), "failures counted")
	// What broke and since when, at each width: the failing schedule's
	// row says since when and shows the error; its page shows the error
	// first, above the fold at 1280×800 and 1440×900, and the editor last.
	for _, vp := range [][2]int64{{1280, 800}, {1440, 900}, {390, 844}} {
		must(t, chromedp.Run(ctx, chromedp.EmulateViewport(vp[0], vp[1]), chromedp.Navigate(run1.url+"/"), chromedp.WaitVisible(`[data-testid="schedules"]`, chromedp.ByQuery)))
		waitText(row("importOrders", "failing"), func(s string) bool { return strings.HasPrefix(s, "failing since ") && strings.Contains(s, "round") }, "the failing row's streak")
		waitText(row("importOrders", "last-error"), func(s string) bool { return s == "shop API answered 503" }, "the failing row's error")
		var health string
		must(t, chromedp.Run(ctx, chromedp.Evaluate(`document.querySelector('[data-testid="row-importOrders"]').dataset.health`, &health)))
		if health != "failing" {
			t.Errorf("the failing row's health is %q", health)
		}
		var fold struct {
			Bottom  float64 `json:"bottom"`
			InOrder bool    `json:"inOrder"`
		}
		must(t, chromedp.Run(ctx, chromedp.Navigate(run1.url+"/schedules/importOrders"), chromedp.WaitVisible(`[data-testid="problem-error"]`, chromedp.ByQuery),
			chromedp.Evaluate(`(() => {
				const q = s => document.querySelector(s);
				const before = (a, b) => !!(a.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING);
				return {bottom: q('[data-testid="problem-error"]').getBoundingClientRect().bottom,
					inOrder: before(q('[data-testid="problem"]'), q('[data-testid="failures"]')) && before(q('[data-testid="failures"]'), q('[data-testid="history"]')) &&
						before(q('[data-testid="history"]'), q('[data-testid="days"]')) && before(q('[data-testid="audit"]'), q('[data-testid="config-form"]'))};
			})()`, &fold)))
		if vp[0] >= 1280 && fold.Bottom > float64(vp[1]) {
			t.Errorf("at %dx%d the last error ends at %.0f px, below the fold", vp[0], vp[1], fold.Bottom)
		}
		if !fold.InOrder {
			t.Errorf("at %d px the schedule page is not in the order problem, failures, rounds, statistics, audit, configuration", vp[0])
		}
	}
	must(t, chromedp.Run(ctx, chromedp.EmulateViewport(1440, 1000), chromedp.Navigate(run1.url+"/"), chromedp.WaitVisible(`[data-testid="schedules"]`, chromedp.ByQuery)))
	// The start button of a started schedule is disabled; a post anyway
	// (a stale page, say) shows the engine's refusal.
	js := "(() => { const b = document.querySelector(" + strconv.Quote(row("alpha", "start")) + "); b.form.action = b.formAction; b.form.submit() })()"
	must(t, chromedp.Run(ctx, chromedp.Evaluate(js, nil), chromedp.WaitVisible(`.flash.error`, chromedp.ByQuery)))
	if got := textOf(`[data-testid="flash"]`); got != "schedule alpha is already started" {
		t.Fatalf("refusal flash %q", got)
	}

	// The schedule page: a bad value shows its error inline, nothing saved.
	must(t, chromedp.Run(ctx,
		chromedp.Navigate(run1.url+"/schedules/alpha"),
		chromedp.WaitVisible(`[data-testid="config-form"]`, chromedp.ByQuery),
		chromedp.SetValue(`[data-testid="input-threadMax"]`, "zero", chromedp.ByQuery),
		chromedp.SetValue(`[data-testid="input-size"]`, "42", chromedp.ByQuery),
		chromedp.Click(`[data-testid="save-config"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`[data-testid="error-threadMax"]`, chromedp.ByQuery),
	))
	if got := textOf(`[data-testid="error-threadMax"]`); got != "must be between 1 and 10000, got 0" && got != "not an integer: zero" {
		t.Fatalf("inline error %q", got)
	}
	if v := run1.app.Schedule("alpha").Config().Get("size"); v != "10" {
		t.Fatalf("size saved despite the error: %s", v)
	}
	// Then a good one.
	must(t, chromedp.Run(ctx,
		chromedp.SetValue(`[data-testid="input-threadMax"]`, "2", chromedp.ByQuery),
		chromedp.Click(`[data-testid="save-config"]`, chromedp.ByQuery),
	))
	// The error page's flash is still there until the new page loads.
	waitText(`[data-testid="flash"]`, func(s string) bool { return s == "configuration saved" }, "flash after a good save")
	if v := run1.app.Schedule("alpha").Config().Get("size"); v != "42" {
		t.Fatalf("size after save: %s", v)
	}
	// The edit is in the audit trail, with the old and new values.
	waitText(`[data-testid="audit-row"]`, func(s string) bool {
		return strings.Contains(s, "config") && strings.Contains(s, `size: "10" → "42"`)
	}, "the edit in the audit trail")

	// The plan preview follows the plan fields as they are typed.
	waitText(`[data-testid="plan-preview"]`, func(s string) bool { return strings.Contains(s, "fixedRate 1h") }, "preview of the saved plan")
	typeInto := func(id, value string) chromedp.Action {
		js := `(() => { const e = document.querySelector('[data-testid="input-` + id + `"]'); e.value = ` + strconv.Quote(value) +
			`; e.dispatchEvent(new KeyboardEvent('keyup', {bubbles: true})); e.dispatchEvent(new Event('change', {bubbles: true})); return true })()`
		return chromedp.Evaluate(js, nil)
	}
	must(t, chromedp.Run(ctx, typeInto("fixedRate", "")))
	waitText(`[data-testid="plan-preview"]`, func(s string) bool { return strings.Contains(s, "managed pool") }, "preview without a plan")
	must(t, chromedp.Run(ctx, typeInto("cron", "0 0 12 * * *")))
	waitText(`[data-testid="plan-preview"]`, func(s string) bool {
		return strings.Contains(s, "cron 0 0 12 * * *") && strings.Contains(s, "12:00:00")
	}, "preview while typing a cron spec")
	if v := run1.app.Schedule("alpha").Config().Get("cron"); v != "" {
		t.Fatalf("the preview saved the cron: %q", v)
	}

	// Restart the app on the same data dir: the edit is still there.
	free()
	run1.stop()
	run2 := startBrowserApp(t, dir)
	var size string
	must(t, chromedp.Run(ctx,
		chromedp.Navigate(run2.url+"/schedules/alpha"),
		chromedp.WaitVisible(`[data-testid="config-form"]`, chromedp.ByQuery),
		chromedp.Value(`[data-testid="input-size"]`, &size, chromedp.ByQuery),
	))
	if size != "42" || textOf(`[data-testid="source-size"]`) != "persisted edit" {
		t.Fatalf("after restart size=%q source=%q", size, textOf(`[data-testid="source-size"]`))
	}

	// Statistics survived too: the chart of importOrders has today's bar.
	var bars []map[string]string
	must(t, chromedp.Run(ctx,
		chromedp.Navigate(run2.url+"/schedules/importOrders"),
		chromedp.WaitVisible(`[data-testid="day-chart"]`, chromedp.ByQuery),
		chromedp.AttributesAll(`[data-testid="day-chart"] rect.bar`, &bars, chromedp.ByQueryAll),
	))
	if len(bars) != 7 {
		t.Fatalf("%d day bars, want 7", len(bars))
	}
	if h, _ := strconv.ParseFloat(bars[6]["height"], 64); h <= 0 {
		t.Fatalf("today's bar has height %q", bars[6]["height"])
	}
	if n := len(textOf(`[data-testid="failures"]`)); n == 0 || !strings.Contains(textOf(`[data-testid="failures"]`), "shop API answered 503") {
		t.Fatal("failures list lacks the recorded failure")
	}
	// So did the run history: the three exec-now rounds, newest first,
	// each opening to its tasks.
	var rounds int
	must(t, chromedp.Run(ctx, chromedp.Evaluate(`document.querySelectorAll('[data-testid="round"]').length`, &rounds)))
	if rounds < 3 || !strings.HasPrefix(textOf(`[data-testid="round-cause"]`), "exec by ") {
		t.Fatalf("history after restart: %d rounds, newest cause %q", rounds, textOf(`[data-testid="round-cause"]`))
	}
	must(t, chromedp.Run(ctx, click(`[data-testid="round"] summary`), chromedp.WaitVisible(`[data-testid="round-task"]`, chromedp.ByQuery)))
	if got := textOf(`[data-testid="round-task"]`); !strings.Contains(got, "shop API answered 503") && !strings.Contains(got, "success") {
		t.Fatalf("the round's task row: %q", got)
	}

	// Stop a schedule from the table and watch it reach STOPPED.
	must(t, chromedp.Run(ctx, chromedp.Navigate(run2.url+"/"), chromedp.WaitVisible(`[data-testid="schedules"]`, chromedp.ByQuery),
		click(row("alpha", "stop"))))
	waitText(row("alpha", "state"), func(s string) bool { return s == "STOPPED" }, "state after stop")

	consoleMu.Lock()
	defer consoleMu.Unlock()
	if len(console) > 0 {
		t.Fatalf("the page logged errors: %v", console)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
