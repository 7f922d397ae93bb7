package fom

import (
	"context"
	"testing"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
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
