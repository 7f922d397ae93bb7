package fom

import (
	"context"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// ctxJob logs through fom.Logger from Tasks and OnComplete of scheduled
// rounds, and checks FromContext there.
type ctxJob struct {
	Schedule `name:"ctxJob" execOnLoad:"true" fixedRate:"1h"`
	done     chan [2]string
}

func (j *ctxJob) Tasks(ctx context.Context) ([]Task, error) {
	Logger(ctx).Info("creating tasks")
	return []Task{TaskFunc("t", func(context.Context) (any, error) { return nil, nil })}, nil
}

func (j *ctxJob) OnComplete(ctx context.Context, r Round) {
	Logger(ctx).Info("round done")
	var a, b string
	if sc := FromContext(ctx); sc != nil {
		a = sc.Name()
	}
	b = r.Results[0].TaskID
	j.done <- [2]string{a, b}
}

func TestLoggerAndScheduleReachTasksAndOnComplete(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.InfoLevel)
	app := newTestApp(t, WithLogger(zap.New(core)))
	job := &ctxJob{done: make(chan [2]string, 1)}
	if _, err := app.Register(job); err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := <-job.done; got != [2]string{"ctxJob", "t"} {
		t.Fatalf("FromContext in OnComplete: %v", got)
	}
	for _, msg := range []string{"creating tasks", "round done"} {
		es := logs.FilterMessage(msg).All()
		if len(es) != 1 || es[0].LoggerName != "ctxJob" {
			t.Fatalf("%q logged %d times (%v), want once by the schedule's logger", msg, len(es), es)
		}
	}
}
