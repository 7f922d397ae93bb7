package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/statistics/promstat"
)

//go:embed static
var staticFS embed.FS

// AuthScope says what the configured credentials protect.
type AuthScope int

const (
	// ProtectAll requires credentials for every page and API call.
	ProtectAll AuthScope = iota
	// ProtectMutations requires credentials only for changes (POST, PUT,
	// PATCH, DELETE); reading stays open.
	ProtectMutations
)

// Options configure the admin handler. Every field is optional.
type Options struct {
	// Prefix is the path the handler is served under. Default "/fom".
	// Mount the handler at this path of any router, e.g.
	// mux.Handle("/fom/", h) or chiRouter.Mount("/fom", h).
	Prefix string
	// BasicAuthUser and BasicAuthPassword, when both set, are accepted
	// credentials. Default: none.
	BasicAuthUser, BasicAuthPassword string
	// BearerToken, when set, is an accepted credential. Default: none.
	BearerToken string
	// Scope is what credentials protect when any are configured.
	// Default ProtectAll.
	Scope AuthScope
	// Refresh is how often the schedules table refreshes itself. Default 3s.
	Refresh time.Duration
	// Title is shown in the page header. Default "fom".
	Title string
	// AllowedHosts are the host names (the Host header, port ignored) the
	// handler serves; "*.example.com" matches subdomains, "*" any host.
	// Default: loopback names only (localhost, 127.0.0.0/8, ::1), so that
	// a page rebinding its DNS name to this machine cannot use it. Set it
	// to the names you expose the page under.
	AllowedHosts []string
	// Logger logs refused requests and failed writes. Default: no-op.
	Logger *zap.Logger
	// Registerer, when set, also gets fom's metrics (RegisterMetrics), so
	// that they join the service's own registry and its /metrics.
	// {prefix}/metrics serves them either way.
	Registerer prometheus.Registerer
}

// ErrNilApp is returned by NewHandler without an app.
var ErrNilApp = errors.New("fom/web: app is nil")

type handler struct {
	cop     *http.CrossOriginProtection
	secret  [32]byte // keys CSRF tokens; new with each handler
	app     *fom.App
	o       Options
	base    string
	log     *zap.Logger
	assets  map[string]asset // by versioned name
	version string
	router  chi.Router
	metrics http.Handler
}

type asset struct {
	body  []byte
	ctype string
}

// NewHandler returns the admin page and JSON API of app as one handler.
func NewHandler(app *fom.App, o Options) (http.Handler, error) {
	if app == nil {
		return nil, ErrNilApp
	}
	base, err := normalizePrefix(o.Prefix)
	if err != nil {
		return nil, err
	}
	if o.Refresh <= 0 {
		o.Refresh = 3 * time.Second
	}
	if o.Title == "" {
		o.Title = "fom"
	}
	if (o.BasicAuthUser == "") != (o.BasicAuthPassword == "") {
		return nil, errors.New("fom/web: BasicAuthUser and BasicAuthPassword must be set together")
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	h := &handler{app: app, o: o, base: base, log: o.Logger.Named("web"), assets: map[string]asset{}, cop: http.NewCrossOriginProtection()}
	rand.Read(h.secret[:])
	if err := h.loadAssets(); err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	if err := RegisterMetrics(app, reg); err != nil {
		return nil, err
	}
	if o.Registerer != nil {
		if err := RegisterMetrics(app, o.Registerer); err != nil {
			return nil, err
		}
	}
	h.metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	h.router = h.routes()
	return h, nil
}

func normalizePrefix(p string) (string, error) {
	if p == "" {
		p = "/fom"
	}
	p = "/" + strings.Trim(p, "/")
	if p == "/" {
		return "", nil
	}
	if strings.ContainsAny(p, "?#{} ") {
		return "", fmt.Errorf("fom/web: prefix %q contains a character not allowed in a path", p)
	}
	return p, nil
}

// loadAssets versions each static file by a hash of its content, so it can
// be cached for good and still change with a new build.
func (h *handler) loadAssets() error {
	sum := sha256.New()
	for _, f := range []struct{ name, ctype string }{{"htmx.min.js", "text/javascript; charset=utf-8"}, {"fom.css", "text/css; charset=utf-8"}} {
		b, err := fs.ReadFile(staticFS, "static/"+f.name)
		if err != nil {
			return fmt.Errorf("fom/web: embedded asset %s: %w", f.name, err)
		}
		sum.Write(b)
		h.assets[f.name] = asset{body: b, ctype: f.ctype}
	}
	h.version = hex.EncodeToString(sum.Sum(nil))[:12]
	return nil
}

func (h *handler) asset(name string) string { return h.base + "/static/" + h.version + "/" + name }

// ServeHTTP routes on the full request path, so the handler works however
// it is mounted (a chi parent's routing state is dropped here).
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r = r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, nil))
	h.router.ServeHTTP(w, r)
}

func (h *handler) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(h.recoverer, h.securityHeaders, h.allowHost, h.authenticate, h.sameOrigin)
	r.NotFound(h.notFound)
	r.MethodNotAllowed(h.methodNotAllowed)
	if h.base != "" {
		r.Get(h.base, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, h.base+"/", http.StatusMovedPermanently)
		})
	}
	r.Route(h.base+"/", func(r chi.Router) {
		r.Get("/", h.pageIndex)
		r.Get("/fragments/schedules", h.fragmentTable)
		r.Get("/static/{version}/{file}", h.serveAsset)
		r.Get("/metrics", h.metrics.ServeHTTP)
		r.Route("/schedules/{name}", func(r chi.Router) {
			r.Get("/", h.pageSchedule)
			r.Get("/preview", h.fragmentPreview)
			r.Get("/rounds/{seq}", h.fragmentRound)
			r.With(h.csrf).Post("/{action:start|stop|exec}", h.formAction)
			r.With(h.csrf).Post("/config", h.formConfig)
			r.With(h.csrf).Post("/config/{key}/reset", h.formReset)
			r.With(h.csrf).Post("/log-level", h.formLogLevel)
			r.With(h.csrf).Post("/stats-settings", h.formStatsSettings)
		})
		r.Route("/api", func(r chi.Router) {
			r.Get("/schedules", h.apiList)
			r.Route("/schedules/{name}", func(r chi.Router) {
				r.Get("/", h.apiGet)
				r.Post("/{action:start|stop|exec}", h.apiAction)
				r.Get("/config", h.apiConfig)
				r.Patch("/config", h.apiPatchConfig)
				r.Delete("/config/{key}", h.apiResetKey)
				r.Get("/log-level", h.apiLogLevel)
				r.Put("/log-level", h.apiPutLogLevel)
				r.Get("/stats", h.apiStats)
				r.Put("/stats/settings", h.apiPutStatsSettings)
				r.Get("/failures", h.apiFailures)
				r.Get("/tasks", h.apiTasks)
				r.Get("/export", h.apiExport)
				r.Get("/audit", h.apiAudit)
				r.Get("/rounds", h.apiRounds)
				r.Get("/rounds/{seq}", h.apiRound)
				r.Get("/preview", h.apiPreview)
			})
			r.Get("/cluster", h.apiCluster)
			r.Get("/openapi.json", h.apiOpenAPI)
			r.Route("/timers", func(r chi.Router) {
				r.Get("/", h.apiTimers)
				r.Get("/counts", h.apiTimerCounts)
				r.Get("/{id}", h.apiTimer)
				r.Get("/{id}/fires", h.apiTimerFires)
				r.Post("/{id}/{action:enable|disable}", h.apiTimerAction)
				r.Delete("/{id}", h.apiTimerAction)
				r.Post("/{id}/fires/{planned}/{action:retry}", h.apiTimerAction)
			})
		})
		r.Route("/timers", func(r chi.Router) {
			r.Get("/", h.pageTimers)
			r.Get("/{id}", h.pageTimer)
			r.With(h.csrf).Post("/{id}/{action:enable|disable|delete}", h.formTimerAction)
			r.With(h.csrf).Post("/{id}/fires/{planned}/{action:retry}", h.formTimerAction)
		})
	})
	return r
}

func (h *handler) serveAsset(w http.ResponseWriter, r *http.Request) {
	a, ok := h.assets[chi.URLParam(r, "file")]
	if !ok || chi.URLParam(r, "version") != h.version {
		h.notFound(w, r)
		return
	}
	w.Header().Set("Content-Type", a.ctype)
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	w.Write(a.body)
}

// RegisterMetrics registers app's metrics (its schedules' statistics, and
// its durable timers') with r: a service's own registry, served at its own
// /metrics beside the rest of its metrics. On a cluster store each series
// carries the instance as the label fom_instance. NewHandler registers them
// with the handler's registry (served at {prefix}/metrics) and with
// Options.Registerer.
func RegisterMetrics(app *fom.App, r prometheus.Registerer) error {
	if app == nil {
		return ErrNilApp
	}
	if id := app.InstanceID(); id != "" { // several instances report the same schedules
		r = prometheus.WrapRegistererWith(prometheus.Labels{"fom_instance": id}, r)
	}
	if err := r.Register(promstat.NewCollector(func() []promstat.Source { return sourcesOf(app) })); err != nil {
		return fmt.Errorf("fom/web: register metrics: %w", err)
	}
	if err := r.Register(newTimerMetrics(app)); err != nil {
		return fmt.Errorf("fom/web: register timer metrics: %w", err)
	}
	return nil
}

func sourcesOf(app *fom.App) []promstat.Source {
	var out []promstat.Source
	for _, sc := range app.Schedules() {
		i := sc.Info()
		out = append(out, promstat.Source{Schedule: i.Name, State: i.State.String(), Stats: sc.Stats(), Waiting: i.Waiting, Active: i.Active,
			Stalled: i.Stalled, LastOutcome: string(i.LastOutcome), LastSuccess: i.LastSuccess, LastLate: i.LastLate, ConsecutiveFailures: i.ConsecutiveFailures})
	}
	return out
}

// schedule finds the {name} schedule or answers 404.
func (h *handler) schedule(w http.ResponseWriter, r *http.Request) *fom.ScheduleContext {
	name := chi.URLParam(r, "name")
	sc := h.app.Schedule(name)
	if sc == nil {
		if h.isAPI(r) {
			h.jsonError(w, http.StatusNotFound, fmt.Sprintf("schedule %s not found", name), nil)
		} else {
			h.renderStatus(w, r, http.StatusNotFound, notFoundPage(h.page(r, "Not found"), "schedule "+name+" not found"))
		}
	}
	return sc
}

func (h *handler) isAPI(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, h.base+"/api/") || r.URL.Path == h.base+"/api"
}

func (h *handler) notFound(w http.ResponseWriter, r *http.Request) {
	if h.isAPI(r) {
		h.jsonError(w, http.StatusNotFound, "no such API route: "+r.Method+" "+r.URL.Path, nil)
		return
	}
	h.renderStatus(w, r, http.StatusNotFound, notFoundPage(h.page(r, "Not found"), "no page at "+r.URL.Path))
}

func (h *handler) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	msg := "method " + r.Method + " not allowed on " + r.URL.Path
	if h.isAPI(r) {
		h.jsonError(w, http.StatusMethodNotAllowed, msg, nil)
		return
	}
	http.Error(w, msg, http.StatusMethodNotAllowed)
}

func (h *handler) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				h.log.Error("handler panicked", zap.Any("panic", p), zap.String("path", r.URL.Path), zap.Stack("stack"))
				http.Error(w, "internal error", http.StatusInternalServerError)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func (h *handler) securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:; script-src 'self'; frame-ancestors 'none'")
		next.ServeHTTP(w, r)
	})
}
