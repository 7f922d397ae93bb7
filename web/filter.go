package web

import (
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// tableFilter is what the schedules table shows: rows whose name contains
// Q, in State, of Health (stalled, failing: the last round did not fully
// succeed, ok), sorted by Sort (name, next, notok; default: registration
// order), Per rows a page, page Page. The page's form and the
// self-refresh both send it, so a refresh sends one page, not every row.
type tableFilter struct {
	Q, State, Health, Sort string
	Page, Per              int
}

// Rows a page of the schedules table: the default, and the bounds of ?per=.
const (
	defaultPer = 100
	minPer     = 10
	maxPer     = 1000
)

func filterOf(r *http.Request) tableFilter {
	q := r.URL.Query()
	f := tableFilter{Q: strings.TrimSpace(q.Get("q")), State: q.Get("state"), Health: q.Get("health"), Sort: q.Get("sort"), Page: 1, Per: defaultPer}
	if n, err := strconv.Atoi(q.Get("page")); err == nil && n > 1 {
		f.Page = n
	}
	if n, err := strconv.Atoi(q.Get("per")); err == nil {
		f.Per = min(max(n, minPer), maxPer)
	}
	return f
}

// active reports whether the filter hides or reorders anything.
func (f tableFilter) active() bool {
	return f.Q != "" || f.State != "" || f.Health != "" || f.Sort != ""
}

// pageOf cuts the filtered rows to the filter's page (the last one when
// it is past the end) and says where it is.
func (f tableFilter) pageOf(rows []rowView) ([]rowView, pager) {
	pages := max(1, (len(rows)+f.Per-1)/f.Per)
	page := min(f.Page, pages)
	from := (page - 1) * f.Per
	to := min(from+f.Per, len(rows))
	return rows[from:to], pager{Page: page, Pages: pages, From: from + 1, To: to, Total: len(rows), filter: f}
}

// pager is where a page of the table is.
type pager struct {
	Page, Pages, From, To, Total int
	filter                       tableFilter
}

// url is the index page at page n with the same filter.
func (p pager) url(base string, n int) string {
	v := url.Values{}
	for k, s := range map[string]string{"q": p.filter.Q, "state": p.filter.State, "health": p.filter.Health, "sort": p.filter.Sort} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if n > 1 {
		v.Set("page", strconv.Itoa(n))
	}
	if p.filter.Per != defaultPer {
		v.Set("per", strconv.Itoa(p.filter.Per))
	}
	if len(v) == 0 {
		return base + "/"
	}
	return base + "/?" + v.Encode()
}

// refreshURL is the fragment that refreshes this page of the table; the
// filter's fields come from the form.
func (p pager) refreshURL(base string) string {
	u := base + "/fragments/schedules?page=" + strconv.Itoa(p.Page)
	if p.filter.Per != defaultPer {
		u += "&per=" + strconv.Itoa(p.filter.Per)
	}
	return u
}

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
