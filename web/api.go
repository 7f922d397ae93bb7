package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/fom-go/fom/cluster"
	"github.com/fom-go/fom/config"
	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/schedule"
	"github.com/fom-go/fom/statistics"
	"github.com/fom-go/fom/store"
)

// envelope is every API body: code 0 and msg "ok" on success, else the HTTP
// status and what went wrong.
type envelope struct {
	Code int    `json:"code"`
	Msg  string `json:"msg"`
	Data any    `json:"data"`
}

func (h *handler) json(w http.ResponseWriter, status int, data any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	enc.Encode(envelope{Code: 0, Msg: "ok", Data: data})
}

func (h *handler) jsonError(w http.ResponseWriter, status int, msg string, data any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(envelope{Code: status, Msg: msg, Data: data})
}

type scheduleView struct {
	Name    string           `json:"name"`
	State   string           `json:"state"`
	Plan    string           `json:"plan"`
	Remark  string           `json:"remark"`
	Loaded  *time.Time       `json:"loaded,omitempty"`
	Last    *time.Time       `json:"last,omitempty"`
	Next    *time.Time       `json:"next,omitempty"`
	Rounds  int64            `json:"rounds"`
	Batches int64            `json:"batches"`
	Counts  map[string]int64 `json:"counts"`
	Waiting int              `json:"waiting"`
	Active  int              `json:"active"`
	// Abandoned tasks are past their timeout and still hold a worker;
	// Stalled: they hold every worker (see schedule.Info).
	Abandoned int    `json:"abandoned"`
	Stalled   bool   `json:"stalled"`
	LogLevel  string `json:"logLevel"`
	// StopReason: why a STOPPED schedule stopped by itself or did not
	// start (a deadTime past, a plan with no further fire).
	StopReason string `json:"stopReason,omitempty"`
	// What broke and since when: the last scheduled round's outcome, the
	// rounds in a row that did not succeed and when the first began, the
	// newest failure's error, and the health the table colours the row by
	// (failing, stalled, late, ok; "" before a round ran).
	LastOutcome         string     `json:"last_outcome,omitempty"`
	LastSuccess         *time.Time `json:"last_success,omitempty"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	FailingSince        *time.Time `json:"failing_since,omitempty"`
	LastError           string     `json:"last_error,omitempty"`
	Health              string     `json:"health"`
}

type entryView struct {
	Key      string `json:"key"`
	Value    string `json:"value"`
	Default  string `json:"default"`
	Source   string `json:"source"`
	Editable bool   `json:"editable"`
	Custom   bool   `json:"custom"`
	Doc      string `json:"doc"`
	Group    string `json:"group"`          // job, plan, pool, timeouts, behaviour
	Kind     string `json:"kind"`           // bool, duration, int, number, text
	Hint     string `json:"hint,omitempty"` // unit and bounds
}

type taskView struct {
	ID        string     `json:"id"`
	Round     int64      `json:"round"`
	Batch     bool       `json:"batch"`
	Submitted time.Time  `json:"submitted"`
	Started   *time.Time `json:"started,omitempty"`
	ElapsedMs int64      `json:"elapsedMs"`
	Abandoned bool       `json:"abandoned"`
	Stack     string     `json:"stack,omitempty"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func viewOf(sc *fom.ScheduleContext) scheduleView {
	i := sc.Info()
	c := i.Counts
	return scheduleView{
		Name: i.Name, State: i.State.String(), Plan: i.Plan, Remark: i.Remark,
		Loaded: timePtr(i.Loaded), Last: timePtr(i.Last), Next: timePtr(i.Next),
		Rounds: i.Rounds, Batches: i.Batches, Waiting: i.Waiting, Active: i.Active, Abandoned: i.Abandoned, Stalled: i.Stalled, LogLevel: sc.LogLevel().String(), StopReason: i.StopReason,
		Counts:      map[string]int64{"success": c.Success, "failed": c.Failed, "timeout": c.Timeout, "rejected": c.Rejected, "conflict": c.Conflict, "canceled": c.Canceled},
		LastOutcome: string(i.LastOutcome), LastSuccess: timePtr(i.LastSuccess), ConsecutiveFailures: i.ConsecutiveFailures,
		FailingSince: timePtr(i.FailingSince), LastError: lastError(sc, i), Health: healthOf(i),
	}
}

// lateHealth is how late a round may start before its schedule shows as
// late.
const lateHealth = time.Second

// healthOf is what the table colours a schedule's row by.
func healthOf(i fom.Info) string {
	switch {
	case i.Stalled:
		return "stalled"
	case i.ConsecutiveFailures > 0:
		return "failing"
	case i.LastOutcome == "":
		return ""
	case i.LastLate > lateHealth:
		return "late"
	}
	return "ok"
}

// lastError is the newest recorded failure's error while the schedule is
// failing ("" otherwise).
func lastError(sc *fom.ScheduleContext, i fom.Info) string {
	if i.ConsecutiveFailures == 0 {
		return ""
	}
	if fs := sc.Stats().Failures(); len(fs) > 0 {
		return fs[0].Error
	}
	return ""
}

func entriesOf(sc *fom.ScheduleContext) []entryView {
	var out []entryView
	for _, e := range sc.Config().Entries() {
		v := entryView{Key: e.Key, Value: e.Value, Default: e.Default, Source: e.Source.String(), Editable: e.Editable, Custom: e.Custom, Doc: e.Doc, Kind: e.Kind, Hint: e.Hint}
		m := metaOf(v)
		v.Group, v.Kind, v.Hint = m.Group, m.Kind, m.Hint
		out = append(out, v)
	}
	return out
}

func tasksOf(ts []schedule.TaskInfo, withStack bool) []taskView {
	out := make([]taskView, 0, len(ts))
	for _, t := range ts {
		v := taskView{ID: t.ID, Round: t.Round, Batch: t.Batch, Submitted: t.Submitted, Started: timePtr(t.Started), ElapsedMs: t.Elapsed.Milliseconds(), Abandoned: t.Abandoned}
		if withStack {
			v.Stack = t.Stack
		}
		out = append(out, v)
	}
	return out
}

// apiCluster answers the instances of the cluster, who owns each
// schedule, and the schedules no live instance can run; 404 when the app's
// store is not shared.
func (h *handler) apiCluster(w http.ResponseWriter, r *http.Request) {
	v, ok, err := h.app.Cluster(r.Context())
	switch {
	case !ok:
		h.jsonError(w, http.StatusNotFound, "this app is not one of a cluster: its store is not shared (PostgreSQL)", nil)
	case err != nil:
		h.jsonError(w, http.StatusServiceUnavailable, err.Error(), nil)
	default:
		h.json(w, http.StatusOK, v)
	}
}

func (h *handler) apiList(w http.ResponseWriter, r *http.Request) {
	out := []scheduleView{}
	for _, sc := range h.app.Schedules() {
		out = append(out, viewOf(sc))
	}
	h.json(w, http.StatusOK, out)
}

func (h *handler) apiGet(w http.ResponseWriter, r *http.Request) {
	sc := h.schedule(w, r)
	if sc == nil {
		return
	}
	h.json(w, http.StatusOK, struct {
		scheduleView
		Config []entryView `json:"config"`
	}{viewOf(sc), entriesOf(sc)})
}

// act performs start, stop or exec.

func (h *handler) apiAction(w http.ResponseWriter, r *http.Request) {
	sc := h.schedule(w, r)
	if sc == nil {
		return
	}
	// On a cluster store, start and stop reach every instance and exec the
	// schedule's owner (fom.App.Act).
	if err := h.act(r, sc, chi.URLParam(r, "action")); err != nil {
		status := http.StatusConflict // the state machine refused
		if errors.Is(err, cluster.ErrNoOwner) {
			status = http.StatusGatewayTimeout
		}
		h.jsonError(w, status, err.Error(), viewOf(sc))
		return
	}
	h.json(w, http.StatusOK, viewOf(sc))
}

func (h *handler) apiConfig(w http.ResponseWriter, r *http.Request) {
	if sc := h.schedule(w, r); sc != nil {
		h.json(w, http.StatusOK, entriesOf(sc))
	}
}

// configErrors answers a failed edit: 400 with a message per key for a
// validation error, 500 for a failed save.
func (h *handler) configErrors(w http.ResponseWriter, err error) {
	var ve *config.ValidationError
	if errors.As(err, &ve) {
		byKey := map[string]string{}
		for _, p := range ve.Problems {
			byKey[p.Key] = p.Reason
		}
		h.jsonError(w, http.StatusBadRequest, err.Error(), map[string]any{"errors": byKey})
		return
	}
	h.log.Error("config save failed", zap.Error(err))
	status := http.StatusInternalServerError
	if errors.Is(err, store.ErrGone) || errors.Is(err, context.DeadlineExceeded) {
		status = http.StatusServiceUnavailable
	}
	h.jsonError(w, status, err.Error(), nil)
}

// readJSON decodes a small JSON body: one JSON value, nothing after it,
// with no Content-Type or application/json (parameters allowed). It
// answers 400/413/415 itself on failure.
func (h *handler) readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			h.jsonError(w, http.StatusUnsupportedMediaType, "send the body as application/json", nil)
			return false
		}
	}
	const limit = 1 << 20
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, extra := dec.Token(); extra != io.EOF {
			err = errors.New("unexpected data after the JSON value")
		}
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		h.jsonError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", limit), nil)
		return false
	case err != nil:
		h.jsonError(w, http.StatusBadRequest, "bad JSON body: "+err.Error(), nil)
		return false
	}
	return true
}

// configValues turns a PATCH body into config values: strings as they
// are, numbers as written, booleans as true/false, null as "" (clear the
// key). Objects and arrays are refused, naming the key.
func configValues(raw map[string]json.RawMessage) (map[string]string, error) {
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		var x any
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.UseNumber()
		if err := dec.Decode(&x); err != nil {
			return nil, fmt.Errorf("key %q: %v", k, err)
		}
		switch x := x.(type) {
		case string:
			out[k] = x
		case json.Number:
			out[k] = x.String()
		case bool:
			out[k] = strconv.FormatBool(x)
		case nil:
			out[k] = ""
		default:
			return nil, fmt.Errorf("key %q: value %s is not a string, number, boolean or null", k, clipJSON(v))
		}
	}
	return out, nil
}

func clipJSON(v json.RawMessage) string {
	if len(v) > 40 {
		return string(v[:40]) + "…"
	}
	return string(v)
}

func (h *handler) apiPatchConfig(w http.ResponseWriter, r *http.Request) {
	sc := h.schedule(w, r)
	if sc == nil {
		return
	}
	var raw map[string]json.RawMessage
	if !h.readJSON(w, r, &raw) {
		return
	}
	if len(raw) == 0 {
		h.jsonError(w, http.StatusBadRequest, "no changes: send a JSON object of key to value", nil)
		return
	}
	changes, err := configValues(raw)
	if err != nil {
		h.jsonError(w, http.StatusBadRequest, "bad JSON body: "+err.Error(), nil)
		return
	}
	if err := h.applyConfig(r, sc, changes); err != nil {
		h.configErrors(w, err)
		return
	}
	h.json(w, http.StatusOK, entriesOf(sc))
}

func (h *handler) apiResetKey(w http.ResponseWriter, r *http.Request) {
	sc := h.schedule(w, r)
	if sc == nil {
		return
	}
	if err := h.resetConfig(r, sc, chi.URLParam(r, "key")); err != nil {
		h.configErrors(w, err)
		return
	}
	h.json(w, http.StatusOK, entriesOf(sc))
}

type levelBody struct {
	Level string `json:"level"`
}

func (h *handler) apiLogLevel(w http.ResponseWriter, r *http.Request) {
	if sc := h.schedule(w, r); sc != nil {
		h.json(w, http.StatusOK, levelBody{sc.LogLevel().String()})
	}
}

func setLevel(sc *fom.ScheduleContext, s string) error {
	var l zapcore.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return fmt.Errorf("log level %q is not one of debug, info, warn, error", s)
	}
	return sc.SetLogLevel(l)
}

func (h *handler) apiPutLogLevel(w http.ResponseWriter, r *http.Request) {
	sc := h.schedule(w, r)
	if sc == nil {
		return
	}
	var b levelBody
	if !h.readJSON(w, r, &b) {
		return
	}
	if err := h.changeLogLevel(r, sc, b.Level); err != nil {
		h.jsonError(w, http.StatusBadRequest, err.Error(), nil)
		return
	}
	h.json(w, http.StatusOK, levelBody{sc.LogLevel().String()})
}

func (h *handler) apiStats(w http.ResponseWriter, r *http.Request) {
	sc := h.schedule(w, r)
	if sc == nil {
		return
	}
	if d := r.URL.Query().Get("day"); d != "" {
		t, err := time.Parse(time.DateOnly, d)
		if err != nil {
			h.jsonError(w, http.StatusBadRequest, fmt.Sprintf("day %q is not a date such as 2026-01-02", d), nil)
			return
		}
		h.json(w, http.StatusOK, sc.Stats().Day(t))
		return
	}
	snap := sc.Stats().Snapshot()
	snap.Failures = nil
	// scope=cluster: the days summed over every instance of a shared store.
	if r.URL.Query().Get("scope") == "cluster" {
		days, err := h.app.ClusterDays(r.Context(), sc.Name())
		if err != nil {
			h.jsonError(w, http.StatusServiceUnavailable, err.Error(), nil)
			return
		}
		snap.Days = days
	}
	h.json(w, http.StatusOK, struct {
		statistics.Export
		Settings statsSettingsBody `json:"settings"`
	}{snap, settingsBody(snap.Settings)})
}

// statsSettingsBody is the API form of statistics settings: durations as
// Go duration strings.
type statsSettingsBody struct {
	Thresholds    []string `json:"thresholds"`
	RetentionDays int      `json:"retentionDays"`
	Failures      int      `json:"failures"`
	Results       int      `json:"results"`
	Rounds        int      `json:"rounds"`
}

func settingsBody(s statistics.Settings) statsSettingsBody {
	b := statsSettingsBody{RetentionDays: s.RetentionDays, Failures: s.Failures, Results: s.Results, Rounds: s.Rounds}
	for _, t := range s.Thresholds {
		b.Thresholds = append(b.Thresholds, statistics.ShortDuration(t))
	}
	return b
}

func (b statsSettingsBody) settings(cur statistics.Settings) (statistics.Settings, error) {
	s := cur
	if b.Thresholds != nil {
		if len(b.Thresholds) != 5 {
			return s, fmt.Errorf("thresholds: want 5 durations, got %d", len(b.Thresholds))
		}
		for i, v := range b.Thresholds {
			d, err := config.ParseDuration(strings.TrimSpace(v))
			if err != nil {
				return s, fmt.Errorf("thresholds[%d] %q: %v", i, v, err)
			}
			s.Thresholds[i] = d
		}
	}
	if b.RetentionDays != 0 {
		s.RetentionDays = b.RetentionDays
	}
	if b.Failures != 0 {
		s.Failures = b.Failures
	}
	if b.Results != 0 {
		s.Results = b.Results
	}
	if b.Rounds != 0 {
		s.Rounds = b.Rounds
	}
	return s, s.Validate()
}

func (h *handler) saveStatsSettings(r *http.Request, sc *fom.ScheduleContext, b statsSettingsBody) (err error) {
	before := settingsBody(sc.Stats().Settings())
	defer func() {
		h.audit(r, sc.Name(), "statsSettings", fmt.Sprintf("%+v → %+v", before, b), err)
	}()
	s, err := b.settings(sc.Stats().Settings())
	if err != nil {
		return err
	}
	st, err := h.app.Store()
	if err != nil {
		return err
	}
	return sc.Stats().SaveSettings(r.Context(), st, s)
}

func (h *handler) apiPutStatsSettings(w http.ResponseWriter, r *http.Request) {
	sc := h.schedule(w, r)
	if sc == nil {
		return
	}
	var b statsSettingsBody
	if !h.readJSON(w, r, &b) {
		return
	}
	if err := h.saveStatsSettings(r, sc, b); err != nil {
		h.jsonError(w, http.StatusBadRequest, err.Error(), nil)
		return
	}
	h.json(w, http.StatusOK, settingsBody(sc.Stats().Settings()))
}

// apiAudit answers the schedule's audit trail, newest first (?limit=,
// default 100, at most 1000).
func (h *handler) apiAudit(w http.ResponseWriter, r *http.Request) {
	sc := h.schedule(w, r)
	if sc == nil {
		return
	}
	limit, ok := h.limit(w, r, 100, store.MaxAudit)
	if !ok {
		return
	}
	entries, err := h.app.AuditLog(r.Context(), sc.Name(), limit)
	if err != nil {
		h.jsonError(w, http.StatusServiceUnavailable, err.Error(), nil)
		return
	}
	if entries == nil {
		entries = []store.AuditEntry{}
	}
	h.json(w, http.StatusOK, entries)
}

// limit reads ?limit= (def when absent, 1 to most); a bad one is answered
// with 400 and false.
func (h *handler) limit(w http.ResponseWriter, r *http.Request, def, most int) (int, bool) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		h.jsonError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: a number from 1 to %d", v, most), nil)
		return 0, false
	}
	return n, true
}

func (h *handler) apiFailures(w http.ResponseWriter, r *http.Request) {
	if sc := h.schedule(w, r); sc != nil {
		h.json(w, http.StatusOK, sc.Stats().Failures())
	}
}

func (h *handler) apiTasks(w http.ResponseWriter, r *http.Request) {
	sc := h.schedule(w, r)
	if sc == nil {
		return
	}
	switch st := r.URL.Query().Get("state"); st {
	case "", "active":
		h.json(w, http.StatusOK, tasksOf(sc.ActiveTasks(), true))
	case "waiting":
		h.json(w, http.StatusOK, tasksOf(sc.WaitingTasks(), false))
	default:
		h.jsonError(w, http.StatusBadRequest, fmt.Sprintf("state %q is not active or waiting", st), nil)
	}
}

func (h *handler) apiExport(w http.ResponseWriter, r *http.Request) {
	sc := h.schedule(w, r)
	if sc == nil {
		return
	}
	q := r.URL.Query()
	format, part := q.Get("format"), q.Get("part")
	if format == "" {
		format = "json"
	}
	stats := sc.Stats()
	stamp := time.Now().UTC().Format("20060102")
	var write func(io.Writer) error
	switch {
	case format == "json" && (part == "" || part == "all"):
		write = stats.WriteJSON
	case format == "json" && part == "days":
		write = func(w io.Writer) error { return json.NewEncoder(w).Encode(stats.Days()) }
	case format == "json" && part == "failures":
		write = func(w io.Writer) error { return json.NewEncoder(w).Encode(stats.Failures()) }
	case format == "csv" && (part == "" || part == "all"):
		write = stats.WriteCSV
	case format == "csv" && part == "days":
		write = stats.WriteDaysCSV
	case format == "csv" && part == "failures":
		write = stats.WriteFailuresCSV
	default:
		h.jsonError(w, http.StatusBadRequest, fmt.Sprintf("format %q part %q: use format=json or csv, with part=all|days|failures", format, part), nil)
		return
	}
	ctype := map[string]string{"json": "application/json; charset=utf-8", "csv": "text/csv; charset=utf-8"}[format]
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="fom-%s-%s.%s"`, safeFile(sc.Name()), stamp, format))
	if err := write(w); err != nil {
		h.log.Warn("export failed", zap.Error(err))
	}
}

func safeFile(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, s)
}
