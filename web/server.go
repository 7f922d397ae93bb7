package web

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/internal/fxconfig"
)

// Config configures the standalone admin server.
type Config struct {
	// Addr is the listen address. Default "127.0.0.1:8080": loopback only,
	// so exposing the page is a decision, not an accident.
	Addr string
	// Options configure the handler; Options.Prefix defaults to "/fom".
	Options Options
}

// DefaultAddr is the admin server's default listen address.
const DefaultAddr = "127.0.0.1:8080"

// Server serves the admin page on its own listener.
type Server struct {
	cfg Config
	h   http.Handler
	log *zap.Logger

	mu   sync.Mutex
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// NewServer builds a server for app. It listens only once started.
func NewServer(app *fom.App, cfg Config) (*Server, error) {
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	h, err := NewHandler(app, cfg.Options)
	if err != nil {
		return nil, err
	}
	log := cfg.Options.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Server{cfg: cfg, h: h, log: log.Named("web")}, nil
}

// Handler returns the admin handler, to mount in a router of your own.
func (s *Server) Handler() http.Handler { return s.h }

// Start binds the listener (a port clash is an error here, not later) and
// serves in the background. It returns once listening.
func (s *Server) Start(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return errors.New("fom/web: server already started")
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("fom/web: listen on %s: %w", s.cfg.Addr, err)
	}
	prefix, _ := normalizePrefix(s.cfg.Options.Prefix)
	mux := http.NewServeMux()
	mux.Handle(prefix+"/", s.h)
	mux.Handle(prefix, s.h)
	if prefix != "" {
		mux.Handle("/{$}", http.RedirectHandler(prefix+"/", http.StatusFound))
	}
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.ln = ln
	s.done = make(chan struct{})
	go func(srv *http.Server, done chan struct{}) {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("admin server stopped", zap.Error(err))
		}
	}(s.srv, s.done)
	s.log.Info("admin page", zap.String("url", "http://"+ln.Addr().String()+prefix+"/"))
	return nil
}

// Addr returns the bound address once started ("" before).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Stop shuts the server down gracefully within ctx. Safe before Start and
// twice.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	srv, done := s.srv, s.done
	s.srv, s.ln = nil, nil
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	if err != nil {
		srv.Close()
	}
	<-done
	return err
}

// Module serves the admin page of the fx graph's *fom.App on Config.Addr
// (an optional web.Config or *web.Config; default 127.0.0.1:8080, path /fom/).
// The listener is bound in OnStart, so a port clash fails startup.
var Module = fx.Module("fom-web",
	fx.Provide(newFxServer),
	fx.Invoke(func(*Server) {}),
)

type fxParams struct {
	fx.In
	Lifecycle   fx.Lifecycle
	App         *fom.App
	Config      *Config     `optional:"true"`
	ConfigValue Config      `optional:"true"` // fx.Supply(web.Config{...}) works as well
	Logger      *zap.Logger `optional:"true"`
}

func newFxServer(p fxParams) (*Server, error) {
	cfg, err := fxconfig.One(p.Config, p.ConfigValue)
	if err != nil {
		return nil, err
	}
	if cfg.Options.Logger == nil {
		cfg.Options.Logger = p.Logger
	}
	s, err := NewServer(p.App, cfg)
	if err != nil {
		return nil, err
	}
	p.Lifecycle.Append(fx.Hook{OnStart: s.Start, OnStop: s.Stop})
	return s, nil
}
