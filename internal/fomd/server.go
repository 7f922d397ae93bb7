// Package fomd is the timer service: durable timers with HTTP callbacks
// behind a REST API (cmd/fomd is its binary). It stands on fom's timer
// service (package timer) and its stores: SQLite for one process,
// PostgreSQL for several instances sharing the work, each fire claimed by
// one of them and taken over by another when its lease runs out.
//
// The REST API is declared with huma, so that its OpenAPI document
// (/api/v1/openapi.json) is generated from the handlers and cannot drift
// from them. Callbacks are sent by package timer/webhook.
package fomd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humachi"
	"github.com/go-chi/chi/v5"
	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"

	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/store"
	"github.com/fom-go/fom/store/postgres"
	"github.com/fom-go/fom/store/sqlite"
	"github.com/fom-go/fom/timer"
	"github.com/fom-go/fom/timer/webhook"
	"github.com/fom-go/fom/web"
)

// Server is one fomd instance.
type Server struct {
	cfg        Config
	log        *zap.Logger
	clock      clockwork.Clock
	st         store.Store
	app        *fom.App
	timers     *timer.Service
	ns         *namespaces
	guard      *webhook.Guard
	sender     *webhook.Sender
	adminToken string

	srv      *http.Server
	ln       net.Listener
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// Option sets what a test or an embedding program changes.
type Option func(*options)

type options struct {
	clock clockwork.Clock
	log   *zap.Logger
}

// WithClock drives the timers with c (tests).
func WithClock(c clockwork.Clock) Option { return func(o *options) { o.clock = c } }

// WithLogger logs to l.
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.log = l } }

// New opens the store, builds the service and binds cfg.Addr. Start
// serves.
func New(ctx context.Context, cfg Config, opts ...Option) (s *Server, err error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	o := options{clock: clockwork.NewRealClock(), log: zap.NewNop()}
	for _, opt := range opts {
		opt(&o)
	}
	installErrors()
	s = &Server{cfg: cfg, log: o.log, clock: o.clock, stop: make(chan struct{}), done: make(chan struct{})}
	defer func() {
		if err != nil && s.st != nil {
			s.st.Close()
		}
	}()
	if s.adminToken, err = adminToken(cfg); err != nil {
		return nil, err
	}
	if cfg.DatabaseURL != "" {
		s.st, err = postgres.Open(ctx, cfg.DatabaseURL, postgres.WithSchema(cfg.Schema))
	} else {
		s.st, err = sqlite.Open(ctx, cfg.DataDir)
	}
	if err != nil {
		return nil, err
	}
	nst, ok := s.st.(store.NamespaceStore)
	if !ok {
		return nil, fmt.Errorf("fomd: the store %T keeps no namespaces", s.st)
	}
	appOpts := []fom.Option{fom.WithStore(s.st), fom.WithLogger(s.log), fom.WithClock(s.clock), fom.WithTimerOptions(timer.Options{Lease: cfg.Lease})}
	if cfg.InstanceID != "" {
		appOpts = append(appOpts, fom.WithInstanceID(cfg.InstanceID))
	}
	if s.app, err = fom.New(appOpts...); err != nil {
		return nil, err
	}
	s.timers = s.app.Timers()
	s.ns = newNamespaces(nst, s.timers, s.clock.Now)
	s.guard = webhook.NewGuard(cfg.AllowPrivate, cfg.Allow...)
	s.sender = webhook.New(webhook.Options{Secrets: s.ns.secrets, Guard: s.guard, MaxConcurrent: cfg.MaxConcurrent, Clock: s.clock})
	if err := s.timers.Handle(webhook.Kind, s.sender.Handle, timer.WithTimeout(webhook.DefaultTimeout)); err != nil {
		return nil, err
	}
	if s.ln, err = net.Listen("tcp", cfg.Addr); err != nil {
		return nil, fmt.Errorf("fomd: listen on %s: %w", cfg.Addr, err)
	}
	h, err := s.handler()
	if err != nil {
		s.ln.Close()
		return nil, err
	}
	s.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	return s, nil
}

// adminToken is the configured token, else the one saved in the data
// dir, else a new one saved there.
func adminToken(cfg Config) (string, error) {
	if cfg.AdminToken != "" {
		return cfg.AdminToken, nil
	}
	if cfg.DataDir == "" {
		return "", errors.New("fomd: no --admin-token and no --data-dir to keep a generated one in")
	}
	path := filepath.Join(cfg.DataDir, "admin-token")
	b, err := os.ReadFile(path)
	if err == nil {
		tok := strings.TrimSpace(string(b))
		if len(tok) < 16 {
			return "", fmt.Errorf("fomd: %s holds %d characters; an admin token has at least 16 (remove the file to have one generated)", path, len(tok))
		}
		return tok, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("fomd: read the admin token: %w", err)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return "", fmt.Errorf("fomd: data dir: %w", err)
	}
	tok := newToken("fomadm_")
	// O_EXCL: two processes starting at once on one dir keep one token.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return adminToken(cfg)
	}
	if err != nil {
		return "", fmt.Errorf("fomd: save the admin token: %w", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("fomd: save the admin token: %w", err)
	}
	return tok, f.Close()
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the server's base URL.
func (s *Server) URL() string { return "http://" + s.Addr() }

// AdminToken is the admin bearer token.
func (s *Server) AdminToken() string { return s.adminToken }

// Timers is the timer service (tests, and programs embedding fomd).
func (s *Server) Timers() *timer.Service { return s.timers }

// loopback says whether the server listens on loopback only.
func (s *Server) loopback() bool {
	host, _, _ := net.SplitHostPort(s.Addr())
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Start starts delivering and serving.
func (s *Server) Start(ctx context.Context) error {
	if err := s.app.Start(ctx); err != nil {
		return err
	}
	if err := s.ensureDefault(ctx); err != nil {
		s.app.Stop(context.WithoutCancel(ctx))
		return err
	}
	if err := s.ns.reload(ctx); err != nil {
		s.log.Warn("reading namespaces", zap.Error(err))
	}
	go s.refresh()
	go func() {
		if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("serving", zap.Error(err))
		}
	}()
	s.log.Info("fomd serving", zap.String("addr", s.Addr()), zap.String("url", s.URL()))
	return nil
}

// refresh re-reads the namespaces (another instance's changes).
func (s *Server) refresh() {
	defer close(s.done)
	t := s.clock.NewTicker(s.cfg.Refresh)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.Chan():
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := s.ns.reload(ctx); err != nil {
				s.log.Warn("reading namespaces", zap.Error(err))
			}
			cancel()
		}
	}
}

// Shutdown stops serving requests, stops claiming fires, gives back those
// claimed and not begun, and waits for deliveries under way until ctx
// ends (one still running then is left to its lease: another instance, or
// the next start, delivers it again with the same key). Safe twice.
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	s.stopOnce.Do(func() {
		herr := s.srv.Shutdown(ctx)
		close(s.stop)
		aerr := s.app.Stop(ctx)
		s.sender.Close()
		select {
		case <-s.done:
		case <-ctx.Done():
		}
		cerr := s.st.Close()
		if errors.Is(herr, http.ErrServerClosed) {
			herr = nil
		}
		err = errors.Join(herr, aerr, cerr)
	})
	return err
}

// handler routes the API, the probes, the metrics and the admin page.
func (s *Server) handler() (http.Handler, error) {
	r := chi.NewRouter()
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	r.Get("/readyz", func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithTimeout(req.Context(), 2*time.Second)
		defer cancel()
		if _, _, err := s.ns.st.GetNamespace(ctx, "default"); err != nil {
			http.Error(w, "store not answering: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ready\n"))
	})
	wo := web.Options{Prefix: "/fom", Title: "fomd", Logger: s.log}
	if !s.loopback() {
		wo.BearerToken, wo.BasicAuthUser, wo.BasicAuthPassword = s.adminToken, "admin", s.adminToken
		wo.AllowedHosts = []string{"*"} // credentials protect it; operators reach it under their own name
	}
	page, err := web.NewHandler(s.app, wo)
	if err != nil {
		return nil, err
	}
	r.Mount("/fom", page)
	r.Get("/metrics", func(w http.ResponseWriter, req *http.Request) {
		req = req.Clone(req.Context())
		req.URL.Path = "/fom/metrics"
		page.ServeHTTP(w, req)
	})
	r.NotFound(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasPrefix(req.URL.Path, "/api/") {
			writeErr(w, apiErr(http.StatusNotFound, "", "no route %s %s (the routes are in /api/v1/openapi.json)", req.Method, req.URL.Path))
			return
		}
		http.NotFound(w, req)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		writeErr(w, apiErr(http.StatusMethodNotAllowed, "", "%s is not allowed on %s", req.Method, req.URL.Path))
	})
	cfg := huma.DefaultConfig("fomd", "1")
	cfg.Info.Description = "Durable timers with HTTP callbacks, delivered at least once, signed the Standard Webhooks way."
	cfg.OpenAPIPath = "/api/v1/openapi"
	cfg.DocsPath = "" // the docs page loads scripts from a CDN
	cfg.SchemasPath = "/api/v1/schemas"
	cfg.CreateHooks = nil // no $schema links in bodies: the shapes are the contract's
	cfg.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"bearer": {Type: "http", Scheme: "bearer", Description: "the admin token, or a namespace's token"},
	}
	api := huma.NewAPI(cfg, adapter{r: r, auth: s.auth})
	s.registerTimers(api)
	s.registerNamespaces(api)
	return r, nil
}

// adapter is huma's chi adapter with auth in front of every operation
// that declares a security requirement (not the OpenAPI document).
type adapter struct {
	r    chi.Router
	auth func(http.Handler) http.Handler
}

func (a adapter) Handle(op *huma.Operation, h func(huma.Context)) {
	var hf http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(humachi.NewContext(op, r, w)) })
	if len(op.Security) > 0 {
		hf = a.auth(hf)
	}
	a.r.Method(op.Method, op.Path, hf)
}

func (a adapter) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.r.ServeHTTP(w, r) }

// writeErr writes e as the API's JSON error.
func writeErr(w http.ResponseWriter, e *APIError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	json.NewEncoder(w).Encode(e)
}

// auth resolves the bearer token into the request's principal.
func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || tok == "" {
			writeErr(w, apiErr(http.StatusUnauthorized, "Authorization", "a bearer token is required: Authorization: Bearer <admin or namespace token>"))
			return
		}
		p, ok, err := s.authenticate(r.Context(), strings.TrimSpace(tok))
		if err != nil {
			writeErr(w, apiErr(http.StatusServiceUnavailable, "", "checking the token: %s", err))
			return
		}
		if !ok {
			writeErr(w, apiErr(http.StatusUnauthorized, "Authorization", "the bearer token is neither the admin token nor a namespace's"))
			return
		}
		// curl -d sends a form's content type: a body is read as JSON
		// unless it says another JSON type.
		if ct := r.Header.Get("Content-Type"); r.ContentLength != 0 && (ct == "" || strings.HasPrefix(ct, "application/x-www-form-urlencoded") || strings.HasPrefix(ct, "text/plain")) {
			r.Header.Set("Content-Type", "application/json")
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// Banner is what fomd prints once it serves: where, the admin token and
// how to create a first timer.
func Banner(s *Server, cfg Config) string {
	where := "SQLite in " + cfg.DataDir
	if cfg.DatabaseURL != "" {
		where = "PostgreSQL, schema " + cfg.Schema + ", instance " + s.app.InstanceID()
	}
	return fmt.Sprintf(`fomd is serving on %[1]s (%[2]s)
  admin token:  %[3]s
  admin page:   %[1]s/fom/
  OpenAPI:      %[1]s/api/v1/openapi.json

Create a timer that calls a URL back in a minute, in the namespace "default":

  curl -s -X POST %[1]s/api/v1/timers \
    -H 'Authorization: Bearer %[3]s' -H 'Content-Type: application/json' \
    -d '{"namespace": "default", "name": "hello", "at": "%[4]s",
         "callback": {"url": "https://example.com/hook", "body": {"hello": "world"}}}'

Its signing secret: curl -s -H 'Authorization: Bearer %[3]s' %[1]s/api/v1/namespaces/default
`, s.URL(), where, s.adminToken, s.clock.Now().Add(time.Minute).UTC().Format(time.RFC3339))
}
