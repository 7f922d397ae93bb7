package web

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/fom-go/fom/config"
	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/schedule"
)

// previewFires is how many fires a preview lists.
const previewFires = 5

// planPreview is the next fires a plan being edited would give.
type planPreview struct {
	Plan   string            `json:"plan"`
	Zone   string            `json:"zone"`
	Fires  []time.Time       `json:"fires"`
	Errors map[string]string `json:"errors,omitempty"`
	Error  string            `json:"error,omitempty"`
}

// previewOf validates the plan keys in changes as an edit would (nothing
// is saved) and lists the next fires in the schedule's zone: the cron
// spec's CRON_TZ, else the server's.
func previewOf(sc *fom.ScheduleContext, changes map[string]string, now time.Time) planPreview {
	s, err := sc.Config().Check(changes)
	if err != nil {
		pv := planPreview{Error: err.Error()}
		var ve *config.ValidationError
		if errors.As(err, &ve) {
			pv.Errors = map[string]string{}
			for _, p := range ve.Problems {
				pv.Errors[p.Key] = p.Reason
			}
		}
		return pv
	}
	plan, err := schedule.PlanOf(s)
	if err != nil {
		return planPreview{Error: err.Error()}
	}
	if plan == nil {
		return planPreview{Plan: "none: a managed pool, no fire of its own"}
	}
	loc := time.Local
	if s.Cron != "" {
		if cs, err := config.ParseCron(s.Cron); err == nil {
			if spec, ok := cs.(*cron.SpecSchedule); ok && spec.Location != time.Local {
				loc = spec.Location
			}
		}
	}
	pv := planPreview{Plan: plan.String(), Zone: loc.String()}
	for _, f := range schedule.NextFires(plan, now.In(loc), previewFires) {
		pv.Fires = append(pv.Fires, f.In(loc))
	}
	return pv
}

// planChanges takes the plan keys a request asks to preview, from query
// parameters (API) or cfg.-prefixed form fields (the editor).
func planChanges(r *http.Request, sc *fom.ScheduleContext) map[string]string {
	out := map[string]string{}
	for _, k := range []string{config.KeyCron, config.KeyFixedRate, config.KeyFixedDelay} {
		v, ok := r.URL.Query()[k]
		if !ok {
			v, ok = r.URL.Query()["cfg."+k]
		}
		if ok && len(v) > 0 && strings.TrimSpace(v[0]) != strings.TrimSpace(sc.Config().Get(k)) {
			out[k] = v[0]
		}
	}
	return out
}

// apiPreview answers the next fires of the plan given as query parameters
// (cron, fixedRate, fixedDelay; the others keep their values), 400 with
// the problems when it would not be accepted.
func (h *handler) apiPreview(w http.ResponseWriter, r *http.Request) {
	sc := h.schedule(w, r)
	if sc == nil {
		return
	}
	pv := previewOf(sc, planChanges(r, sc), time.Now())
	if pv.Error != "" {
		h.jsonError(w, http.StatusBadRequest, pv.Error, map[string]any{"errors": pv.Errors})
		return
	}
	h.json(w, http.StatusOK, pv)
}

// fragmentPreview renders the editor's preview of the next fires.
func (h *handler) fragmentPreview(w http.ResponseWriter, r *http.Request) {
	sc := h.schedule(w, r)
	if sc == nil {
		return
	}
	pv := previewOf(sc, planChanges(r, sc), time.Now())
	rows := make([]string, len(pv.Fires))
	for i, f := range pv.Fires {
		rows[i] = f.Format("Mon 2006-01-02 15:04:05 MST")
	}
	h.render(w, r, previewFragment(pv, rows))
}
