package web

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/store"
)

// principal names who sent a request: the basic-auth user or the bearer
// token, at the client's address.
func (h *handler) principal(r *http.Request) string {
	who := "anonymous"
	if u, _, ok := r.BasicAuth(); ok && h.o.BasicAuthUser != "" {
		who = u
	} else if scheme, _, _ := strings.Cut(r.Header.Get("Authorization"), " "); strings.EqualFold(scheme, "Bearer") && h.o.BearerToken != "" {
		who = "bearer token"
	}
	return who + "@" + r.RemoteAddr
}

// audit records an action carried out (err nil) or refused. A record that
// cannot be written is logged: the action itself already happened.
func (h *handler) audit(r *http.Request, schedule, action, detail string, err error) {
	e := store.AuditEntry{Schedule: schedule, Action: action, Principal: h.principal(r), Detail: detail, Outcome: "ok"}
	if err != nil {
		e.Outcome = err.Error()
	}
	if aerr := h.app.Audit(r.Context(), e); aerr != nil {
		h.log.Warn("recording an action failed", zap.String("schedule", schedule), zap.String("action", action), zap.Error(aerr))
	}
}

// changeDetail lists each key's old and new value: `threadMax: "1" → "4"`.
func changeDetail(before, after map[string]string, keys []string) string {
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %s → %s", k, strconv.Quote(clipText(before[k])), strconv.Quote(clipText(after[k]))))
	}
	return strings.Join(parts, "; ")
}

func clipText(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

func keysOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The operators' actions, shared by the API and the forms, each recorded.

func (h *handler) act(r *http.Request, sc *fom.ScheduleContext, action string) error {
	err := h.app.Act(fom.WithActor(r.Context(), h.principal(r)), sc.Name(), action)
	h.audit(r, sc.Name(), action, "", err)
	return err
}

func (h *handler) applyConfig(r *http.Request, sc *fom.ScheduleContext, changes map[string]string) error {
	before := sc.Config().Values()
	err := sc.Config().ApplyContext(r.Context(), changes)
	h.audit(r, sc.Name(), "config", changeDetail(before, changes, keysOf(changes)), err)
	return err
}

func (h *handler) resetConfig(r *http.Request, sc *fom.ScheduleContext, key string) error {
	before := sc.Config().Values()
	err := sc.Config().ResetContext(r.Context(), key)
	h.audit(r, sc.Name(), "reset", changeDetail(before, sc.Config().Values(), []string{key}), err)
	return err
}

func (h *handler) changeLogLevel(r *http.Request, sc *fom.ScheduleContext, level string) error {
	before := sc.LogLevel().String()
	err := setLevel(sc, level)
	h.audit(r, sc.Name(), "logLevel", changeDetail(map[string]string{"level": before}, map[string]string{"level": level}, []string{"level"}), err)
	return err
}
