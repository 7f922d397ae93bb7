package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/a-h/templ"
	"github.com/go-chi/chi/v5"
	"go.uber.org/zap"

	"github.com/fom-go/fom/cluster"
	"github.com/fom-go/fom/config"
	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/store"
)

// pageCtx is what every page needs.
type pageCtx struct {
	Title, AppTitle, Base, CSRF, CSS, JS string
	Refresh                              string
	Flash, FlashLevel                    string
	Timers                               bool // the app uses durable timers: the header links to them
}

func (p pageCtx) hxHeaders() string {
	b, _ := json.Marshal(map[string]string{csrfHeader: p.CSRF})
	return string(b)
}

func (h *handler) page(r *http.Request, title string) pageCtx {
	p := pageCtx{Title: title, AppTitle: h.o.Title, Base: h.base, CSS: h.asset("fom.css"), JS: h.asset("htmx.min.js"), Refresh: h.o.Refresh.String(), Timers: h.app.TimersInUse() != nil}
	q := r.URL.Query()
	if msg := q.Get("msg"); msg != "" {
		p.Flash, p.FlashLevel = msg, "info"
		if q.Get("level") == "error" {
			p.FlashLevel = "error"
		}
	}
	return p
}

func (h *handler) pageWithCSRF(w http.ResponseWriter, r *http.Request, title string) pageCtx {
	p := h.page(r, title)
	p.CSRF = h.csrfToken(w, r)
	return p
}

func (h *handler) render(w http.ResponseWriter, r *http.Request, c templ.Component) {
	h.renderStatus(w, r, http.StatusOK, c)
}

func (h *handler) renderStatus(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := c.Render(r.Context(), w); err != nil {
		h.log.Warn("render failed", zap.Error(err))
	}
}

// rowView is one schedule as the table shows it.
type rowView struct {
	Name, URL, State, Plan, Remark, Last, Next, LogLevel string
	Rounds, Success, Failed                              int64
	Waiting, Active, Abandoned                           int
	Stalled                                              bool
	// LastTitle and NextTitle are the absolute times (with zone) behind
	// the relative Last and Next; Outcome is the last round's.
	LastTitle, NextTitle, Outcome string
	Owner                         string // the instance that runs it, in a cluster
	StopReason                    string // why a STOPPED schedule stopped by itself
	OwnerNote                     string // the owner is not answering, and when another takes over
	ClusterCounts                 bool   // Rounds, Success and Failed are every instance's
	// Health colours the row (failing, stalled, late, ok); Failing says
	// since when and how many rounds in a row, LastError the newest
	// failure's first line.
	Health, Failing, LastError string
	lastAt                     time.Time
	nextAt                     time.Time
}

// relTime says how far t is from now ("3 min ago", "in 12 s"); "—" for none.
func relTime(t, now time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := now.Sub(t)
	future := d < 0
	if future {
		d = -d
	}
	var s string
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		s = strconv.Itoa(int(d/time.Second)) + " s"
	case d < time.Hour:
		s = strconv.Itoa(int(d/time.Minute)) + " min"
	case d < 48*time.Hour:
		s = strconv.Itoa(int(d/time.Hour)) + " h"
	default:
		s = strconv.Itoa(int(d/(24*time.Hour))) + " d"
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}

// absTime is t with its date and zone, for a title.
func absTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Local().Format("2006-01-02 15:04:05 MST")
}

// stallTitle explains a stalled schedule on hover.
func (r rowView) stallTitle() string {
	return fmt.Sprintf("%d of the workers are held by tasks past their timeout that have not returned; %d tasks wait behind them and time out after taskOverTime", r.Abandoned, r.Waiting)
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	t = t.Local()
	if y, m, d := t.Date(); y == time.Now().Year() && m == time.Now().Month() && d == time.Now().Day() {
		return t.Format("15:04:05")
	}
	return t.Format("2006-01-02 15:04:05")
}

func (h *handler) scheduleURL(name string) string {
	return h.base + "/schedules/" + url.PathEscape(name)
}

// lastTitle explains the last fire: when, how late, and the last success.
func lastTitle(i fom.Info) string {
	if i.Last.IsZero() {
		return ""
	}
	s := absTime(i.Last)
	if i.LastOutcome != "" {
		s += ", " + strconv.FormatFloat(i.LastLate.Seconds()*1000, 'f', 1, 64) + " ms late"
	}
	if !i.LastSuccess.IsZero() {
		s += "; last full success " + absTime(i.LastSuccess)
	} else if i.LastOutcome != "" {
		s += "; no full success since the start"
	}
	return s
}

func (h *handler) rowOf(sc *fom.ScheduleContext) rowView {
	i := sc.Info()
	now := time.Now()
	return rowView{
		Name: i.Name, URL: h.scheduleURL(i.Name), State: i.State.String(), Plan: i.Plan, Remark: i.Remark,
		Last: relTime(i.Last, now), Next: relTime(i.Next, now), LogLevel: sc.LogLevel().String(),
		LastTitle: lastTitle(i), NextTitle: absTime(i.Next), Outcome: string(i.LastOutcome), nextAt: i.Next, lastAt: i.Last,
		Rounds: i.Rounds, Success: i.Counts.Success, Failed: i.Counts.Total() - i.Counts.Success, Waiting: i.Waiting, Active: i.Active,
		Abandoned: i.Abandoned, Stalled: i.Stalled, StopReason: i.StopReason,
		Health: healthOf(i), Failing: failingText(i, now), LastError: clip(lastError(sc, i), 160),
	}
}

// failingText says since when a schedule fails: "failing since 09:12 (7
// rounds in a row), last success 08:58".
func failingText(i fom.Info, now time.Time) string {
	if i.ConsecutiveFailures == 0 {
		return ""
	}
	s := "failing since " + clockTime(i.FailingSince, now) + " (" + strconv.Itoa(i.ConsecutiveFailures) + " round"
	if i.ConsecutiveFailures > 1 {
		s += "s in a row"
	}
	s += ")"
	if !i.LastSuccess.IsZero() {
		s += ", last success " + clockTime(i.LastSuccess, now)
	} else {
		s += ", no success since the start"
	}
	return s
}

// clockTime is t as a reader of today's page wants it: 15:04:05 today,
// with the date before.
func clockTime(t, now time.Time) string {
	if t.IsZero() {
		return "—"
	}
	t = t.In(now.Location())
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04:05")
	}
	return t.Format("Jan 2 15:04:05")
}

// clip is s's first line, at most n bytes (cut on a rune).
func clip(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// rows is the page of the table a request asks for.
func (h *handler) rows(r *http.Request) ([]rowView, pager) {
	var out []rowView
	scs := h.app.Schedules()
	leases := h.leases(r.Context(), scs)
	for _, sc := range scs {
		row := h.rowOf(sc)
		if l, ok := leases[sc.Name()]; ok {
			row.withLease(l)
		}
		out = append(out, row)
	}
	f := filterOf(r)
	rows, pg := f.pageOf(f.apply(out))
	if leases != nil {
		h.clusterCounts(r.Context(), rows)
	}
	return rows, pg
}

// roundsTitle says what the rounds and outcome counts count.
func (r rowView) roundsTitle() string {
	if r.ClusterCounts {
		return "rounds every instance ran, over the statistics' retention days"
	}
	return "scheduled rounds started since this process started"
}

// withLease shows the cluster's view of a row's schedule: its owner and
// the owner's standing, and the cluster's last fire, whichever instance
// ran it.
func (r *rowView) withLease(l cluster.Lease) {
	r.Owner = l.Owner
	if l.Owner != "" && !l.Answering {
		r.OwnerNote = "owner " + l.Owner + " not answering since " + fmtTime(l.Heartbeat) + "; another instance takes over by " + fmtTime(l.TakeoverBy)
	}
	if l.LastFire.After(r.lastAt) {
		r.lastAt = l.LastFire
		r.Last, r.LastTitle = relTime(l.LastFire, time.Now()), absTime(l.LastFire)
	}
}

// leases are the schedules' leases in a cluster (one query), or nil.
func (h *handler) leases(ctx context.Context, scs []*fom.ScheduleContext) map[string]cluster.Lease {
	names := make([]string, len(scs))
	for i, sc := range scs {
		names[i] = sc.Name()
	}
	l, ok, err := h.app.Leases(ctx, names)
	if !ok || err != nil {
		return nil
	}
	return l
}

// clusterCounts shows the rows' rounds and outcomes summed over every
// instance (the statistics' retention window), rather than this
// instance's since it started: a non-owner runs none of them.
func (h *handler) clusterCounts(ctx context.Context, rows []rowView) {
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.Name
	}
	totals, ok, err := h.app.ClusterTotals(ctx, names) // one query for the page
	if !ok || err != nil {
		if err != nil {
			h.log.Warn("cluster statistics unavailable; showing this instance's", zap.Error(err))
		}
		return
	}
	for i := range rows {
		if t, ok := totals[rows[i].Name]; ok {
			rows[i].Rounds, rows[i].Success, rows[i].Failed, rows[i].ClusterCounts = t.Rounds, t.Success, t.Tasks-t.Success, true
		}
	}
}

func (h *handler) pageIndex(w http.ResponseWriter, r *http.Request) {
	rows, pg := h.rows(r)
	h.render(w, r, indexPage(h.pageWithCSRF(w, r, "Schedules"), rows, pg, h.clusterOf(r)))
}

// clusterView is the index page's cluster card; Shown is false when the
// app is not one of a cluster.
type clusterView struct {
	Shown    bool
	Error    string
	Self     string
	Rows     []instanceRow
	Orphaned []string
	// Disagreements say which schedules live instances declare
	// differently, one sentence each.
	Disagreements []string
}

type instanceRow struct {
	ID, Host, Heartbeat, State string
	Bad                        bool // not answering
	Owned                      int
}

func (h *handler) clusterOf(r *http.Request) clusterView {
	v, ok, err := h.app.Cluster(r.Context())
	if !ok {
		return clusterView{}
	}
	cv := clusterView{Shown: true, Self: v.Instance, Orphaned: v.Orphaned}
	for _, d := range v.Disagreements {
		cv.Disagreements = append(cv.Disagreements, d.String()+". The instance holding the lease runs its own; edits saved here override every instance's.")
	}
	if !v.Status.Trusted {
		cv.Error = "this instance cannot renew its leases (last renewal " + fmtTime(v.Status.LastRenewal) + "): it runs none of its schedules until the database answers again"
		if v.Status.Error != "" {
			cv.Error += ": " + v.Status.Error
		}
	}
	if err != nil {
		if cv.Error == "" {
			cv.Error = err.Error()
		}
		return cv
	}
	for _, in := range v.Instances {
		st, bad := "live", false
		switch {
		case in.Stopped:
			st = "stopped"
		case !in.Answering:
			// Two renewals missed: shown at once, not after the lease TTL.
			st, bad = "not answering since "+fmtTime(in.Heartbeat), true
		}
		cv.Rows = append(cv.Rows, instanceRow{ID: in.ID, Host: in.Host, Heartbeat: fmtTime(in.Heartbeat), State: st, Bad: bad, Owned: in.Owned})
	}
	return cv
}

func (h *handler) fragmentTable(w http.ResponseWriter, r *http.Request) {
	rows, pg := h.rows(r)
	h.render(w, r, tableBody(h.page(r, "Schedules"), rows, pg))
}

// cfgEntry is one config row of the editor.
type cfgEntry struct {
	entryView
	Shown string // the value in the input: the operator's text after a failed save
	Error string
}

type dayRow struct {
	Day, Count, Success, Failed, Timeout, Min, Avg, P50, P95, P99, Max, Rounds, LateP99 string
}

type failureRow struct {
	At, Round, TaskID, Status, Cost, Error, Stack string
	Chain                                         []string
}

type taskRow struct {
	ID, Round, Started, Submitted, Elapsed, Stack string
	Abandoned                                     bool
}

type auditRow struct {
	At, Action, Principal, Detail, Outcome string
	Refused                                bool
}

func auditRows(entries []store.AuditEntry) []auditRow {
	out := make([]auditRow, 0, len(entries))
	for _, e := range entries {
		out = append(out, auditRow{At: absTime(e.At), Action: e.Action, Principal: e.Principal, Detail: e.Detail, Outcome: e.Outcome, Refused: e.Outcome != "ok"})
	}
	return out
}

type statsView struct {
	RetentionDays int
	Thresholds    string
	Scope         string // "every instance" when the days are summed over a cluster
}

type detailView struct {
	Row                   rowView
	Loaded, Outcomes      string
	Batches               int64
	Config                []cfgEntry
	Groups                []cfgGroup // Config as the editor groups it
	Stats                 statsView
	DayChart, BucketChart svgChart
	Days                  []dayRow
	Failures              []failureRow
	Unsaved               int64 // failures dropped before they could be saved
	Audit                 []auditRow
	AuditURL              string
	History               []roundRow
	HistoryURL            string
	HistoryError          string
	HistoryKept           int
	HistoryUnsaved        int64
	KeptFailures          int
	Active, Waiting       []taskRow
	ExportBase            string
}

func (h *handler) detail(ctx context.Context, sc *fom.ScheduleContext, typed map[string]string, errs map[string]string) detailView {
	i := sc.Info()
	c := i.Counts
	row := h.rowOf(sc)
	if leases := h.leases(ctx, []*fom.ScheduleContext{sc}); leases != nil {
		row.withLease(leases[sc.Name()])
		one := []rowView{row}
		h.clusterCounts(ctx, one)
		row = one[0]
	}
	v := detailView{Row: row, Loaded: fmtTime(i.Loaded), Batches: i.Batches, ExportBase: h.base + "/api/schedules/" + url.PathEscape(i.Name) + "/export",
		Unsaved: sc.Stats().Unsaved(), KeptFailures: sc.Stats().Settings().Failures,
		AuditURL: h.base + "/api/schedules/" + url.PathEscape(i.Name) + "/audit", HistoryURL: h.base + "/api/schedules/" + url.PathEscape(i.Name) + "/rounds",
		HistoryKept: sc.Stats().Settings().Rounds, HistoryUnsaved: sc.Stats().UnsavedRounds()}
	if rows, err := h.historyRows(ctx, sc, time.Now()); err == nil {
		v.History = rows
	} else {
		v.HistoryError = err.Error()
	}
	if row.ClusterCounts {
		v.Outcomes = "every instance: " + strconv.FormatInt(row.Success, 10) + " ok, " + strconv.FormatInt(row.Failed, 10) + " not ok · this instance since it started: "
	}
	v.Outcomes += "success " + strconv.FormatInt(c.Success, 10) + " · failed " + strconv.FormatInt(c.Failed, 10) + " · timeout " + strconv.FormatInt(c.Timeout, 10) +
		" · rejected " + strconv.FormatInt(c.Rejected, 10) + " · conflict " + strconv.FormatInt(c.Conflict, 10) + " · canceled " + strconv.FormatInt(c.Canceled, 10)
	for _, e := range entriesOf(sc) {
		ce := cfgEntry{entryView: e, Shown: e.Value, Error: errs[e.Key]}
		if t, ok := typed[e.Key]; ok {
			ce.Shown = t
		}
		v.Config = append(v.Config, ce)
	}
	v.Groups = groupEntries(v.Config)
	st := sc.Stats()
	set := st.Settings()
	v.Stats = statsView{RetentionDays: set.RetentionDays, Thresholds: strings.Join(settingsBody(set).Thresholds, ", ")}
	if entries, err := h.app.AuditLog(ctx, sc.Name(), 20); err == nil {
		v.Audit = auditRows(entries)
	} else {
		h.log.Warn("reading the audit trail failed", zap.Error(err))
	}
	days := st.Days()
	if h.app.InstanceID() != "" { // a cluster: what every instance ran
		if all, err := h.app.ClusterDays(ctx, sc.Name()); err == nil {
			days, v.Stats.Scope = all, "every instance"
		} else {
			h.log.Warn("cluster statistics unavailable; showing this instance's", zap.Error(err))
			v.Stats.Scope = "this instance only: " + err.Error()
		}
	}
	var buckets [6]int64
	for _, d := range days {
		for k, n := range d.Buckets {
			buckets[k] += n
		}
		v.Days = append(v.Days, dayRow{
			Day: d.Day.Format(time.DateOnly), Count: strconv.FormatInt(d.Count, 10), Success: strconv.FormatInt(d.ByStatus["success"], 10),
			Failed: strconv.FormatInt(d.ByStatus["failed"], 10), Timeout: strconv.FormatInt(d.ByStatus["timeout"], 10),
			Min: shortDur(d.Min), Avg: shortDur(d.Avg), P50: shortDur(d.P50), P95: shortDur(d.P95), P99: shortDur(d.P99), Max: shortDur(d.Max),
			Rounds: strconv.FormatInt(d.Rounds, 10), LateP99: shortDur(d.LateP99),
		})
		row := &v.Days[len(v.Days)-1]
		if d.Count == 0 { // no cost measured: not a cost of 0
			row.Min, row.Avg, row.P50, row.P95, row.P99, row.Max = "—", "—", "—", "—", "—", "—"
		}
		if d.Rounds == 0 {
			row.LateP99 = "—"
		}
	}
	v.DayChart = dayChart(days)
	v.BucketChart = bucketChart(st.BucketLabels(), buckets)
	for _, fl := range st.Failures() {
		round := "—"
		if fl.Round > 0 {
			round = strconv.FormatInt(fl.Round, 10)
			if fl.Batch {
				round = "batch " + round
			}
		}
		v.Failures = append(v.Failures, failureRow{At: absTime(fl.At), Round: round, TaskID: fl.TaskID, Status: fl.Status, Cost: shortDur(fl.Cost), Error: fl.Error, Stack: fl.Stack, Chain: fl.Chain})
	}
	for _, t := range sc.ActiveTasks() {
		v.Active = append(v.Active, taskRow{ID: t.ID, Round: roundName(t.Round, t.Batch), Started: fmtTime(t.Started), Elapsed: shortDur(t.Elapsed), Stack: t.Stack, Abandoned: t.Abandoned})
	}
	for _, t := range sc.WaitingTasks() {
		v.Waiting = append(v.Waiting, taskRow{ID: t.ID, Round: roundName(t.Round, t.Batch), Submitted: fmtTime(t.Submitted), Elapsed: shortDur(t.Elapsed)})
	}
	return v
}

func roundName(n int64, batch bool) string {
	if batch {
		return "batch " + strconv.FormatInt(n, 10)
	}
	return "round " + strconv.FormatInt(n, 10)
}

func (h *handler) pageSchedule(w http.ResponseWriter, r *http.Request) {
	sc := h.schedule(w, r)
	if sc == nil {
		return
	}
	h.render(w, r, schedulePage(h.pageWithCSRF(w, r, sc.Name()), h.detail(r.Context(), sc, nil, nil)))
}

// back redirects to the page the form came from, with a flash message.
func (h *handler) back(w http.ResponseWriter, r *http.Request, to, msg string, isErr bool) {
	q := url.Values{"msg": {msg}}
	if isErr {
		q.Set("level", "error")
	}
	http.Redirect(w, r, to+"?"+q.Encode(), http.StatusSeeOther)
}

// returnTo is where a form on the table or on a schedule page goes back to.
func (h *handler) returnTo(r *http.Request, sc *fom.ScheduleContext) string {
	if ref, err := url.Parse(r.Referer()); err == nil && ref.Path == h.scheduleURL(sc.Name()) {
		return ref.Path
	}
	return h.base + "/"
}

func (h *handler) formAction(w http.ResponseWriter, r *http.Request) {
	sc := h.schedule(w, r)
	if sc == nil {
		return
	}
	action := chi.URLParam(r, "action")
	if err := h.act(r, sc, action); err != nil {
		h.back(w, r, h.returnTo(r, sc), err.Error(), true)
		return
	}
	msgs := map[string]string{"start": "started", "stop": "stopping", "exec": "round requested"}
	h.back(w, r, h.returnTo(r, sc), "schedule "+sc.Name()+": "+msgs[action], false)
}

func (h *handler) formConfig(w http.ResponseWriter, r *http.Request) {
	sc := h.schedule(w, r)
	if sc == nil {
		return
	}
	if err := r.ParseForm(); err != nil {
		h.back(w, r, h.scheduleURL(sc.Name()), "bad form: "+err.Error(), true)
		return
	}
	// Only send what changed, so an untouched field never fails an edit.
	kinds := map[string]string{}
	for _, e := range entriesOf(sc) {
		kinds[e.Key] = e.Kind
	}
	typed := map[string]string{}
	changes := map[string]string{}
	for k, vs := range r.PostForm {
		key, ok := strings.CutPrefix(k, "cfg.")
		if !ok || len(vs) == 0 {
			continue
		}
		v := vs[len(vs)-1] // a toggle sends "false" (hidden) then "true" when on
		typed[key] = v
		if !sc.Config().Has(key) || !sameValue(kinds[key], sc.Config().Get(key), v) {
			changes[key] = v
		}
	}
	if len(changes) == 0 {
		h.back(w, r, h.scheduleURL(sc.Name()), "nothing changed", false)
		return
	}
	err := h.applyConfig(r, sc, changes)
	if err == nil {
		h.back(w, r, h.scheduleURL(sc.Name()), "configuration saved", false)
		return
	}
	errs := map[string]string{}
	var ve *config.ValidationError
	status := http.StatusInternalServerError
	if errors.As(err, &ve) {
		status = http.StatusBadRequest
		for _, p := range ve.Problems {
			errs[p.Key] = p.Reason
		}
	}
	p := h.pageWithCSRF(w, r, sc.Name())
	p.Flash, p.FlashLevel = "Nothing was saved: "+err.Error(), "error"
	h.renderStatus(w, r, status, schedulePage(p, h.detail(r.Context(), sc, typed, errs)))
}

func (h *handler) formReset(w http.ResponseWriter, r *http.Request) {
	sc := h.schedule(w, r)
	if sc == nil {
		return
	}
	key := chi.URLParam(r, "key")
	if err := h.resetConfig(r, sc, key); err != nil {
		h.back(w, r, h.scheduleURL(sc.Name()), err.Error(), true)
		return
	}
	h.back(w, r, h.scheduleURL(sc.Name()), key+" reset to its default", false)
}

func (h *handler) formLogLevel(w http.ResponseWriter, r *http.Request) {
	sc := h.schedule(w, r)
	if sc == nil {
		return
	}
	err := h.changeLogLevel(r, sc, r.PostFormValue("level"))
	if r.Header.Get("HX-Request") == "true" {
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if err != nil {
		h.back(w, r, h.returnTo(r, sc), err.Error(), true)
		return
	}
	h.back(w, r, h.returnTo(r, sc), "log level of "+sc.Name()+" set to "+sc.LogLevel().String(), false)
}

func (h *handler) formStatsSettings(w http.ResponseWriter, r *http.Request) {
	sc := h.schedule(w, r)
	if sc == nil {
		return
	}
	var b statsSettingsBody
	if t := strings.TrimSpace(r.PostFormValue("thresholds")); t != "" {
		b.Thresholds = strings.Split(t, ",")
	}
	if d := strings.TrimSpace(r.PostFormValue("retentionDays")); d != "" {
		n, err := strconv.Atoi(d)
		if err != nil || n == 0 {
			h.back(w, r, h.scheduleURL(sc.Name()), "retention days "+strconv.Quote(d)+" is not a positive whole number", true)
			return
		}
		b.RetentionDays = n
	}
	if d := strings.TrimSpace(r.PostFormValue("rounds")); d != "" {
		n, err := strconv.Atoi(d)
		if err != nil || n == 0 {
			h.back(w, r, h.scheduleURL(sc.Name()), "rounds kept "+strconv.Quote(d)+" is not a positive whole number", true)
			return
		}
		b.Rounds = n
	}
	if err := h.saveStatsSettings(r, sc, b); err != nil {
		h.back(w, r, h.scheduleURL(sc.Name()), "statistics settings not saved: "+err.Error(), true)
		return
	}
	h.back(w, r, h.scheduleURL(sc.Name()), "statistics settings saved", false)
}

// isPlanKey reports whether the editor previews a key's next fires.
func isPlanKey(k string) bool {
	return k == config.KeyCron || k == config.KeyFixedRate || k == config.KeyFixedDelay
}

// optionLabel shows an empty filter value as what it means.
func optionLabel(v, empty string) string {
	if v == "" {
		return empty
	}
	return v
}
