package web

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
)

// The admin JSON API's OpenAPI 3 document, served at {prefix}/api/openapi.json.
// It is built from apiOps, the one list of the API's operations, and
// TestOpenAPIMatchesTheRoutes walks the router to keep the two in step.

// apiOp is one operation of the admin API.
type apiOp struct {
	method, path, summary string
	query                 []string // query parameters
	body                  string   // the request body, described ("" for none)
	mutates               bool
}

func apiOps() []apiOp {
	return []apiOp{
		{method: "GET", path: "/schedules", summary: "List the schedules with their state, counts, health, failing streak and last error"},
		{method: "GET", path: "/schedules/{name}", summary: "One schedule"},
		{method: "POST", path: "/schedules/{name}/start", summary: "Start the schedule (cluster-wide on a PostgreSQL store)", mutates: true},
		{method: "POST", path: "/schedules/{name}/stop", summary: "Stop the schedule: running tasks are canceled", mutates: true},
		{method: "POST", path: "/schedules/{name}/exec", summary: "Run a round now (on the owner, in a cluster)", mutates: true},
		{method: "GET", path: "/schedules/{name}/config", summary: "The configuration: every key with its value, default, source, kind and bounds"},
		{method: "PATCH", path: "/schedules/{name}/config", summary: "Edit keys, all or nothing; the edit is saved and audited", body: `an object of key to value as strings, e.g. {"threadMax": "4", "fixedRate": "30s"}`, mutates: true},
		{method: "DELETE", path: "/schedules/{name}/config/{key}", summary: "Reset a key to its code default", mutates: true},
		{method: "GET", path: "/schedules/{name}/log-level", summary: "The schedule's log level"},
		{method: "PUT", path: "/schedules/{name}/log-level", summary: "Set the schedule's log level", body: `{"level": "debug" | "info" | "warn" | "error"}`, mutates: true},
		{method: "GET", path: "/schedules/{name}/stats", summary: "Statistics: per-day aggregates, cost buckets and percentiles"},
		{method: "PUT", path: "/schedules/{name}/stats/settings", summary: "Set the statistics' bucket thresholds, retention days and rounds kept", body: `{"thresholds": "1s,10s,1m,10m,1h", "retentionDays": 7, "rounds": 50}`, mutates: true},
		{method: "GET", path: "/schedules/{name}/failures", summary: "Recent failures, newest first, with their error chain and stack"},
		{method: "GET", path: "/schedules/{name}/tasks", summary: "Running and waiting tasks"},
		{method: "GET", path: "/schedules/{name}/export", summary: "Export statistics as CSV or JSON", query: []string{"format", "part"}},
		{method: "GET", path: "/schedules/{name}/audit", summary: "Operators' actions on the schedule, newest first", query: []string{"limit"}},
		{method: "GET", path: "/schedules/{name}/rounds", summary: "The run history, newest first", query: []string{"limit"}},
		{method: "GET", path: "/schedules/{name}/rounds/{seq}", summary: "One round with its tasks", query: []string{"instance"}},
		{method: "GET", path: "/schedules/{name}/preview", summary: "The next fires of a plan (the config's, or the one given)", query: []string{"cron", "fixedRate", "fixedDelay", "initialDelay"}},
		{method: "GET", path: "/cluster", summary: "The cluster: instances, leases, counters and declarations that disagree"},
		{method: "GET", path: "/timers", summary: "Durable timers, paged by cursor", query: []string{"namespace", "kind", "state", "cursor"}},
		{method: "GET", path: "/timers/counts", summary: "Fires by state, late and due soon", query: []string{"namespace"}},
		{method: "GET", path: "/timers/{id}", summary: "One timer"},
		{method: "GET", path: "/timers/{id}/fires", summary: "A timer's fires with their attempts"},
		{method: "POST", path: "/timers/{id}/enable", summary: "Enable a timer", mutates: true},
		{method: "POST", path: "/timers/{id}/disable", summary: "Disable a timer", mutates: true},
		{method: "DELETE", path: "/timers/{id}", summary: "Delete a timer and its fires", mutates: true},
		{method: "POST", path: "/timers/{id}/fires/{planned}/retry", summary: "Re-queue a dead fire now", mutates: true},
		{method: "GET", path: "/openapi.json", summary: "This document"},
	}
}

var pathParam = regexp.MustCompile(`\{([a-zA-Z]+)\}`)

// openAPI is the document for a handler under base.
func openAPI(base string) map[string]any {
	envelope := map[string]any{
		"type":     "object",
		"required": []string{"code", "msg"},
		"properties": map[string]any{
			"code": map[string]any{"type": "integer", "description": "0 for success, else the HTTP status"},
			"msg":  map[string]any{"type": "string", "description": `"ok", or what went wrong, naming the key and the value`},
			"data": map[string]any{"description": "the answer"},
		},
	}
	paths := map[string]any{}
	for _, op := range apiOps() {
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(op.path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		for _, q := range op.query {
			params = append(params, map[string]any{"name": q, "in": "query", "schema": map[string]any{"type": "string"}})
		}
		o := map[string]any{
			"operationId": strings.ToLower(op.method) + strings.NewReplacer("/", "-", "{", "", "}", "", ".", "-").Replace(op.path),
			"summary":     op.summary,
			"responses": map[string]any{
				"200":     map[string]any{"description": "ok", "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Envelope"}}}},
				"default": map[string]any{"description": "an error: 400 bad input, 401 or 403 credentials, 404 unknown, 409 refused by the state", "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Envelope"}}}},
			},
		}
		if len(params) > 0 {
			o["parameters"] = params
		}
		if op.body != "" {
			o["requestBody"] = map[string]any{"required": true, "description": op.body,
				"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "object"}}}}
		}
		if op.mutates {
			o["description"] = "A change: POST, PUT, PATCH or DELETE only, refused from a browser of another origin, audited with who made it."
		}
		item, _ := paths[base+"/api"+op.path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[base+"/api"+op.path] = item
		}
		item[strings.ToLower(op.method)] = o
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "fom admin API", "version": "1",
			"description": "The admin page's actions as JSON: every answer is {code, msg, data} with a real status code."},
		"paths": paths,
		"components": map[string]any{
			"schemas":         map[string]any{"Envelope": envelope},
			"securitySchemes": map[string]any{"basic": map[string]any{"type": "http", "scheme": "basic"}, "bearer": map[string]any{"type": "http", "scheme": "bearer"}},
		},
		"security": []any{map[string]any{}, map[string]any{"basic": []string{}}, map[string]any{"bearer": []string{}}},
	}
}

func (h *handler) apiOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(openAPI(h.base))
}
