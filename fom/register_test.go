package fom

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(clusterChildEnv); spec != "" {
		clusterChild(spec) // never returns: the parent kills it
	}
	if spec := os.Getenv(statsChildEnv); spec != "" {
		statsChild(spec) // never returns: the parent kills it
	}
	goleak.VerifyTestMain(m)
}

func newTestApp(t *testing.T, opts ...Option) *App {
	t.Helper()
	app, err := New(append([]Option{WithDataDir(t.TempDir())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := app.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return app
}

// runJobTwin takes runJob's name.
type runJobTwin struct {
	Schedule `name:"runJob"`
}

func (*runJobTwin) Run(context.Context) (any, error) { return nil, nil }

type runJob struct {
	Schedule `fixedRate:"1m"`
}

func (*runJob) Run(context.Context) (any, error) { return nil, nil }

type bareNumber struct {
	Schedule `fixedRate:"30" taskOverTime:"1500"`
}

func (*bareNumber) Run(context.Context) (any, error) { return nil, nil }

type typo struct {
	Schedule `fixedrate:"10s" threadmax:"2" colour:"red"`
}

func (*typo) Run(context.Context) (any, error) { return nil, nil }

type twoPlans struct {
	Schedule `cron:"@hourly" fixedDelay:"10s"`
}

func (*twoPlans) Run(context.Context) (any, error) { return nil, nil }

type badValues struct {
	Schedule `cron:"61 * * * * *" deadTime:"tomorrow" threadMax:"0" queueSize:"-1" execOnLoad:"maybe"`
}

func (*badValues) Run(context.Context) (any, error) { return nil, nil }

type noWork struct {
	Schedule `fixedRate:"1m"`
}

type badMethods struct {
	Schedule `methods:"SyncUsers,Missing,WrongSig"`
}

func (*badMethods) SyncUsers(context.Context) error { return nil }
func (*badMethods) WrongSig(string) error           { return nil }
func (*badMethods) OnComplete(Round)                {}
func (*badMethods) Run(ctx context.Context) string  { return "" }

type badValueFields struct {
	Schedule  `fixedRate:"1m"`
	BatchSize Value[int]           `fom:"batchSize" default:"lots"`
	Wait      Value[time.Duration] `fom:"wait" default:"5"`
	NoKey     Value[string]
	Level     Value[uint8] `fom:"level" default:"300"`
	//lint:ignore U1000 deliberately unexported: registration must refuse it
	hidden Value[int] `fom:"hidden"`
}

func (*badValueFields) Run(context.Context) (any, error) { return nil, nil }

type notMarked struct{}

func (*notMarked) Run(context.Context) (any, error) { return nil, nil }

type nextAndCron struct {
	Schedule `cron:"@daily"`
}

func (*nextAndCron) Run(context.Context) (any, error)  { return nil, nil }
func (*nextAndCron) Next(prev Round) (time.Time, bool) { return prev.Start, false }

type envJob struct {
	Schedule `name:"env-${FOM_TEST_SUFFIX}" fixedRate:"${FOM_TEST_RATE:45s}" remark:"${FOM_TEST_UNSET}"`
}

func (*envJob) Run(context.Context) (any, error) { return nil, nil }

func TestBadDeclarations(t *testing.T) {
	t.Setenv("FOM_TEST_SUFFIX", "a")
	tests := []struct {
		job  any
		want string
	}{
		{&bareNumber{}, `fom: register *fom.bareNumber: key "fixedRate" value "30": a duration needs a unit, such as 30s or 30ms; key "taskOverTime" value "1500": a duration needs a unit, such as 1500s or 1500ms`},
		{&typo{}, `fom: register *fom.typo: key "colour" value "red": unknown key; key "fixedrate" value "10s": unknown key (did you mean "fixedRate"?); key "threadmax" value "2": unknown key (did you mean "threadMax"?)`},
		{&twoPlans{}, `fom: register *fom.twoPlans: key "fixedDelay" value "10s": at most one of cron, fixedRate, fixedDelay may be set, found cron and fixedDelay (clear the others with an empty value)`},
		{&badValues{}, `fom: register *fom.badValues: key "cron" value "61 * * * * *": bad cron spec: end of range (61) above maximum (59): 61; key "deadTime" value "tomorrow": not an RFC 3339 time such as 2026-01-02T15:04:05Z: tomorrow; key "execOnLoad" value "maybe": not a boolean (use true or false): maybe; key "queueSize" value "-1": must be between 0 and 1000000, got -1; key "threadMax" value "0": must be between 1 and 10000, got 0`},
		{&noWork{}, `fom: register *fom.noWork: no work: define Run(ctx context.Context) (any, error) or Run(ctx context.Context) error, Tasks(ctx context.Context) ([]fom.Task, error), or a methods tag`},
		{&badMethods{}, `fom: register *fom.badMethods: method Run has signature func(context.Context) string, want func(context.Context) (any, error) or func(context.Context) error; method OnComplete has signature func(fom.Round), want func(context.Context, fom.Round); key "methods" value "SyncUsers,Missing,WrongSig": method Missing not found on *fom.badMethods (it must be exported and have a pointer or value receiver); key "methods" value "SyncUsers,Missing,WrongSig": method WrongSig has signature func(string) error, want func(context.Context) (any, error) or func(context.Context) error`},
		{&badValueFields{}, `fom: register *fom.badValueFields: field NoKey: a fom.Value field needs a key, such as ` + "`fom:\"noKey\"`" + `; field hidden: a fom.Value field must be exported; field BatchSize key "batchSize" default "lots": not a 64-bit integer: lots; field Wait key "wait" default "5": a duration needs a unit, such as 5s or 5ms; field Level key "level" default "300": not an unsigned 8-bit integer: 300`},
		{&notMarked{}, `fom: register *fom.notMarked: the struct does not embed fom.Schedule`},
		{runJob{}, `fom: register fom.runJob: a job must be a pointer to a struct that embeds fom.Schedule`},
		{&nextAndCron{}, `fom: register *fom.nextAndCron: key "cron" value "@daily": two plans: the job also has a Next method`},
		{&envJob{}, `fom: register *fom.envJob: key "remark" value "${FOM_TEST_UNSET}": environment variable FOM_TEST_UNSET is not set and has no default (write ${FOM_TEST_UNSET:default})`},
	}
	app := newTestApp(t)
	for _, tt := range tests {
		_, err := app.Register(tt.job)
		var re *RegistrationError
		if !errors.As(err, &re) {
			t.Errorf("%T: got %v, want a *RegistrationError", tt.job, err)
			continue
		}
		if err.Error() != tt.want {
			t.Errorf("%T:\n got %s\nwant %s", tt.job, err, tt.want)
		}
	}
	if len(app.Schedules()) != 0 {
		t.Fatal("a failed registration must not add a schedule")
	}
}

func TestDuplicateNameAndDefaults(t *testing.T) {
	t.Parallel()
	app := newTestApp(t)
	sc, err := app.Register(&runJob{})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Name() != "runJob" || app.Schedule("runJob") != sc {
		t.Fatalf("name %q", sc.Name())
	}
	_, err = app.Register(&runJobTwin{})
	want := `fom: register *fom.runJobTwin: key "name" value "runJob": duplicate schedule name: *fom.runJob is already registered under it`
	if !errors.Is(err, ErrDuplicateName) || !strings.HasPrefix(err.Error(), want) || strings.Count(err.Error(), "fom:") != 1 {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}

func TestEnvPlaceholders(t *testing.T) {
	t.Setenv("FOM_TEST_SUFFIX", "blue")
	t.Setenv("FOM_TEST_UNSET", "set after all")
	app := newTestApp(t)
	sc, err := app.Register(&envJob{})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Name() != "env-blue" || sc.Config().Get("fixedRate") != "45s" || sc.Config().Get("remark") != "set after all" {
		t.Fatalf("got %s %v", sc.Name(), sc.Config().Values())
	}
}

func TestLowerCamel(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"Cleanup": "cleanup", "SyncUsers": "syncUsers", "HTTPPoller": "httpPoller", "ID": "id", "x": "x"} {
		if got := lowerCamel(in); got != want {
			t.Errorf("lowerCamel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseTag(t *testing.T) {
	t.Parallel()
	kv, err := parseTag(`name:"a" cron:"0 */5 * * * *"  remark:"say \"hi\""`)
	if err != nil || len(kv) != 3 || kv[1][1] != "0 */5 * * * *" || kv[2][1] != `say "hi"` {
		t.Fatalf("%v %v", kv, err)
	}
	for _, bad := range []string{`name`, `name:a`, `name:"a`, `:"x"`} {
		if _, err := parseTag(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestReflectionIsCachedPerType(t *testing.T) {
	t.Setenv("FOM_TEST_UNSET", "set")
	app := newTestApp(t)
	for _, suffix := range []string{"one", "two", "three"} {
		t.Setenv("FOM_TEST_SUFFIX", suffix)
		if _, err := app.Register(&envJob{}); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	app.types.Range(func(any, any) bool { n++; return true })
	if n != 1 || len(app.Schedules()) != 3 {
		t.Fatalf("%d cached types for %d schedules of one type", n, len(app.Schedules()))
	}
	first, _ := app.types.Load(reflect.TypeOf(&envJob{}))
	if _, err := app.Register(&envJob{}); err == nil { // same name again: refused
		t.Fatal("duplicate accepted")
	}
	again, _ := app.types.Load(reflect.TypeOf(&envJob{}))
	if first != again {
		t.Fatal("the type was analysed again")
	}
}

type errRunJob struct {
	Schedule `name:"errRun" execOnLoad:"true"`
}

func (*errRunJob) Run(context.Context) error { return errors.New("disk full") }

// Run(ctx) error is accepted as the methods tag's short form is: its
// error is the task's.
func TestRunThatReturnsOnlyAnError(t *testing.T) {
	t.Parallel()
	app := newTestApp(t)
	sc, err := app.Register(&errRunJob{})
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); sc.Info().Counts.Failed != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the Run(ctx) error task's failure was not counted: %+v", sc.Info().Counts)
		}
	}
	if f := sc.Stats().Failures(); len(f) != 1 || f[0].Error != "disk full" || f[0].TaskID != "errRun" {
		t.Fatalf("failures %+v", f)
	}
}
