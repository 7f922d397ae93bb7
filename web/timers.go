package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fom-go/fom/schedule"
	"github.com/fom-go/fom/store"
	"github.com/fom-go/fom/timer"
)

// The Timers section: counts by state, a filtered and paged list, a
// timer's page with its next fires and its fires' attempts, and the
// operator's actions (enable, disable, delete, retry-now of a dead fire),
// guarded and audited as the schedules' are. JSON under /api/timers.
// Shown when the app uses durable timers (fom.App.Timers).

// timerAudit is the audit trail's key for a timer.
func timerAudit(id string) string { return "timer:" + id }

// timers is the app's timer service, or nil with a 404 answered.
func (h *handler) timers(w http.ResponseWriter, r *http.Request) *timer.Service {
	s := h.app.TimersInUse()
	if s == nil {
		msg := "this app uses no durable timers (fom.App.Timers)"
		if h.isAPI(r) {
			h.jsonError(w, http.StatusNotFound, msg, nil)
		} else {
			h.renderStatus(w, r, http.StatusNotFound, notFoundPage(h.page(r, "Not found"), msg))
		}
	}
	return s
}

// timerFilter reads ?namespace=&kind=&state=&cursor=&limit=.
func timerFilter(r *http.Request) (timer.Filter, error) {
	q := r.URL.Query()
	f := timer.Filter{Namespace: q.Get("namespace"), Kind: q.Get("kind"), State: q.Get("state"), Cursor: q.Get("cursor"), Limit: 50}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return f, errors.New(`limit "` + v + `" is not a number from 1 to 1000`)
		}
		f.Limit = n
	}
	return f, nil
}

// timerStatus is the HTTP status of a timer service error.
func timerStatus(err error) int {
	switch {
	case errors.Is(err, timer.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, timer.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, timer.ErrNotDead), errors.Is(err, timer.ErrDuplicate):
		return http.StatusConflict
	}
	return http.StatusServiceUnavailable
}

// counts are a namespace's fires as the section's header shows them.
type timerCounts struct {
	Pending  int64 `json:"pending"`
	Running  int64 `json:"running"`
	Retrying int64 `json:"retrying"`
	Dead     int64 `json:"dead"`
	Done     int64 `json:"succeeded"`
	Late     int64 `json:"late"`
	DueSoon  int64 `json:"due_soon"`
}

func countsOf(c store.FireCounts) timerCounts {
	return timerCounts{Pending: c.ByState[store.FirePending], Running: c.ByState[store.FireRunning], Retrying: c.ByState[store.FireRetry],
		Dead: c.ByState[store.FireDead], Done: c.ByState[store.FireSucceeded], Late: c.Late, DueSoon: c.DueSoon}
}

func (h *handler) apiTimerCounts(w http.ResponseWriter, r *http.Request) {
	s := h.timers(w, r)
	if s == nil {
		return
	}
	c, err := s.Counts(r.Context(), r.URL.Query().Get("namespace"))
	if err != nil {
		h.jsonError(w, timerStatus(err), err.Error(), nil)
		return
	}
	h.json(w, http.StatusOK, countsOf(c))
}

func (h *handler) apiTimers(w http.ResponseWriter, r *http.Request) {
	s := h.timers(w, r)
	if s == nil {
		return
	}
	f, err := timerFilter(r)
	if err != nil {
		h.jsonError(w, http.StatusBadRequest, err.Error(), nil)
		return
	}
	ts, next, err := s.List(r.Context(), f)
	if err != nil {
		h.jsonError(w, timerStatus(err), err.Error(), nil)
		return
	}
	if ts == nil {
		ts = []timer.Timer{}
	}
	h.json(w, http.StatusOK, map[string]any{"timers": ts, "next_cursor": next})
}

func (h *handler) apiTimer(w http.ResponseWriter, r *http.Request) {
	s := h.timers(w, r)
	if s == nil {
		return
	}
	t, err := s.Get(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		h.jsonError(w, timerStatus(err), err.Error(), nil)
		return
	}
	h.json(w, http.StatusOK, t)
}

func (h *handler) apiTimerFires(w http.ResponseWriter, r *http.Request) {
	s := h.timers(w, r)
	if s == nil {
		return
	}
	limit, ok := h.limit(w, r, 50, 1000)
	if !ok {
		return
	}
	id := chi.URLParam(r, "id")
	if _, err := s.Get(r.Context(), id); err != nil {
		h.jsonError(w, timerStatus(err), err.Error(), nil)
		return
	}
	fs, err := s.Fires(r.Context(), id, limit)
	if err != nil {
		h.jsonError(w, timerStatus(err), err.Error(), nil)
		return
	}
	if fs == nil {
		fs = []timer.FireRecord{}
	}
	h.json(w, http.StatusOK, map[string]any{"fires": fs})
}

// timerAct carries out an operator's action on a timer, audited.
func (h *handler) timerAct(r *http.Request, s *timer.Service, id, action, planned string) error {
	var err error
	detail := ""
	switch action {
	case "enable":
		err = s.Enable(r.Context(), id)
	case "disable":
		err = s.Disable(r.Context(), id)
	case "delete":
		err = s.Delete(r.Context(), id)
	case "retry":
		detail = "fire planned " + planned
		var at time.Time
		at, err = plannedOf(planned)
		if err == nil {
			err = s.RetryFire(r.Context(), id, at)
		}
	}
	h.audit(r, timerAudit(id), action, detail, err)
	return err
}

// plannedOf reads a fire's planned time: Unix ms, or RFC 3339.
func plannedOf(v string) (time.Time, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.UnixMilli(n).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return t, &timer.SpecError{Field: "planned", Value: v, Reason: "not Unix milliseconds or an RFC 3339 time"}
	}
	return t, nil
}

func (h *handler) apiTimerAction(w http.ResponseWriter, r *http.Request) {
	s := h.timers(w, r)
	if s == nil {
		return
	}
	id, action := chi.URLParam(r, "id"), chi.URLParam(r, "action")
	if r.Method == http.MethodDelete {
		action = "delete"
	}
	if err := h.timerAct(r, s, id, action, chi.URLParam(r, "planned")); err != nil {
		h.jsonError(w, timerStatus(err), err.Error(), nil)
		return
	}
	if action == "delete" {
		h.json(w, http.StatusOK, map[string]string{"deleted": id})
		return
	}
	t, err := s.Get(r.Context(), id)
	if err != nil {
		h.jsonError(w, timerStatus(err), err.Error(), nil)
		return
	}
	h.json(w, http.StatusOK, t)
}

func (h *handler) timerURL(id string) string { return h.base + "/timers/" + url.PathEscape(id) }

// timerRow is a timer as the list shows it.
type timerRow struct {
	ID, URL, Namespace, Name, Kind, Plan, State, Next string
}

func (h *handler) timerRowOf(t timer.Timer) timerRow {
	plan := "at " + absTime(t.At)
	if t.Cron != "" {
		plan = "cron " + t.Cron
	}
	return timerRow{ID: t.ID, URL: h.timerURL(t.ID), Namespace: t.Namespace, Name: t.Name, Kind: t.Kind, Plan: plan, State: t.State, Next: relTime(t.Next, time.Now())}
}

// timersView is the Timers page.
type timersView struct {
	Counts        timerCounts
	Filter        timer.Filter
	Rows          []timerRow
	NextURL       string
	Error         string
	Kinds, States []string
}

func (h *handler) pageTimers(w http.ResponseWriter, r *http.Request) {
	s := h.timers(w, r)
	if s == nil {
		return
	}
	f, err := timerFilter(r)
	v := timersView{Filter: f, Kinds: s.Kinds(), States: []string{"enabled", "disabled", "done"}}
	if err == nil {
		var c store.FireCounts
		if c, err = s.Counts(r.Context(), f.Namespace); err == nil {
			v.Counts = countsOf(c)
		}
	}
	if err == nil {
		var ts []timer.Timer
		var next string
		if ts, next, err = s.List(r.Context(), f); err == nil {
			for _, t := range ts {
				v.Rows = append(v.Rows, h.timerRowOf(t))
			}
			if next != "" {
				q := r.URL.Query()
				q.Set("cursor", next)
				v.NextURL = h.base + "/timers/?" + q.Encode()
			}
		}
	}
	if err != nil {
		v.Error = err.Error()
	}
	h.render(w, r, timersPage(h.pageWithCSRF(w, r, "Timers"), v))
}

// timerView is a timer's page.
type timerView struct {
	Row       timerRow
	Payload   string
	NextFires []string
	Fires     []fireRow
	Audit     []auditRow
	Error     string
}

// fireRow is a fire with its attempts.
type fireRow struct {
	Planned, PlannedMS, Key, State string
	Attempt                        int
	Dead                           bool
	Attempts                       []attemptRow
}

type attemptRow struct {
	N                int
	At, Latency, Err string
	Code             string
}

func (h *handler) pageTimer(w http.ResponseWriter, r *http.Request) {
	s := h.timers(w, r)
	if s == nil {
		return
	}
	id := chi.URLParam(r, "id")
	t, err := s.Get(r.Context(), id)
	if err != nil {
		h.renderStatus(w, r, timerStatus(err), notFoundPage(h.page(r, "Not found"), err.Error()))
		return
	}
	v := timerView{Row: h.timerRowOf(t), Payload: string(t.Payload)}
	if t.Cron != "" && t.State == "enabled" {
		if p, err := schedule.CronPlan(t.Cron); err == nil {
			for _, at := range schedule.NextFires(p, time.Now(), 5) {
				v.NextFires = append(v.NextFires, absTime(at))
			}
		}
	} else if t.State == "enabled" && !t.At.IsZero() {
		v.NextFires = []string{absTime(t.At)}
	}
	fs, err := s.Fires(r.Context(), id, 50)
	if err != nil {
		v.Error = err.Error()
	}
	for _, f := range fs {
		fr := fireRow{Planned: absTime(f.Planned), PlannedMS: strconv.FormatInt(f.Planned.UnixMilli(), 10), Key: f.Key, State: f.State, Attempt: f.Attempt, Dead: f.State == store.FireDead}
		for _, a := range f.Attempts {
			code := ""
			if a.StatusCode != 0 {
				code = strconv.Itoa(a.StatusCode)
			}
			fr.Attempts = append(fr.Attempts, attemptRow{N: a.Attempt, At: absTime(a.At), Latency: shortDur(time.Duration(a.LatencyMS) * time.Millisecond), Err: a.Error, Code: code})
		}
		v.Fires = append(v.Fires, fr)
	}
	if entries, err := h.app.AuditLog(r.Context(), timerAudit(id), 20); err == nil {
		v.Audit = auditRows(entries)
	}
	h.render(w, r, timerPage(h.pageWithCSRF(w, r, t.Name), v))
}

func (h *handler) formTimerAction(w http.ResponseWriter, r *http.Request) {
	s := h.timers(w, r)
	if s == nil {
		return
	}
	id, action := chi.URLParam(r, "id"), chi.URLParam(r, "action")
	back := h.timerURL(id)
	if action == "delete" {
		back = h.base + "/timers/"
	}
	if err := h.timerAct(r, s, id, action, chi.URLParam(r, "planned")); err != nil {
		h.back(w, r, h.timerURL(id), err.Error(), true)
		return
	}
	msgs := map[string]string{"enable": "enabled", "disable": "disabled", "delete": "deleted", "retry": "fire queued again"}
	h.back(w, r, back, "timer "+id+": "+msgs[action], false)
}

// timerMetrics exports the timer service's counters and backlog.
type timerMetrics struct {
	app  interface{ TimersInUse() *timer.Service }
	late *prometheus.Desc
	outc *prometheus.Desc
	back *prometheus.Desc
}

func newTimerMetrics(app interface{ TimersInUse() *timer.Service }) *timerMetrics {
	return &timerMetrics{
		app:  app,
		late: prometheus.NewDesc("fom_timer_fire_lateness_seconds", "How late timer fires' attempts began after their planned (or retry) time.", nil, nil),
		outc: prometheus.NewDesc("fom_timer_attempts_total", "Timer fire attempts by kind and outcome (succeeded, retry, dead).", []string{"kind", "outcome"}, nil),
		back: prometheus.NewDesc("fom_timer_fires", "Timer fires in the store by state (pending, running, retry, succeeded, dead), and late ones (state \"late\").", []string{"state"}, nil),
	}
}

func (m *timerMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.late
	ch <- m.outc
	ch <- m.back
}

func (m *timerMetrics) Collect(ch chan<- prometheus.Metric) {
	s := m.app.TimersInUse()
	if s == nil {
		return
	}
	st := s.Stats()
	buckets := map[float64]uint64{}
	var cum uint64
	for i, b := range timer.LatenessBuckets() {
		cum += uint64(st.LatenessCounts[i])
		buckets[b.Seconds()] = cum
	}
	ch <- prometheus.MustNewConstHistogram(m.late, uint64(st.Attempts), st.LatenessSum.Seconds(), buckets)
	for kind, byOutcome := range st.Outcomes {
		for o, n := range byOutcome {
			ch <- prometheus.MustNewConstMetric(m.outc, prometheus.CounterValue, float64(n), kind, o)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if c, err := s.Counts(ctx, ""); err == nil {
		for _, state := range []string{store.FirePending, store.FireRunning, store.FireRetry, store.FireSucceeded, store.FireDead} {
			ch <- prometheus.MustNewConstMetric(m.back, prometheus.GaugeValue, float64(c.ByState[state]), state)
		}
		ch <- prometheus.MustNewConstMetric(m.back, prometheus.GaugeValue, float64(c.Late), "late")
	}
}

// firstLine is an error's first line, for a summary.
func firstLine(s string) string { return clip(s, 200) }
