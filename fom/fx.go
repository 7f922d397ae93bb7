package fom

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/fom-go/fom/internal/fxconfig"
	"github.com/fom-go/fom/store"
)

// Config configures the App that Module provides. Supplying it is optional.
type Config struct {
	// DataDir is the embedded store's directory. Default: ./fom-data.
	DataDir string
	// DatabaseURL, when set, selects the PostgreSQL store at this address
	// (postgres://user@host:5432/db) instead of the embedded one; the
	// graph then needs pgfx.Module (store/postgres/pgfx), which opens it.
	// Default: none.
	DatabaseURL string
	// DatabaseSchema is the PostgreSQL schema of fom's tables. Default "fom".
	DatabaseSchema string
}

// Module provides *fom.App to an fx application and ties Start and Stop to
// its lifecycle. The hooks never block: Start only starts schedules, and
// Stop waits no longer than fx's stop timeout.
var Module = fx.Module("fom",
	fx.Provide(newFxApp),
)

// fxParams takes the Config supplied either way, fx.Supply(fom.Config{...})
// or fx.Supply(&fom.Config{...}): fx keeps them as two types, and a
// config that is silently ignored is worse than none.
type fxParams struct {
	fx.In
	Lifecycle   fx.Lifecycle
	Config      *Config      `optional:"true"`
	ConfigValue Config       `optional:"true"`
	Logger      *zap.Logger  `optional:"true"`
	Slog        *slog.Logger `optional:"true"` // used when the graph has no *zap.Logger
	Store       store.Store  `optional:"true"` // pgfx.Module's PostgreSQL store, or another
}

func newFxApp(p fxParams) (*App, error) {
	cfg, err := fxconfig.One(p.Config, p.ConfigValue)
	if err != nil {
		return nil, err
	}
	var opts []Option
	if cfg.DataDir != "" {
		opts = append(opts, WithDataDir(cfg.DataDir))
	}
	switch {
	case p.Store != nil:
		opts = append(opts, WithStore(p.Store))
	case cfg.DatabaseURL != "":
		return nil, errors.New("fom: Config.DatabaseURL is set but no store is provided: add pgfx.Module (github.com/fom-go/fom/store/postgres/pgfx) to the graph, which opens it")
	}
	if p.Logger != nil {
		opts = append(opts, WithLogger(p.Logger))
	} else if p.Slog != nil {
		opts = append(opts, WithSlog(p.Slog))
	}
	opts = append(opts, func(o *options) error { o.lazyStore = true; return nil })
	app, err := New(opts...)
	if err != nil {
		return nil, err
	}
	p.Lifecycle.Append(fx.Hook{OnStart: app.Start, OnStop: app.Stop})
	return app, nil
}

// Job provides a job built by constructor (a function whose first result is
// a pointer to a job struct, optionally followed by an error, with its
// dependencies as parameters) and registers it with the app. The job is
// also available to the rest of the graph.
func Job(constructor any) fx.Option {
	ct := reflect.TypeOf(constructor)
	if ct == nil || ct.Kind() != reflect.Func || ct.NumOut() == 0 {
		return fx.Error(fmt.Errorf("fom.Job: want a constructor function, got %T", constructor))
	}
	jobT := ct.Out(0)
	name := funcName(constructor)
	// The App is asked for as an optional field of a parameter object, so
	// that a graph without fom.Module gets fom's words rather than fx's
	// "missing type: *fom.App" blamed on a reflect stub:
	// func(p struct{ fx.In; App *App `optional:"true"`; Job T }) error.
	paramT := reflect.StructOf([]reflect.StructField{
		{Name: "In", Type: reflect.TypeFor[fx.In](), Anonymous: true},
		{Name: "App", Type: reflect.TypeFor[*App](), Tag: `optional:"true"`},
		{Name: "Job", Type: jobT},
	})
	invokeT := reflect.FuncOf([]reflect.Type{paramT}, []reflect.Type{errType}, false)
	invoke := reflect.MakeFunc(invokeT, func(args []reflect.Value) []reflect.Value {
		errV := reflect.New(errType).Elem()
		app, _ := args[0].Field(1).Interface().(*App)
		var err error
		if app == nil {
			err = fmt.Errorf("fom.Job(%s): no *fom.App in the graph: add fom.Module to fx.New", name)
		} else if _, err = app.Register(args[0].Field(2).Interface()); err != nil {
			err = fmt.Errorf("fom.Job(%s): %w", name, err)
		}
		if err != nil {
			errV.Set(reflect.ValueOf(err))
		}
		return []reflect.Value{errV}
	})
	return fx.Options(fx.Provide(wrapConstructor(constructor, ct, name)), fx.Invoke(invoke.Interface()))
}

// wrapConstructor is constructor with its error, when it returns one,
// naming it and the job it builds.
func wrapConstructor(constructor any, ct reflect.Type, name string) any {
	if ct.NumOut() < 2 || ct.Out(ct.NumOut()-1) != errType {
		return constructor
	}
	cv := reflect.ValueOf(constructor)
	return reflect.MakeFunc(ct, func(args []reflect.Value) []reflect.Value {
		out := cv.Call(args)
		last := out[len(out)-1]
		if !last.IsNil() {
			err := fmt.Errorf("fom.Job: the constructor %s of %s failed: %w", name, ct.Out(0), last.Interface().(error))
			out[len(out)-1] = reflect.ValueOf(&err).Elem()
		}
		return out
	}).Interface()
}

// funcName is a function's package-qualified name, for messages.
func funcName(f any) string {
	if fn := runtime.FuncForPC(reflect.ValueOf(f).Pointer()); fn != nil {
		return fn.Name()
	}
	return fmt.Sprintf("%T", f)
}
