package fom

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

type boundedJob struct {
	Schedule  `fixedRate:"1h"`
	BatchSize Value[int]           `fom:"batchSize" default:"500" min:"1" max:"10000"`
	Pause     Value[time.Duration] `fom:"pause" default:"1s" min:"100ms"`
	Ratio     Value[float64]       `fom:"ratio" default:"0.5" max:"1"`
	Mode      Value[string]        `fom:"mode" default:"fast" oneof:"fast, safe"`
}

func (*boundedJob) Run(context.Context) error { return nil }

// Bounds in a Value's tag hold for the default, every edit and a reset,
// and an editor is told them.
func TestValueBoundsHoldForTagsEditsAndResets(t *testing.T) {
	t.Parallel()
	app := newTestApp(t)
	job := &boundedJob{}
	sc, err := app.Register(job)
	if err != nil {
		t.Fatal(err)
	}
	cfg := sc.Config()
	for edit, want := range map[string]string{
		"batchSize": `key "batchSize" value "-5": must be between 1 and 10000, got -5`,
		"pause":     `must be at least 100ms, got 10ms`,
		"ratio":     `must be at most 1, got 1.5`,
		"mode":      `must be one of fast, safe, got "reckless"`,
	} {
		bad := map[string]string{"batchSize": "-5", "pause": "10ms", "ratio": "1.5", "mode": "reckless"}[edit]
		err := cfg.Apply(map[string]string{edit: bad, "batchSize": "20"})
		if edit == "batchSize" {
			err = cfg.Apply(map[string]string{"batchSize": bad})
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s=%s: %v, want %q", edit, bad, err, want)
		}
	}
	// All or nothing: the valid batchSize of a refused edit was not applied.
	if job.BatchSize.Get() != 500 || job.Mode.Get() != "fast" {
		t.Fatalf("a refused edit was half applied: %d %s", job.BatchSize.Get(), job.Mode.Get())
	}
	if err := cfg.Apply(map[string]string{"batchSize": "10000", "mode": "safe", "pause": "100ms"}); err != nil {
		t.Fatal(err)
	}
	if job.BatchSize.Get() != 10000 || job.Mode.Get() != "safe" || job.Pause.Get() != 100*time.Millisecond {
		t.Fatal("the edit did not take")
	}
	hints := map[string]string{}
	for _, e := range cfg.Entries() {
		if e.Custom {
			hints[e.Key] = e.Kind + ": " + e.Hint
		}
	}
	if hints["batchSize"] != "int: 1 to 10000" || hints["pause"] != "duration: at least 100ms" || hints["ratio"] != "number: at most 1" || hints["mode"] != "text: one of fast, safe" {
		t.Fatalf("hints %v", hints)
	}
}

type badBoundsJob struct {
	Schedule `fixedRate:"1h"`
	A        Value[int]    `fom:"a" default:"0" min:"1"`
	B        Value[string] `fom:"b" default:"x" min:"a"`
	C        Value[int]    `fom:"c" default:"5" min:"10" max:"1"`
	D        Value[int]    `fom:"d" default:"5" max:"lots"`
	E        Value[int]    `fom:"e" default:"5" oneof:"1,two"`
}

func (*badBoundsJob) Run(context.Context) error { return nil }

// Every bad bound is reported at Register, naming the field, the key and
// the value.
func TestBadValueBoundsAreReportedAtRegister(t *testing.T) {
	t.Parallel()
	_, err := newTestApp(t).Register(&badBoundsJob{})
	if err == nil {
		t.Fatal("registered")
	}
	for _, want := range []string{
		`field A key "a" default "0": must be at least 1, got 0`,
		`field B key "b": min:"a": a string has no order; use oneof`,
		`field C key "c": min:"10" is above max:"1"`,
		`field D key "d": max:"lots": not a 64-bit integer: lots`,
		`field E key "e": oneof:"two": not a 64-bit integer: two`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
}

type validatedJob struct {
	Schedule `fixedRate:"1h"`
	Region   Value[string] `fom:"region" default:"eu-west-1"`
	Workers  Value[int]    `fom:"workers" default:"4" min:"1"`
}

func (*validatedJob) Run(context.Context) error { return nil }

// ValidateRegion checks the region knob beyond its type.
func (*validatedJob) ValidateRegion(r string) error {
	if !strings.Contains(r, "-") {
		return fmt.Errorf("not a region like eu-west-1")
	}
	return nil
}

// ValidateWorkers keeps the pool even.
func (*validatedJob) ValidateWorkers(n int) error {
	if n%2 != 0 {
		return fmt.Errorf("must be even")
	}
	return nil
}

// A job's Validate<Field> method holds for edits as the tag's bounds do.
func TestValueValidateMethod(t *testing.T) {
	t.Parallel()
	job := &validatedJob{}
	sc, err := newTestApp(t).Register(job)
	if err != nil {
		t.Fatal(err)
	}
	cfg := sc.Config()
	if err := cfg.Apply(map[string]string{"region": "moon"}); err == nil || !strings.Contains(err.Error(), `key "region" value "moon": not a region like eu-west-1`) {
		t.Fatalf("region moon: %v", err)
	}
	if err := cfg.Apply(map[string]string{"workers": "3"}); err == nil || !strings.Contains(err.Error(), "must be even") {
		t.Fatalf("workers 3: %v", err)
	}
	if err := cfg.Apply(map[string]string{"workers": "0"}); err == nil || !strings.Contains(err.Error(), "must be at least 1") {
		t.Fatalf("workers 0: %v", err)
	}
	if err := cfg.Apply(map[string]string{"region": "us-east-2", "workers": "6"}); err != nil || job.Region.Get() != "us-east-2" || job.Workers.Get() != 6 {
		t.Fatalf("a good edit: %v", err)
	}
}

type badValidateJob struct {
	Schedule `fixedRate:"1h"`
	Size     Value[int] `fom:"size" default:"3"`
}

func (*badValidateJob) Run(context.Context) error   { return nil }
func (*badValidateJob) ValidateSize(s string) error { return nil }

func TestValueValidateMethodOfTheWrongTypeIsReported(t *testing.T) {
	t.Parallel()
	_, err := newTestApp(t).Register(&badValidateJob{})
	if err == nil || !strings.Contains(err.Error(), "method ValidateSize has signature func(string) error, want func(int) error") {
		t.Fatalf("%v", err)
	}
}
