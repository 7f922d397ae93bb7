package fom

import (
	"reflect"
	"strings"
	"testing"
)

// The seeds run in every `go test`; `go test -fuzz FuzzX ./fom` explores
// further. Every input that once crashed is kept as a seed.

func FuzzParseTag(f *testing.F) {
	for _, s := range []string{`name:"a" cron:"0 * * * * *"`, `name:"a`, `:"x"`, `a:"\"`, `a:"\x"`, `a:""b:"c"`, `a :"b"`, ` `, `a:"b" c`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tag string) {
		kvs, err := parseTag(tag)
		if err != nil {
			return
		}
		for _, kv := range kvs {
			if kv[0] == "" || strings.ContainsAny(kv[0], " \t\"") {
				t.Fatalf("tag %q gave key %q", tag, kv[0])
			}
		}
	})
}

func FuzzExpandEnv(f *testing.F) {
	for _, s := range []string{"${FOM_FUZZ_UNSET:45s}", "${", "${}", "${:x}", "a${FOM_FUZZ_UNSET:}b", "${A${B}}", "}${", "$${X:1}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := expandEnv(s)
		if err == nil && !strings.Contains(s, "${") && out != s {
			t.Fatalf("%q without references became %q", s, out)
		}
	})
}

// FuzzRegisterTag registers a job type whose fom.Schedule tag is the input:
// Register returns a job or an error, never panics.
func FuzzRegisterTag(f *testing.F) {
	for _, s := range []string{
		`name:"a" cron:"CRON_TZ=Europe/Berlin"`, `cron:"TZ="`, `fixedRate:"1ns"`, `threadMax:" 4 "`, `name:"a;b"`, `name:".."`,
		`name:"x" fixedRate:"${FOM_FUZZ_UNSET:1s}"`, `cron:"0 0 0 30 2 *"`, `methods:"Nope"`, `remark:"` + strings.Repeat("r", 2000) + `"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tag string) {
		if !strings.Contains(tag, `name:"`) {
			tag = `name:"fz" ` + tag // an unnamed type needs one to reach the config checks
		}
		typ := reflect.StructOf([]reflect.StructField{
			{Name: "Schedule", Type: reflect.TypeFor[Schedule](), Tag: reflect.StructTag(tag), Anonymous: true},
		})
		app, err := New(WithDataDir(t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		defer app.Stop(t.Context())
		if _, err := app.Register(reflect.New(typ).Interface()); err == nil {
			t.Fatalf("a job without work registered with tag %q", tag)
		}
	})
}
