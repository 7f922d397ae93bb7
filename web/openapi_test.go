package web

import (
	"encoding/json"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

// Every route under {prefix}/api is in the OpenAPI document, and every
// operation of the document is routed.
func TestOpenAPIMatchesTheRoutes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	r := f.do("GET", "/fom/api/openapi.json", "")
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Fatalf("openapi.json: %d %v", r.status, r.header)
	}
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal([]byte(r.body), &doc); err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for p, ops := range doc.Paths {
		for m, op := range ops {
			documented[strings.ToUpper(m)+" "+p] = true
			if op["summary"] == "" || op["responses"] == nil {
				t.Errorf("%s %s has no summary or responses", m, p)
			}
		}
	}
	routed := map[string]bool{}
	alt := regexp.MustCompile(`\{([a-z]+):([a-z|]+)\}`)
	err := chi.Walk(f.h.(*handler).router, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if !strings.HasPrefix(route, "/fom/api/") {
			return nil
		}
		route = strings.TrimSuffix(route, "/")
		// {action:start|stop|exec} is three operations.
		if m := alt.FindStringSubmatch(route); m != nil {
			for _, a := range strings.Split(m[2], "|") {
				routed[method+" "+strings.Replace(route, m[0], a, 1)] = true
			}
			return nil
		}
		routed[method+" "+route] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var missing, stale []string
	for k := range routed {
		if !documented[k] {
			missing = append(missing, k)
		}
	}
	for k := range documented {
		if !routed[k] {
			stale = append(stale, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 || len(stale) > 0 {
		t.Fatalf("routes not documented: %v; documented but not routed: %v", missing, stale)
	}
	if len(routed) < 25 {
		t.Fatalf("only %d routes walked", len(routed))
	}
}
