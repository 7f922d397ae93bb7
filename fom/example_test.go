package fom_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"go.uber.org/fx"

	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/timer"
)

// Cleanup purges expired sessions every five minutes.
type Cleanup struct {
	fom.Schedule `name:"cleanup" cron:"0 */5 * * * *" threadMax:"4" taskOverTime:"30s" remark:"purge expired sessions"`
	BatchSize    fom.Value[int] `fom:"batchSize" default:"500"`
}

func (c *Cleanup) Run(ctx context.Context) (any, error) {
	return fmt.Sprintf("purged up to %d sessions", c.BatchSize.Get()), nil
}

func ExampleNew() {
	dir, _ := os.MkdirTemp("", "fom-example")
	defer os.RemoveAll(dir)

	app, err := fom.New(fom.WithDataDir(dir)) // opens the store in dir
	if err != nil {
		panic(err)
	}
	defer app.Stop(context.Background()) // closes it
	fmt.Println(len(app.Schedules()), "schedules")
	// Output: 0 schedules
}

func ExampleApp_Register() {
	dir, _ := os.MkdirTemp("", "fom-example")
	defer os.RemoveAll(dir)
	app, _ := fom.New(fom.WithDataDir(dir))
	defer app.Stop(context.Background())

	sc, err := app.Register(&Cleanup{})
	if err != nil {
		panic(err)
	}
	fmt.Println(sc.Name(), sc.State(), sc.Info().Plan)
	fmt.Println(sc.Config().Get("threadMax"), sc.Config().Get("taskOverTime"))

	// Mistakes are reported all at once, naming the type, key and value.
	type Broken struct {
		fom.Schedule `fixedrate:"10" threadMax:"0"`
	}
	_, err = app.Register(&Broken{})
	fmt.Println(err)
	// Output:
	// cleanup INITED cron 0 */5 * * * *
	// 4 30s
	// fom: register *fom_test.Broken: no work: define Run(ctx context.Context) (any, error) or Run(ctx context.Context) error, Tasks(ctx context.Context) ([]fom.Task, error), or a methods tag; key "fixedrate" value "10": unknown key (did you mean "fixedRate"?); key "threadMax" value "0": must be between 1 and 10000, got 0
}

func ExampleValue() {
	dir, _ := os.MkdirTemp("", "fom-example")
	defer os.RemoveAll(dir)
	app, _ := fom.New(fom.WithDataDir(dir))
	defer app.Stop(context.Background())

	job := &Cleanup{}
	sc, _ := app.Register(job)
	fmt.Println(job.BatchSize.Get())

	// An operator's edit (the admin page does this) takes effect at once and
	// is saved for the next start.
	if err := sc.Config().Apply(map[string]string{"batchSize": "50"}); err != nil {
		panic(err)
	}
	fmt.Println(job.BatchSize.Get())
	fmt.Println(sc.Config().Apply(map[string]string{"batchSize": "many"}))
	// Output:
	// 500
	// 50
	// fom: config of schedule "cleanup": key "batchSize" value "many": not a 64-bit integer: many
}

type Report struct {
	fom.Schedule `name:"report" execOnLoad:"true" fixedRate:"1h"`
	done         chan struct{}
}

func (r *Report) Run(ctx context.Context) (any, error) {
	fmt.Println("report from", fom.FromContext(ctx).Name())
	close(r.done)
	return nil, nil
}

func ExampleModule() {
	dir, _ := os.MkdirTemp("", "fom-example")
	defer os.RemoveAll(dir)
	done := make(chan struct{})

	app := fx.New(
		fx.NopLogger,
		fom.Module,
		fx.Supply(&fom.Config{DataDir: dir}),
		fom.Job(func() *Report { return &Report{done: done} }),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		panic(err)
	}
	<-done
	if err := app.Stop(ctx); err != nil {
		panic(err)
	}
	// Output: report from report
}

// One job type serves several schedules, each under its own name.
func ExampleNamed() {
	dir, _ := os.MkdirTemp("", "fom-example")
	defer os.RemoveAll(dir)
	app, _ := fom.New(fom.WithDataDir(dir))
	defer app.Stop(context.Background())

	for _, tenant := range []string{"acme", "globex"} {
		sc, err := app.Register(&Cleanup{}, fom.Named("cleanup-"+tenant))
		if err != nil {
			panic(err)
		}
		fmt.Println(sc.Name(), sc.Info().Plan)
	}
	// Output:
	// cleanup-acme cron 0 */5 * * * *
	// cleanup-globex cron 0 */5 * * * *
}

// A durable timer: stored, delivered once it is due (at least once, with
// the same key on every attempt), surviving a restart in between.
func ExampleApp_Timers() {
	dir, _ := os.MkdirTemp("", "fom-example")
	defer os.RemoveAll(dir)
	app, _ := fom.New(fom.WithDataDir(dir))
	timers := app.Timers()
	delivered := make(chan timer.Fire, 1)
	timers.Handle("invoice.remind", func(ctx context.Context, f timer.Fire) error {
		delivered <- f
		return nil
	})
	ctx := context.Background()
	if err := app.Start(ctx); err != nil {
		panic(err)
	}
	defer app.Stop(ctx)
	id, err := timers.Create(ctx, timer.Spec{Namespace: "billing", Name: "inv-42", Kind: "invoice.remind",
		At: time.Now().Add(50 * time.Millisecond), Payload: json.RawMessage(`{"invoice":42}`)})
	if err != nil {
		panic(err)
	}
	f := <-delivered
	fmt.Println(f.Name, f.Attempt, string(f.Payload), f.Key == timer.KeyOf(id, f.Planned))
	// Output: inv-42 1 {"invoice":42} true
}
