package fom

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

type greeter struct{ word string }

type greetJob struct {
	Schedule `name:"greet" execOnLoad:"true" fixedRate:"1h"`
	g        *greeter
	done     chan string
}

func (j *greetJob) Run(context.Context) (any, error) {
	j.done <- j.g.word
	return nil, nil
}

func TestModuleStartsAndStopsTwoJobs(t *testing.T) {
	t.Parallel()
	var app *App
	done := make(chan string, 4)
	fxApp := fxtest.New(t,
		fx.NopLogger,
		Module,
		fx.Supply(&Config{DataDir: t.TempDir()}),
		fx.Provide(func() *greeter { return &greeter{word: "hello"} }),
		Job(func(g *greeter) *greetJob { return &greetJob{g: g, done: done} }),
		Job(func() (*runJob, error) { return &runJob{}, nil }),
		fx.Populate(&app),
	)
	fxApp.RequireStart()
	if got := <-done; got != "hello" {
		t.Fatalf("got %q", got)
	}
	if n := len(app.Schedules()); n != 2 {
		t.Fatalf("%d schedules", n)
	}
	if s := app.Schedule("runJob").State(); s != Sleeping {
		t.Fatalf("runJob %s", s)
	}
	fxApp.RequireStop()
	for _, sc := range app.Schedules() {
		if sc.State() != Stopped {
			t.Fatalf("%s is %s after stop", sc.Name(), sc.State())
		}
	}
}

func TestJobRejectsNonConstructor(t *testing.T) {
	t.Parallel()
	err := fx.New(fx.NopLogger, Module, Job(42)).Err()
	if err == nil {
		t.Fatal("accepted")
	}
	ctx := context.Background()
	_ = ctx
}

// TestModuleTakesConfigByValueOrPointer: fx.Supply(fom.Config{...}) is not
// silently ignored, and supplying both forms is an error.
func TestModuleTakesConfigByValueOrPointer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	core, logs := observer.New(zapcore.InfoLevel)
	var app *App
	fxApp := fxtest.New(t, fx.NopLogger, Module,
		fx.Supply(Config{DataDir: dir}),
		fx.Supply(zap.New(core)),
		Job(func() *runJob { return &runJob{} }),
		fx.Populate(&app))
	fxApp.RequireStart()
	if _, err := os.Stat(filepath.Join(dir, "fom.db")); err != nil {
		t.Fatalf("the supplied data dir is not used: %v", err)
	}
	if logs.FilterMessage("registered").Len() != 1 {
		t.Fatalf("the graph's *zap.Logger is not used: %v", logs.All())
	}
	fxApp.RequireStop()

	err := fx.New(fx.NopLogger, Module, fx.Supply(Config{DataDir: dir}), fx.Supply(&Config{DataDir: dir}), fx.Invoke(func(*App) {})).Err()
	if err == nil || !strings.Contains(err.Error(), "both a fom.Config and a *fom.Config are supplied") {
		t.Fatalf("both forms: %v", err)
	}
}

func newRunJobOrFail() (*runJob, error) { return nil, errors.New("payments API key missing") }

func newRunJob() *runJob { return &runJob{} }

// fx's errors in fom's words: a graph without fom.Module, and a job
// constructor that fails, name the constructor and what to do.
func TestJobErrorsNameTheConstructor(t *testing.T) {
	t.Parallel()
	err := fx.New(fx.NopLogger, Job(newRunJob)).Err()
	if err == nil || !strings.Contains(err.Error(), "fom.Job(github.com/fom-go/fom/fom.newRunJob): no *fom.App in the graph: add fom.Module to fx.New") {
		t.Fatalf("without fom.Module: %v", err)
	}
	err = fx.New(fx.NopLogger, Module, fx.Supply(Config{DataDir: t.TempDir()}), Job(newRunJobOrFail)).Err()
	if err == nil || !strings.Contains(err.Error(), "fom.Job: the constructor github.com/fom-go/fom/fom.newRunJobOrFail of *fom.runJob failed: payments API key missing") {
		t.Fatalf("a failing constructor: %v", err)
	}
}
