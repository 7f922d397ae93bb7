package fom

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
)

// syncBuffer is a buffer written by the app's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// records are the JSON lines written so far.
func (s *syncBuffer) records(t *testing.T) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if line == "" {
			continue
		}
		m := map[string]any{}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

type slogFailJob struct {
	Schedule `name:"payments" fixedRate:"1h" execOnLoad:"true"`
}

func (slogFailJob) Run(context.Context) error { return errors.New("card declined") }

// fom's records reach a service's slog handler with their fields.
func TestSlogGetsTheRecordsWithTheirFields(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	app := newTestApp(t, WithSlog(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	if _, err := app.Register(&slogFailJob{}); err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var failed map[string]any
	for deadline := time.Now().Add(5 * time.Second); failed == nil; time.Sleep(20 * time.Millisecond) {
		for _, r := range buf.records(t) {
			if e, _ := r["error"].(string); r["logger"] == "payments" && r["task"] == "payments" && strings.Contains(e, "card declined") {
				failed = r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no record of the failure with its schedule: %v", buf.records(t))
		}
	}
	if failed["level"] != "WARN" {
		t.Fatalf("level %v", failed["level"])
	}
	if _, ok := failed["cost"]; !ok {
		t.Fatalf("fields %v", failed)
	}
	if WithSlog(nil)(&options{}) != ErrNilLogger {
		t.Fatal("a nil slog logger was accepted")
	}
}

// The fx graph's *slog.Logger is used when it has no *zap.Logger.
func TestModuleTakesTheGraphsSlogLogger(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	fxApp := fxtest.New(t, fx.NopLogger, Module,
		fx.Supply(Config{DataDir: t.TempDir()}),
		fx.Supply(slog.New(slog.NewJSONHandler(&buf, nil))),
		Job(func() *runJob { return &runJob{} }))
	fxApp.RequireStart()
	fxApp.RequireStop()
	for _, r := range buf.records(t) {
		if r["msg"] == "registered" {
			return
		}
	}
	t.Fatalf("the graph's *slog.Logger is not used: %v", buf.records(t))
}
