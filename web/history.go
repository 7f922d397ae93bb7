package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"go.uber.org/zap"

	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/statistics"
)

// The run history: the schedule page lists recent rounds; each opens to
// its tasks (a fragment loaded on demand, so the page does not carry up to
// 100 task results per round it lists).

const (
	historyShown    = 20   // rounds on the schedule page
	historyAPILimit = 1000 // most rounds one API call returns
)

// roundRow is a round as the page lists it.
type roundRow struct {
	Number, Cause     string
	Start, StartTitle string
	Late, Duration    string
	Outcome, Counts   string
	TasksURL, JSONURL string
	Instance          string
}

func (h *handler) historyRows(ctx context.Context, sc *fom.ScheduleContext, now time.Time) ([]roundRow, error) {
	rounds, err := h.app.History(ctx, sc.Name(), historyShown)
	if err != nil {
		return nil, err
	}
	base := h.base + "/schedules/" + url.PathEscape(sc.Name()) + "/rounds/"
	api := h.base + "/api/schedules/" + url.PathEscape(sc.Name()) + "/rounds/"
	rows := make([]roundRow, 0, len(rounds))
	for _, r := range rounds {
		q := strconv.FormatInt(r.Seq, 10)
		if r.Instance != "" {
			q += "?instance=" + url.QueryEscape(r.Instance)
		}
		// Each instance numbers its own rounds: in a cluster a round is
		// named by its instance too, so that no two read "#1".
		number := "#" + strconv.FormatInt(r.Number, 10)
		if r.Instance != "" {
			number = r.Instance + " " + number
		}
		if r.Batch {
			number = "batch " + number
		}
		cause := r.Cause
		if cause == "catchup" {
			cause = "catch-up of missed fires"
		}
		if r.By != "" {
			cause += " by " + r.By
		}
		rows = append(rows, roundRow{
			Number: number, Cause: cause, Instance: r.Instance,
			Start: relTime(r.Start, now), StartTitle: "planned " + absTime(r.Planned) + ", started " + absTime(r.Start),
			Late: shortDur(r.Late), Duration: shortDur(r.Duration),
			Outcome: r.Outcome, Counts: countsText(r.Counts),
			TasksURL: base + q, JSONURL: api + q,
		})
	}
	return rows, nil
}

// countsText lists the non-zero counts in the statuses' order.
func countsText(c map[string]int64) string {
	var parts []string
	for _, name := range statistics.StatusNames() {
		if n := c[name]; n > 0 {
			parts = append(parts, strconv.FormatInt(n, 10)+" "+name)
		}
	}
	if len(parts) == 0 {
		return "no tasks"
	}
	return strings.Join(parts, " · ")
}

// roundOf reads the round a request names: {seq} and ?instance=.
func (h *handler) roundOf(r *http.Request, sc *fom.ScheduleContext) (statistics.RoundRecord, int, error) {
	seq, err := strconv.ParseInt(chi.URLParam(r, "seq"), 10, 64)
	if err != nil || seq < 1 {
		return statistics.RoundRecord{}, http.StatusBadRequest, fmt.Errorf("round %q: a sequence number from 1, as the history lists it", chi.URLParam(r, "seq"))
	}
	rec, ok, err := h.app.Round(r.Context(), sc.Name(), r.URL.Query().Get("instance"), seq)
	switch {
	case err != nil:
		return rec, http.StatusServiceUnavailable, err
	case !ok:
		return rec, http.StatusNotFound, fmt.Errorf("schedule %s: round %d is not in the history (it keeps the last %d)", sc.Name(), seq, sc.Stats().Settings().Rounds)
	}
	return rec, http.StatusOK, nil
}

// apiRounds answers the run history, newest first (?limit=, default 50,
// at most 1000), without the tasks; apiRound answers one round with them.
func (h *handler) apiRounds(w http.ResponseWriter, r *http.Request) {
	sc := h.schedule(w, r)
	if sc == nil {
		return
	}
	limit, ok := h.limit(w, r, 50, historyAPILimit)
	if !ok {
		return
	}
	rounds, err := h.app.History(r.Context(), sc.Name(), limit)
	if err != nil {
		h.jsonError(w, http.StatusServiceUnavailable, err.Error(), nil)
		return
	}
	for i := range rounds {
		rounds[i].Tasks = nil
	}
	if rounds == nil {
		rounds = []statistics.RoundRecord{}
	}
	h.json(w, http.StatusOK, rounds)
}

func (h *handler) apiRound(w http.ResponseWriter, r *http.Request) {
	sc := h.schedule(w, r)
	if sc == nil {
		return
	}
	rec, status, err := h.roundOf(r, sc)
	if err != nil {
		h.jsonError(w, status, err.Error(), nil)
		return
	}
	h.json(w, http.StatusOK, rec)
}

// taskRow is a task of a round as the page shows it.
type taskResultRow struct {
	ID, Status, Started, Cost, Error, Stack string
	Good                                    bool
}

// fragmentRound renders a round's tasks, for the history's rows.
func (h *handler) fragmentRound(w http.ResponseWriter, r *http.Request) {
	sc := h.schedule(w, r)
	if sc == nil {
		return
	}
	rec, status, err := h.roundOf(r, sc)
	if err != nil {
		if status == http.StatusServiceUnavailable {
			h.log.Warn("reading a round failed", zap.String("schedule", sc.Name()), zap.Error(err))
		}
		if r.Header.Get("HX-Request") == "true" {
			status = http.StatusOK // htmx swaps only a success: show the reason in place
		}
		h.renderStatus(w, r, status, roundFragment(nil, 0, err.Error()))
		return
	}
	rows := make([]taskResultRow, len(rec.Tasks))
	for i, t := range rec.Tasks {
		rows[i] = taskResultRow{ID: t.ID, Status: t.Status, Started: fmtTime(t.Started), Cost: shortDur(t.Cost), Error: t.Error, Stack: t.Stack, Good: t.Status == "success"}
	}
	h.render(w, r, roundFragment(rows, rec.Omitted, ""))
}
