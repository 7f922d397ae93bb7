package schedule

import (
	"context"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// The round path's debug entries follow the schedule's own level, however
// it is set: on at debug, off again above it.
func TestRoundDebugEntriesFollowTheLevel(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.DebugLevel)
	h := newHarness(t, map[string]string{"cron": "0 0 * * * *"}, Job{Tasks: func(context.Context) ([]Task, error) {
		return []Task{ok("t")}, nil
	}}, func(o *Options) { o.Logger = zap.New(core) })
	if err := h.c.Startup(); err != nil {
		t.Fatal(err)
	}
	debugEntries := func() int {
		return logs.Filter(func(e observer.LoggedEntry) bool {
			return e.Level == zapcore.DebugLevel && (e.Message == "round started" || e.Message == "round completed" || e.Message == "task succeeded")
		}).Len()
	}
	round := func(n int64) {
		t.Helper()
		if err := h.c.ExecNow(); err != nil {
			t.Fatal(err)
		}
		h.waitSleeping(n)
	}
	round(1)
	if n := debugEntries(); n != 0 {
		t.Fatalf("%d debug entries at info level", n)
	}
	for i, set := range []func(zapcore.Level){
		func(l zapcore.Level) { h.c.SetLogLevel(l) },
		h.c.ApplyLogLevel,
		func(l zapcore.Level) { h.c.BindLogLevel(l, nil) },
	} {
		set(zapcore.DebugLevel)
		before := debugEntries()
		round(int64(2 + 2*i))
		if got := debugEntries() - before; got != 3 {
			t.Fatalf("setter %d: %d debug entries of a round at debug level, want 3: %v", i, got, logs.All())
		}
		set(zapcore.InfoLevel)
		before = debugEntries()
		round(int64(3 + 2*i))
		if got := debugEntries() - before; got != 0 {
			t.Fatalf("setter %d: %d debug entries back at info level", i, got)
		}
	}
}
