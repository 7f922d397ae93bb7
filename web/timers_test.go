package web

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fom-go/fom/timer"
)

// TestTimersSectionAndAPI: the Timers section lists timers with counts,
// a timer's page shows its fires with each attempt's error; disable,
// enable, retry-now of a dead fire and delete are CSRF-guarded forms,
// audited, and JSON under /api/timers; metrics carry the timers.
func TestTimersSectionAndAPI(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	if f.do("GET", "/fom/timers/", "").status != 404 {
		t.Fatal("a Timers page for an app that uses none")
	}
	svc := f.app.Timers()
	ctx := context.Background()
	if err := svc.Handle("remind", func(context.Context, timer.Fire) error { return errors.New("mail server said 554\nmore detail") },
		timer.WithRetry(timer.Retry{MaxAttempts: 1})); err != nil {
		t.Fatal(err)
	}
	id, err := svc.Create(ctx, timer.Spec{Namespace: "billing", Name: "inv-1", Kind: "remind", At: time.Now().Add(50 * time.Millisecond), Payload: json.RawMessage(`{"invoice":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	cid, err := svc.Create(ctx, timer.Spec{Namespace: "billing", Name: "weekly", Kind: "remind", Cron: "0 0 9 * * MON"})
	if err != nil {
		t.Fatal(err)
	}
	var fires struct {
		Fires []timer.FireRecord `json:"fires"`
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		f.do("GET", "/fom/api/timers/"+id+"/fires", "").expect(t, 200, "ok").data(t, &fires)
		if len(fires.Fires) == 1 && fires.Fires[0].State == "dead" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fire did not die: %+v", fires)
		}
	}
	if a := fires.Fires[0].Attempts; len(a) != 1 || !strings.HasPrefix(a[0].Error, "mail server said 554") {
		t.Fatalf("attempts %+v", a)
	}
	var list struct {
		Timers []timer.Timer `json:"timers"`
		Next   string        `json:"next_cursor"`
	}
	f.do("GET", "/fom/api/timers?namespace=billing&limit=1", "").expect(t, 200, "ok").data(t, &list)
	if len(list.Timers) != 1 || list.Next == "" || list.Timers[0].ID != id {
		t.Fatalf("first page %+v", list)
	}
	f.do("GET", "/fom/api/timers?namespace=billing&limit=1&cursor="+list.Next, "").expect(t, 200, "ok").data(t, &list)
	if len(list.Timers) != 1 || list.Next != "" || list.Timers[0].ID != cid {
		t.Fatalf("second page %+v", list)
	}
	f.do("GET", "/fom/api/timers?state=sleepy", "").expect(t, 400, `fom: timer field "state" value "sleepy": enabled, disabled, done or dead (a fire of it is dead)`)
	f.do("GET", "/fom/api/timers/nope", "").expect(t, 404, "fom: timer not found: nope")
	var counts timerCounts
	f.do("GET", "/fom/api/timers/counts", "").expect(t, 200, "ok").data(t, &counts)
	if counts.Dead != 1 {
		t.Fatalf("counts %+v", counts)
	}
	page := f.do("GET", "/fom/timers/?namespace=billing", "").body
	for _, want := range []string{`data-testid="count-dead">1<`, "inv-1", "weekly", "cron 0 0 9 * * MON", `data-testid="nav-timers"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the Timers page lacks %q", want)
		}
	}
	tp := f.do("GET", "/fom/timers/"+id, "").body
	for _, want := range []string{"mail server said 554", `data-testid="retry"`, `{&#34;invoice&#34;:1}`} {
		if !strings.Contains(tp, want) {
			t.Errorf("the timer's page lacks %q", want)
		}
	}
	if cp := f.do("GET", "/fom/timers/"+cid, "").body; !strings.Contains(cp, `data-testid="next-fires"`) {
		t.Error("the cron timer's page shows no next fires")
	}
	// Forms need the CSRF token.
	planned := strconv.FormatInt(fires.Fires[0].Planned.UnixMilli(), 10)
	if r := f.do("POST", "/fom/timers/"+id+"/fires/"+planned+"/retry", ""); r.status != 403 {
		t.Fatalf("retry without a CSRF token: %d", r.status)
	}
	cookie, tok := f.csrf()
	form := func(path string) resp {
		return f.do("POST", path, "csrf_token="+tok, "Content-Type", "application/x-www-form-urlencoded", "Cookie", cookie)
	}
	if r := form("/fom/timers/" + cid + "/disable"); r.status != 303 {
		t.Fatalf("disable: %d %s", r.status, r.body)
	}
	if tm, _ := svc.Get(ctx, cid); tm.State != "disabled" {
		t.Fatalf("after disable: %s", tm.State)
	}
	f.do("POST", "/fom/api/timers/"+cid+"/enable", "").expect(t, 200, "ok")
	if r := form("/fom/timers/" + id + "/fires/" + planned + "/retry"); r.status != 303 || strings.Contains(r.header.Get("Location"), "level=error") {
		t.Fatalf("retry-now: %d %s", r.status, r.header.Get("Location"))
	}
	f.do("POST", "/fom/api/timers/"+id+"/fires/"+planned+"/retry", "").expect(t, 409, "")
	if tp := f.do("GET", "/fom/timers/"+id, "").body; !strings.Contains(tp, "fire planned "+planned) || !strings.Contains(tp, "disable") {
		t.Error("the audit trail does not show the retry")
	}
	metrics := f.do("GET", "/fom/metrics", "").body
	for _, want := range []string{"fom_timer_fire_lateness_seconds_count", `fom_timer_attempts_total{kind="remind",outcome="dead"}`, `fom_timer_fires{state="dead"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	f.do("DELETE", "/fom/api/timers/"+cid, "").expect(t, 200, "ok")
	f.do("GET", "/fom/api/timers/"+cid, "").expect(t, 404, "")
}
