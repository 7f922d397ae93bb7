// Package otelfom makes OpenTelemetry spans of fom's rounds, batches and
// tasks: plug it in with fom.WithTracer(otelfom.New(nil)). It is a package
// of its own so that an app without OpenTelemetry links none of it.
//
// A round's span is named "fom.round <schedule>" (a batch's "fom.batch
// <schedule>"), starts at the round's start and is parented to the
// context the round starts from: for a batch, the context given to
// Submit, so that the batch is a child of the request that submitted it.
// Each task's span, "fom.task <task id>", is a child of its round's, and
// the task's own context carries it, so the spans a task makes are its
// children. Attributes: fom.schedule, fom.round, fom.batch, fom.cause,
// fom.planned, fom.lateness_ms, fom.outcome (fom.status on a task); a
// round that did not succeed, or a task that failed, has status Error and
// its error recorded.
package otelfom

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/fom-go/fom/schedule"
)

// ScopeName is the instrumentation scope of fom's spans.
const ScopeName = "github.com/fom-go/fom/otelfom"

// Tracer is a schedule.Tracer making OpenTelemetry spans.
type Tracer struct{ t trace.Tracer }

var _ schedule.Tracer = (*Tracer)(nil)

// New returns a tracer on tp; nil is the global provider (otel.GetTracerProvider).
func New(tp trace.TracerProvider) *Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return &Tracer{t: tp.Tracer(ScopeName)}
}

// StartRound implements schedule.Tracer.
func (t *Tracer) StartRound(ctx context.Context, s schedule.RoundStart) (context.Context, func(schedule.Round)) {
	name := "fom.round " + s.Schedule
	attrs := []attribute.KeyValue{attribute.String("fom.schedule", s.Schedule), attribute.Int64("fom.round", s.Number), attribute.Bool("fom.batch", s.Batch)}
	if s.Batch {
		name = "fom.batch " + s.Schedule
	} else {
		attrs = append(attrs, attribute.String("fom.cause", s.Cause.String()))
	}
	if !s.Planned.IsZero() {
		attrs = append(attrs, attribute.String("fom.planned", s.Planned.UTC().Format("2006-01-02T15:04:05.000000Z07:00")),
			attribute.Float64("fom.lateness_ms", float64(s.Start.Sub(s.Planned).Microseconds())/1000))
	}
	opts := []trace.SpanStartOption{trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindInternal)}
	if !s.Start.IsZero() {
		opts = append(opts, trace.WithTimestamp(s.Start))
	}
	ctx, span := t.t.Start(ctx, name, opts...)
	return ctx, func(r schedule.Round) {
		o := schedule.OutcomeOf(r)
		span.SetAttributes(attribute.String("fom.outcome", string(o)), attribute.Int("fom.tasks", len(r.Results)))
		if o != schedule.OutcomeSuccess {
			span.SetStatus(codes.Error, string(o))
			for _, res := range r.Results {
				if res.Err != nil {
					span.RecordError(res.Err)
					break
				}
			}
		}
		if r.End.IsZero() {
			span.End()
			return
		}
		span.End(trace.WithTimestamp(r.End))
	}
}

// StartTask implements schedule.Tracer.
func (t *Tracer) StartTask(ctx context.Context, sched, task string, round int64, batch bool) (context.Context, func(schedule.Result)) {
	ctx, span := t.t.Start(ctx, "fom.task "+task, trace.WithAttributes(attribute.String("fom.schedule", sched), attribute.String("fom.task", task),
		attribute.Int64("fom.round", round), attribute.Bool("fom.batch", batch)))
	return ctx, func(res schedule.Result) {
		span.SetAttributes(attribute.String("fom.status", res.Status.String()))
		if res.Err != nil {
			span.RecordError(res.Err)
			span.SetStatus(codes.Error, res.Err.Error())
		}
		span.End()
	}
}
