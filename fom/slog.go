package fom

import (
	"context"
	"log/slog"
	"slices"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// WithSlog sends fom's log records to l, a log/slog logger, with the same
// messages and fields as with WithLogger (schedule, round, task, …); a
// schedule's own level still applies, above the handler's. The logger
// name (fom.schedule.<name>, fom.cluster, …) is the attribute "logger".
func WithSlog(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return ErrNilLogger
		}
		o.logger = zap.New(slogCore{h: l.Handler()})
		return nil
	}
}

// slogCore is a zapcore.Core writing to a slog.Handler.
type slogCore struct{ h slog.Handler }

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (c slogCore) Enabled(l zapcore.Level) bool {
	return c.h.Enabled(context.Background(), slogLevel(l))
}

func (c slogCore) With(fs []zapcore.Field) zapcore.Core {
	if len(fs) == 0 {
		return c
	}
	return slogCore{h: c.h.WithAttrs(attrsOf(fs))}
}

func (c slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c slogCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	r := slog.NewRecord(e.Time, slogLevel(e.Level), e.Message, 0)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	r.AddAttrs(attrsOf(fs)...)
	if e.Stack != "" {
		r.AddAttrs(slog.String("stack", e.Stack))
	}
	return c.h.Handle(context.Background(), r)
}

func (c slogCore) Sync() error { return nil }

// attrsOf turns zap fields into slog attributes, in the fields' order.
func attrsOf(fs []zapcore.Field) []slog.Attr {
	out := make([]slog.Attr, 0, len(fs))
	for _, f := range fs {
		enc := zapcore.NewMapObjectEncoder()
		f.AddTo(enc)
		keys := make([]string, 0, len(enc.Fields))
		for k := range enc.Fields {
			keys = append(keys, k)
		}
		slices.Sort(keys) // one key, but for a field that adds several (an error's details)
		for _, k := range keys {
			out = append(out, slog.Any(k, enc.Fields[k]))
		}
	}
	return out
}
