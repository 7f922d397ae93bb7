package web

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/statistics"
)

func TestAPIReadRoutes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	var list []scheduleView
	f.do("GET", "/fom/api/schedules", "").expect(t, 200, "ok").data(t, &list)
	if len(list) != 2 || list[0].Name != "alpha" || list[0].State != "SLEEPING" || list[1].State != "INITED" || list[0].Plan != "fixedRate 1h" {
		t.Fatalf("list %+v", list)
	}
	var one struct {
		scheduleView
		Config []entryView `json:"config"`
	}
	f.do("GET", "/fom/api/schedules/alpha", "").expect(t, 200, "ok").data(t, &one)
	if one.Name != "alpha" || len(one.Config) != 19 || one.Config[18].Key != "size" || !one.Config[18].Custom {
		t.Fatalf("detail %+v", one)
	}
	var lvl levelBody
	f.do("GET", "/fom/api/schedules/alpha/log-level", "").expect(t, 200, "").data(t, &lvl)
	if lvl.Level != "info" {
		t.Fatalf("level %q", lvl.Level)
	}
	f.do("GET", "/fom/api/schedules/alpha/stats", "").expect(t, 200, "")
	f.do("GET", "/fom/api/schedules/alpha/stats?day=2026-01-02", "").expect(t, 200, "")
	f.do("GET", "/fom/api/schedules/alpha/stats?day=yesterday", "").expect(t, 400, `day "yesterday" is not a date such as 2026-01-02`)
	f.do("GET", "/fom/api/schedules/alpha/failures", "").expect(t, 200, "")
	f.do("GET", "/fom/api/schedules/alpha/tasks?state=active", "").expect(t, 200, "")
	f.do("GET", "/fom/api/schedules/alpha/tasks?state=waiting", "").expect(t, 200, "")
	f.do("GET", "/fom/api/schedules/alpha/tasks?state=sleepy", "").expect(t, 400, `state "sleepy" is not active or waiting`)

	for _, path := range []string{"", "/config", "/log-level", "/stats", "/failures", "/tasks", "/export"} {
		f.do("GET", "/fom/api/schedules/nope"+path, "").expect(t, 404, "schedule nope not found")
	}
	f.do("GET", "/fom/api/nothing", "").expect(t, 404, "no such API route: GET /fom/api/nothing")
}

func TestAPIActions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	f.do("POST", "/fom/api/schedules/alpha/start", "").expect(t, 409, "schedule alpha is already started")
	f.do("POST", "/fom/api/schedules/beta/exec", "").expect(t, 409, "schedule beta is not started")
	f.do("POST", "/fom/api/schedules/beta/stop", "").expect(t, 409, "schedule beta is not started")
	var v scheduleView
	f.do("POST", "/fom/api/schedules/alpha/exec", "").expect(t, 200, "ok").data(t, &v)
	r := f.do("POST", "/fom/api/schedules/alpha/stop", "").expect(t, 200, "ok")
	r.data(t, &v)
	if v.State != "STOPPING" && v.State != "STOPPED" {
		t.Fatalf("state after stop %s", v.State)
	}
	if err := f.app.Schedule("alpha").Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.do("POST", "/fom/api/schedules/alpha/stop", "").expect(t, 409, "schedule alpha is already stopped")
	f.do("POST", "/fom/api/schedules/nope/start", "").expect(t, 404, "schedule nope not found")
	f.do("GET", "/fom/api/schedules/alpha/exec", "").expect(t, 405, "method GET not allowed on /fom/api/schedules/alpha/exec")
	f.do("DELETE", "/fom/api/schedules/alpha/config", "").expect(t, 405, "")
	f.do("POST", "/fom/api/schedules/alpha/log-level", "").expect(t, 405, "")
}

func TestAPIConfigEdits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	sc := f.app.Schedule("alpha")
	var entries []entryView
	f.do("PATCH", "/fom/api/schedules/alpha/config", `{"size":"25","threadMax":"4"}`).expect(t, 200, "ok").data(t, &entries)
	if sc.Config().Get("size") != "25" || sc.Config().Get("threadMax") != "4" {
		t.Fatal("edit not applied")
	}
	r := f.do("PATCH", "/fom/api/schedules/alpha/config", `{"size":"huge","threadMax":"8","name":"x","colour":"red"}`)
	r.expect(t, 400, "")
	var body struct {
		Errors map[string]string `json:"errors"`
	}
	r.data(t, &body)
	want := map[string]string{"size": "not a 64-bit integer: huge", "name": "is not editable at runtime", "colour": "unknown key"}
	for k, v := range want {
		if body.Errors[k] != v {
			t.Errorf("error of %s: %q, want %q", k, body.Errors[k], v)
		}
	}
	if _, ok := body.Errors["threadMax"]; ok || sc.Config().Get("threadMax") != "4" {
		t.Fatal("a failed edit was half-applied")
	}
	f.do("PATCH", "/fom/api/schedules/alpha/config", `{"size":`).expect(t, 400, "")
	f.do("PATCH", "/fom/api/schedules/alpha/config", `{}`).expect(t, 400, "no changes: send a JSON object of key to value")
	f.do("PATCH", "/fom/api/schedules/alpha/config", `size=1`, "Content-Type", "application/x-www-form-urlencoded").expect(t, 415, "send the body as application/json")
	// Numbers and booleans are taken as written; null clears; anything
	// after the value, or a media type that only starts like JSON, is not.
	f.do("PATCH", "/fom/api/schedules/alpha/config", `{"size":5,"threadMax":4,"execOnLoad":true,"remark":null}`).expect(t, 200, "ok")
	if v := sc.Config().Values(); v["size"] != "5" || v["threadMax"] != "4" || v["execOnLoad"] != "true" || v["remark"] != "" {
		t.Fatalf("scalars: %v", v)
	}
	f.do("PATCH", "/fom/api/schedules/alpha/config", `{"size":[1]}`).expect(t, 400, `bad JSON body: key "size": value [1] is not a string, number, boolean or null`)
	f.do("PATCH", "/fom/api/schedules/alpha/config", `{"size":"6"} trailing`).expect(t, 400, "bad JSON body: unexpected data after the JSON value")
	f.do("PATCH", "/fom/api/schedules/alpha/config", `{"size":"6"}{"size":"7"}`).expect(t, 400, "bad JSON body: unexpected data after the JSON value")
	f.do("PATCH", "/fom/api/schedules/alpha/config", `{"size":"6"}`, "Content-Type", "application/jsonfoo").expect(t, 415, "send the body as application/json")
	f.do("PATCH", "/fom/api/schedules/alpha/config", `{"size":"6"}`, "Content-Type", "application/json; charset=utf-8").expect(t, 200, "ok")
	f.do("PATCH", "/fom/api/schedules/alpha/config", `{"remark":"`+strings.Repeat("x", 2<<20)+`"}`).expect(t, 413, "body larger than 1048576 bytes")
	f.do("DELETE", "/fom/api/schedules/alpha/config/size", "").expect(t, 200, "ok")
	if sc.Config().Get("size") != "10" {
		t.Fatal("reset failed")
	}
	f.do("DELETE", "/fom/api/schedules/alpha/config/sizee", "").expect(t, 400, `fom: config of schedule "alpha": key "sizee" value "": unknown key (did you mean "size"?)`)

	f.do("PUT", "/fom/api/schedules/alpha/log-level", `{"level":"debug"}`).expect(t, 200, "ok")
	if sc.LogLevel().String() != "debug" {
		t.Fatal("level not set")
	}
	f.do("PUT", "/fom/api/schedules/alpha/log-level", `{"level":"loud"}`).expect(t, 400, `log level "loud" is not one of debug, info, warn, error`)

	var set statsSettingsBody
	f.do("PUT", "/fom/api/schedules/alpha/stats/settings", `{"thresholds":["100ms","1s","10s","1m","10m"],"retentionDays":14}`).expect(t, 200, "ok").data(t, &set)
	if set.RetentionDays != 14 || set.Thresholds[0] != "100ms" || sc.Stats().Settings().RetentionDays != 14 {
		t.Fatalf("settings %+v", set)
	}
	f.do("PUT", "/fom/api/schedules/alpha/stats/settings", `{"thresholds":["1s","1s","10s","1m","10m"]}`).expect(t, 400, "statistics: thresholds[1] = 1s: must be greater than thresholds[0] = 1s")
}

func TestAPIExport(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	r := f.do("GET", "/fom/api/schedules/alpha/export?format=csv", "")
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/csv") || !strings.Contains(r.header.Get("Content-Disposition"), `filename="fom-alpha-`) ||
		!strings.HasPrefix(r.body, "schedule,day,count,") || !strings.Contains(r.body, "\n\nschedule,round,at,task,status") {
		t.Fatalf("csv %d %v %q", r.status, r.header, r.body)
	}
	r = f.do("GET", "/fom/api/schedules/alpha/export?format=json", "")
	if r.status != 200 || !strings.Contains(r.body, `"schedule": "alpha"`) {
		t.Fatalf("json %d %q", r.status, r.body)
	}
	if r := f.do("GET", "/fom/api/schedules/alpha/export?format=csv&part=failures", ""); !strings.HasPrefix(r.body, "schedule,round,at,task") {
		t.Fatalf("failures csv %q", r.body)
	}
	// Failures and days each on their own, as JSON too.
	f.app.Schedule("alpha").Stats().Record(statistics.Sample{Round: 7, TaskID: "alpha", Status: statistics.Failed, Err: errors.New("boom")})
	if r := f.do("GET", "/fom/api/schedules/alpha/export?format=json&part=failures", ""); !strings.HasPrefix(r.body, `[{"round":7,`) || !strings.Contains(r.body, `"error":"boom"`) {
		t.Fatalf("failures json %q", r.body)
	}
	if r := f.do("GET", "/fom/api/schedules/alpha/export?format=json&part=days", ""); !strings.HasPrefix(r.body, `[{"day":`) {
		t.Fatalf("days json %q", r.body)
	}
	if page := f.do("GET", "/fom/schedules/alpha", "").body; !strings.Contains(page, `data-testid="failure-round">7<`) || !strings.Contains(page, "part=failures") || !strings.Contains(page, "part=days") {
		t.Fatal("the page's failures lack their round or the exports their part")
	}
	f.do("GET", "/fom/api/schedules/alpha/export?format=xml", "").expect(t, 400, `format "xml" part "": use format=json or csv, with part=all|days|failures`)
}

func TestAuth(t *testing.T) {
	t.Parallel()
	basic := newFixture(t, Options{BasicAuthUser: "ops", BasicAuthPassword: "s3cret"})
	r := basic.do("GET", "/fom/api/schedules", "").expect(t, 401, "authentication required")
	if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Basic") {
		t.Fatal("no basic challenge")
	}
	basic.do("GET", "/fom/api/schedules", "", "Authorization", "Basic b3BzOndyb25n").expect(t, 403, "wrong credentials") // ops:wrong
	basic.do("GET", "/fom/api/schedules", "", "Authorization", "Basic b3BzOnMzY3JldA==").expect(t, 200, "ok")            // ops:s3cret
	if r := basic.do("GET", "/fom/", ""); r.status != 401 {
		t.Fatalf("page without credentials: %d", r.status)
	}

	bearer := newFixture(t, Options{BearerToken: "tok", Scope: ProtectMutations})
	bearer.do("GET", "/fom/api/schedules", "").expect(t, 200, "ok")
	bearer.do("POST", "/fom/api/schedules/alpha/exec", "").expect(t, 401, "authentication required")
	bearer.do("POST", "/fom/api/schedules/alpha/exec", "", "Authorization", "Bearer nope").expect(t, 403, "wrong credentials")
	bearer.do("POST", "/fom/api/schedules/alpha/exec", "", "Authorization", "Bearer tok").expect(t, 200, "ok")
	bearer.sleeping("alpha")
	// The scheme is case-insensitive (RFC 9110).
	bearer.do("POST", "/fom/api/schedules/alpha/exec", "", "Authorization", "bearer tok").expect(t, 200, "ok")
	bearer.do("POST", "/fom/api/schedules/alpha/exec", "", "Authorization", "Basic dG9r").expect(t, 403, "wrong credentials")
	basic.do("GET", "/fom/api/schedules", "", "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("other:s3cret"))).expect(t, 403, "wrong credentials")
	basic.do("GET", "/fom/api/schedules", "", "Authorization", "basic "+base64.StdEncoding.EncodeToString([]byte("ops:s3cret"))).expect(t, 200, "ok")

	if _, err := NewHandler(basic.app, Options{BasicAuthUser: "only-user"}); err == nil {
		t.Fatal("half-configured basic auth accepted")
	}
	if _, err := NewHandler(nil, Options{}); err != ErrNilApp {
		t.Fatalf("nil app: %v", err)
	}
}

func TestCrossOriginAndCSRF(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	f.do("POST", "/fom/api/schedules/alpha/exec", "", "Origin", "https://evil.example").expect(t, 403, "cross-origin request refused")
	f.do("POST", "/fom/api/schedules/alpha/exec", "", "Sec-Fetch-Site", "cross-site").expect(t, 403, "cross-origin request refused")
	f.do("POST", "/fom/api/schedules/alpha/exec", "", "Origin", "null").expect(t, 403, "cross-origin request refused")
	f.do("POST", "/fom/api/schedules/alpha/exec", "", "Origin", "http://"+testHost, "Sec-Fetch-Site", "same-origin").expect(t, 200, "ok")
	f.sleeping("alpha")
	// DNS rebinding: Host and Origin both the attacker's name.
	f.do("PATCH", "/fom/api/schedules/alpha/config", `{"remark":"pwned"}`, "Host", "evil.example", "Origin", "http://evil.example").expect(t, 403, `host "evil.example" is not served here: add it to web.Options.AllowedHosts`)
	// Host headers only (httptest binds nothing); a port in them is ignored.
	withPort := func(h string) string { return net.JoinHostPort(h, "65000") }
	f.do("GET", "/fom/api/schedules", "", "Host", withPort("evil.example")).expect(t, 403, "")
	for _, host := range []string{withPort("localhost"), "127.0.0.2", withPort("::1"), "app.localhost"} {
		f.do("GET", "/fom/api/schedules", "", "Host", host).expect(t, 200, "ok")
	}

	// Form posts need the token of a page: the HMAC of the cookie under a
	// secret, so a cookie the attacker sets does not give a token.
	form := "csrf_token=abc"
	if r := f.do("POST", "/fom/schedules/alpha/exec", form, "Content-Type", "application/x-www-form-urlencoded"); r.status != http.StatusForbidden {
		t.Fatalf("no cookie: %d", r.status)
	}
	chosen := strings.Repeat("ab", 32)
	if r := f.do("POST", "/fom/schedules/alpha/exec", "csrf_token="+chosen, "Content-Type", "application/x-www-form-urlencoded", "Cookie", "fom_csrf="+chosen); r.status != http.StatusForbidden {
		t.Fatalf("a cookie chosen by an attacker with itself as the token: %d", r.status)
	}
	cookie, tok := f.csrf()
	if r := f.do("POST", "/fom/schedules/alpha/exec", "csrf_token=wrong", "Content-Type", "application/x-www-form-urlencoded", "Cookie", cookie); r.status != http.StatusForbidden {
		t.Fatalf("wrong token: %d", r.status)
	}
	r := f.do("POST", "/fom/schedules/alpha/exec", "csrf_token="+tok, "Content-Type", "application/x-www-form-urlencoded", "Cookie", cookie)
	if r.status != http.StatusSeeOther || !strings.Contains(r.header.Get("Location"), "msg=schedule+alpha%3A+round+requested") {
		t.Fatalf("good token: %d %v", r.status, r.header)
	}
	// A refused transition comes back with the engine's message.
	r = f.do("POST", "/fom/schedules/alpha/start", "csrf_token="+tok, "Content-Type", "application/x-www-form-urlencoded", "Cookie", cookie)
	if r.status != http.StatusSeeOther || !strings.Contains(r.header.Get("Location"), "schedule+alpha+is+already+started") || !strings.Contains(r.header.Get("Location"), "level=error") {
		t.Fatalf("refusal: %d %v", r.status, r.header)
	}
	// Mutations are never accepted on GET.
	if r := f.do("GET", "/fom/schedules/alpha/exec", ""); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("GET mutation: %d", r.status)
	}
}

type ended struct {
	fom.Schedule `name:"ended" cron:"@hourly" deadTime:"2020-01-01T00:00:00Z"`
}

func (*ended) Run(context.Context) (any, error) { return nil, nil }

// A schedule whose deadTime had passed at start is STOPPED with the
// reason, in the API, the table and its page; starting it is refused.
func TestDeadTimePastIsShownWithItsReason(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	if _, err := f.app.Register(&ended{}); err != nil {
		t.Fatal(err)
	}
	var v scheduleView
	f.do("GET", "/fom/api/schedules/ended", "").expect(t, 200, "ok").data(t, &v)
	if v.State != "STOPPED" || v.StopReason != "deadTime 2020-01-01T00:00:00Z passed" {
		t.Fatalf("view %+v", v)
	}
	f.do("POST", "/fom/api/schedules/ended/start", "").expect(t, 409, "schedule ended is past its deadTime 2020-01-01T00:00:00Z")
	for _, page := range []string{"/fom/", "/fom/schedules/ended"} {
		if body := f.do("GET", page, "").body; !strings.Contains(body, "deadTime 2020-01-01T00:00:00Z passed") {
			t.Fatalf("%s does not say why ended is stopped", page)
		}
	}
}
