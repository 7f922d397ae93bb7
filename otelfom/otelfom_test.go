package otelfom_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/otelfom"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// payments fails; its task makes a span of its own from its context.
type payments struct {
	fom.Schedule `name:"payments" fixedRate:"1h" enable:"false"`
	tr           trace.Tracer
}

func (p *payments) Run(ctx context.Context) error {
	_, span := p.tr.Start(ctx, "charge card")
	span.End()
	return errors.New("card declined")
}

func attr(s tracetest.SpanStub, k string) attribute.Value {
	for _, a := range s.Attributes {
		if string(a.Key) == k {
			return a.Value
		}
	}
	return attribute.Value{}
}

func TestSpansOfRoundsBatchesAndTasks(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	app, err := fom.New(fom.WithDataDir(t.TempDir()), fom.WithTracer(otelfom.New(tp)))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Stop(context.Background())
	job := &payments{tr: tp.Tracer("test")}
	sc, err := app.Register(job)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := sc.Startup(); err != nil {
		t.Fatal(err)
	}
	if err := sc.ExecNow(); err != nil {
		t.Fatal(err)
	}
	find := func(name string) (tracetest.SpanStub, bool) {
		for _, s := range exp.GetSpans() {
			if s.Name == name {
				return s, true
			}
		}
		return tracetest.SpanStub{}, false
	}
	wait := func(name string) tracetest.SpanStub {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if s, ok := find(name); ok {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("no span %q among %d", name, len(exp.GetSpans()))
			}
		}
	}
	round := wait("fom.round payments")
	task := wait("fom.task payments")
	child := wait("charge card")
	if attr(round, "fom.schedule").AsString() != "payments" || attr(round, "fom.round").AsInt64() != 1 || attr(round, "fom.outcome").AsString() != "failed" ||
		attr(round, "fom.cause").AsString() == "" || attr(round, "fom.planned").AsString() == "" {
		t.Fatalf("round attributes %v", round.Attributes)
	}
	if round.Status.Code != codes.Error || len(round.Events) == 0 || round.Events[0].Name != "exception" {
		t.Fatalf("round status %v, events %v", round.Status, round.Events)
	}
	if task.Parent.SpanID() != round.SpanContext.SpanID() || child.Parent.SpanID() != task.SpanContext.SpanID() {
		t.Fatal("task span not a child of its round's, or the task's own span not a child of the task's")
	}
	if task.Status.Code != codes.Error || attr(task, "fom.status").AsString() != "failed" {
		t.Fatalf("task %v %v", task.Status, task.Attributes)
	}

	// A batch is a child of the context it was submitted from.
	ctx, req := tp.Tracer("test").Start(context.Background(), "request")
	b, err := sc.Submit(ctx, fom.TaskFunc("refund-7", func(ctx context.Context) (any, error) { return "ok", nil }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	req.End()
	batch := wait("fom.batch payments")
	bt := wait("fom.task refund-7")
	if batch.Parent.SpanID() != req.SpanContext().SpanID() || bt.Parent.SpanID() != batch.SpanContext.SpanID() {
		t.Fatal("batch span not a child of the submitting request's, or its task's not of the batch's")
	}
	if attr(batch, "fom.batch").AsBool() != true || attr(batch, "fom.outcome").AsString() != "success" || batch.Status.Code == codes.Error {
		t.Fatalf("batch %v %v", batch.Attributes, batch.Status)
	}
}
