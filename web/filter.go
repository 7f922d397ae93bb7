package web

import (
	"net/http"
	"sort"
	"strings"
)

// tableFilter is what the schedules table shows: rows whose name contains
// Q, in State, of Health (stalled, failing: the last round did not fully
// succeed, ok), sorted by Sort (name, next, notok; default: registration
// order). The page's form and the self-refresh both send it.
type tableFilter struct {
	Q, State, Health, Sort string
}

func filterOf(r *http.Request) tableFilter {
	q := r.URL.Query()
	return tableFilter{Q: strings.TrimSpace(q.Get("q")), State: q.Get("state"), Health: q.Get("health"), Sort: q.Get("sort")}
}

// active reports whether the filter hides or reorders anything.
func (f tableFilter) active() bool { return f != (tableFilter{}) }

func (f tableFilter) keep(r rowView) bool {
	if f.Q != "" && !strings.Contains(strings.ToLower(r.Name), strings.ToLower(f.Q)) {
		return false
	}
	if f.State != "" && r.State != f.State {
		return false
	}
	failing := r.Outcome != "" && r.Outcome != "success"
	switch f.Health {
	case "stalled":
		return r.Stalled
	case "failing":
		return failing
	case "ok":
		return !r.Stalled && !failing
	}
	return true
}

// apply filters and sorts rows.
func (f tableFilter) apply(rows []rowView) []rowView {
	out := rows[:0]
	for _, r := range rows {
		if f.keep(r) {
			out = append(out, r)
		}
	}
	switch f.Sort {
	case "name":
		sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	case "next": // soonest first, none last
		sort.SliceStable(out, func(i, j int) bool {
			a, b := out[i].nextAt, out[j].nextAt
			return !a.IsZero() && (b.IsZero() || a.Before(b))
		})
	case "notok":
		sort.SliceStable(out, func(i, j int) bool { return out[i].Failed > out[j].Failed })
	}
	return out
}
