package config

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
)

type failingSaver struct{ calls atomic.Int32 }

func (f *failingSaver) SaveConfig(context.Context, string, map[string]string) error {
	f.calls.Add(1)
	return errors.New("disk full")
}

func TestPersistedFromOlderVersionIsFilteredNotFatal(t *testing.T) {
	t.Parallel()
	c, err := New("a", Spec{
		Tags:      map[string]string{"fixedRate": "10s"},
		Persisted: map[string]string{"threadMax": "3", "retired": "x", "queueSize": "lots", "name": "b"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Get("threadMax") != "3" || c.Get("queueSize") != "256" || c.Get("name") != "a" {
		t.Fatalf("values %v", c.Values())
	}
	w := strings.Join(c.Warnings(), "\n")
	for _, want := range []string{`persisted key "retired" is not known any more`, `persisted value "lots" of key "queueSize" is invalid`, `persisted key "name" is not editable`} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
}

func TestPersistedEditsThatBreakTheWholeAreDropped(t *testing.T) {
	t.Parallel()
	// The tag moved to cron in code while an old edit keeps fixedDelay.
	c, err := New("a", Spec{Tags: map[string]string{"cron": "@hourly"}, Persisted: map[string]string{"fixedDelay": "5s"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Get("fixedDelay") != "" || len(c.Warnings()) != 1 {
		t.Fatalf("values %v warnings %v", c.Values(), c.Warnings())
	}
}

func TestApplyIsAllOrNothing(t *testing.T) {
	t.Parallel()
	saver := &failingSaver{}
	c, err := New("a", Spec{Persister: saver})
	if err != nil {
		t.Fatal(err)
	}
	var notified atomic.Int32
	c.Subscribe(func(Change) { notified.Add(1) })
	err = c.Apply(map[string]string{"threadMax": "4", "threadCore": "2"})
	if err == nil || !strings.Contains(err.Error(), `save config of schedule "a": disk full`) {
		t.Fatalf("got %v", err)
	}
	if c.Get("threadMax") != "1" || notified.Load() != 0 {
		t.Fatal("a failed save was applied")
	}
	err = c.Apply(map[string]string{"threadCore": "3"})
	if err == nil || err.Error() != `fom: config of schedule "a": key "threadCore" value "3": threadCore (3) must not exceed threadMax (1)` {
		t.Fatalf("got %v", err)
	}
	if saver.calls.Load() != 1 {
		t.Fatal("an invalid edit reached the store")
	}
}

func TestEditsNotify(t *testing.T) {
	t.Parallel()
	c, _ := New("a", Spec{Custom: []CustomKey{{Name: "size", Default: "1"}}})
	var got Change
	c.Subscribe(func(ch Change) { got = ch })
	if err := c.Apply(map[string]string{"size": "2", "remark": "r", "threadMax": "1"}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Changed, ",") != "remark,size" || got.Settings.Remark != "r" {
		t.Fatalf("change %+v", got)
	}
	if err := c.Reset(); err != nil {
		t.Fatal(err)
	}
	if c.Get("size") != "1" || c.Get("remark") != "" {
		t.Fatalf("after reset %v", c.Values())
	}
	if err := c.Reset("nope"); err == nil {
		t.Fatal("reset of an unknown key accepted")
	}
}

func TestParseDuration(t *testing.T) {
	t.Parallel()
	for in, ok := range map[string]bool{"1500ms": true, "30s": true, "0": true, "30": false, "1.5": false, "soon": false, "": false} {
		if _, err := ParseDuration(in); (err == nil) != ok {
			t.Errorf("%q: err %v", in, err)
		}
	}
}

func TestReadsOfValuesAndKeys(t *testing.T) {
	t.Parallel()
	c, err := New("a", Spec{
		Tags:   map[string]string{"fixedRate": "10s"},
		Custom: []CustomKey{{Name: "region", Default: "eu"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Get("nope") != "" || c.Has("nope") || !c.Has("region") || !c.Has("fixedRate") {
		t.Fatalf("unknown key read as known, or a known one as unknown")
	}
	v := c.Values()
	if len(v) != len(c.Entries()) || v["region"] != "eu" || v["fixedRate"] != "10s" || v["name"] != "a" {
		t.Fatalf("values %v", v)
	}
	v["region"] = "us" // a copy: the config does not change
	if c.Get("region") != "eu" {
		t.Fatalf("Values handed out the config's own storage")
	}
	var got Change
	c.Subscribe(func(ch Change) { got = ch })
	if err := c.Apply(map[string]string{"region": "us", "threadMax": "2"}); err != nil {
		t.Fatal(err)
	}
	if c.Get("region") != "us" || c.Get("threadMax") != "2" || c.Settings().ThreadMax != 2 {
		t.Fatalf("after apply: %v", c.Values())
	}
	if strings.Join(got.Changed, ",") != "region,threadMax" || got.Values["region"] != "us" || got.Values["fixedRate"] != "10s" {
		t.Fatalf("change %+v", got)
	}
}

// TestCodeDefaultsAreTheEntriesDefaults: every key's code default, a tag
// or a custom key's own or a built-in one, and the name, as Entries
// reports it; an operator's edit is not a code default.
func TestCodeDefaultsAreTheEntriesDefaults(t *testing.T) {
	t.Parallel()
	c, err := New("a", Spec{
		Tags:      map[string]string{"fixedRate": "10s", "size": "3"},
		Custom:    []CustomKey{{Name: "region", Default: "eu"}, {Name: "size", Default: "1"}},
		Persisted: map[string]string{"region": "us"},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := c.CodeDefaults()
	es := c.Entries()
	if len(got) != len(es) {
		t.Fatalf("%d code defaults, %d entries", len(got), len(es))
	}
	for _, e := range es {
		if d, ok := got[e.Key]; !ok || d != e.Default {
			t.Errorf("key %s: code default %q (%v), the entry's %q", e.Key, d, ok, e.Default)
		}
	}
	if got["fixedRate"] != "10s" || got["size"] != "3" || got["region"] != "eu" || got["name"] != "a" {
		t.Errorf("code defaults %v", got)
	}
}
