// Command quickstart is a small fom application: four jobs in an fx app,
// logging to the console, with the admin page on
// http://127.0.0.1:8080/fom/ (or the address in FOM_ADDR). Run it with
// `make run`.
package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"go.uber.org/zap"

	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/web"
)

// Heartbeat is a cron job: every ten seconds.
type Heartbeat struct {
	fom.Schedule `name:"heartbeat" cron:"*/10 * * * * *" remark:"logs that the app is alive"`
}

func (h *Heartbeat) Run(ctx context.Context) (any, error) {
	fom.Logger(ctx).Info("still alive")
	return "ok", nil
}

// ImportOrders is a batch job: every 15 seconds it imports a few pages of
// orders, three at a time, and reports on the whole round.
type ImportOrders struct {
	fom.Schedule `name:"importOrders" fixedRate:"15s" execOnLoad:"true" threadMax:"3" remark:"imports order pages from the shop"`
}

func (j *ImportOrders) Tasks(ctx context.Context) ([]fom.Task, error) {
	var tasks []fom.Task
	for page := 1; page <= 5; page++ {
		tasks = append(tasks, fom.TaskFunc(fmt.Sprintf("orders-page-%d", page), func(ctx context.Context) (any, error) {
			time.Sleep(time.Duration(100+rand.IntN(400)) * time.Millisecond)
			if rand.IntN(6) == 0 {
				return nil, errors.New("shop API answered 503")
			}
			return rand.IntN(50), nil
		}))
	}
	return tasks, nil
}

func (j *ImportOrders) OnComplete(ctx context.Context, r fom.Round) {
	imported, failed := 0, 0
	for _, res := range r.Results {
		if n, ok := res.Value.(int); ok {
			imported += n
		}
		if res.Err != nil {
			failed++
		}
	}
	fom.Logger(ctx).Info("import round done", zap.Int64("round", r.Number), zap.Int("orders", imported), zap.Int("failedPages", failed))
}

// SlowReport shows timeouts: its task needs 5s but may take 2s, so fom
// cancels its context and records a timeout.
type SlowReport struct {
	fom.Schedule `name:"slowReport" fixedDelay:"20s" execOnLoad:"true" taskOverTime:"2s" remark:"always too slow: shows cancellation"`
}

func (j *SlowReport) Run(ctx context.Context) (any, error) {
	select {
	case <-time.After(5 * time.Second):
		return "report", nil
	case <-ctx.Done():
		fom.Logger(ctx).Info("report canceled, cleaning up", zap.Error(ctx.Err()))
		return nil, ctx.Err()
	}
}

func (j *SlowReport) OnCancel(taskID string, elapsed time.Duration) {
	fmt.Printf("slowReport: canceling %s after %s\n", taskID, elapsed.Round(time.Millisecond))
}

// Cleanup has a knob operators can turn at runtime: BatchSize.
type Cleanup struct {
	fom.Schedule `name:"cleanup" cron:"0 * * * * *" remark:"purges expired sessions; edit batchSize live"`
	BatchSize    fom.Value[int] `fom:"batchSize" default:"500"`
}

func (c *Cleanup) Run(ctx context.Context) (any, error) {
	n := c.BatchSize.Get()
	fom.Logger(ctx).Info("purging sessions", zap.Int("batchSize", n))
	return n, nil
}

func main() {
	fx.New(
		fx.Provide(func() (*zap.Logger, error) { return zap.NewDevelopment(zap.AddStacktrace(zap.DPanicLevel)) }),
		fx.WithLogger(func(l *zap.Logger) fxevent.Logger {
			return &fxevent.ZapLogger{Logger: l.Named("fx").WithOptions(zap.IncreaseLevel(zap.WarnLevel))}
		}),
		fom.Module,
		web.Module, // the admin page on http://127.0.0.1:8080/fom/ (FOM_ADDR overrides the address)
		fx.Supply(&fom.Config{DataDir: "fom-data"}),
		fx.Supply(web.Config{Addr: os.Getenv("FOM_ADDR")}),
		fom.Job(func() *Heartbeat { return &Heartbeat{} }),
		fom.Job(func() *ImportOrders { return &ImportOrders{} }),
		fom.Job(func() *SlowReport { return &SlowReport{} }),
		fom.Job(func() *Cleanup { return &Cleanup{} }),
	).Run()
}
