package config

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Source says where a key's current value comes from.
type Source int

const (
	SourceDefault   Source = iota // the built-in or declared default
	SourceTag                     // the job's struct tag
	SourcePersisted               // an operator's edit saved in the store
)

func (s Source) String() string {
	switch s {
	case SourceTag:
		return "tag"
	case SourcePersisted:
		return "persisted"
	}
	return "default"
}

// Entry is one key as the admin page shows it.
type Entry struct {
	Key      string
	Value    string // current value
	Default  string // the code default: the tag if the job sets one, else the built-in default
	Source   Source
	Editable bool
	Custom   bool // declared by the job (a fom.Value field) rather than built in
	Doc      string
	// Kind and Hint present a custom key in an editor: "int", "duration",
	// "bool" or "text", and its unit and bounds in words.
	Kind, Hint string
}

// CustomKey declares a job-specific key, such as one bound to a fom.Value field.
type CustomKey struct {
	Name    string
	Default string
	Doc     string
	// Field names what declared the key (a struct field), for messages.
	Field string
	// Verbatim keeps a value's surrounding spaces (a string knob); other
	// values, like every built-in key's, are trimmed.
	Verbatim bool
	// Parse reports whether a value is acceptable.
	Parse func(string) error
	// Kind and Hint, for an editor (Entry).
	Kind, Hint string
}

// Persister saves a schedule's operator edits. SaveConfig receives the whole
// set of edits and must replace the previous set atomically.
type Persister interface {
	SaveConfig(ctx context.Context, schedule string, edits map[string]string) error
}

// Spec is what a Config is built from.
type Spec struct {
	// Tags are the values declared in code (struct tags). Unknown keys are an error.
	Tags map[string]string
	// Custom are the job's own keys.
	Custom []CustomKey
	// Persisted are operator edits loaded from the store; they override Tags.
	// A persisted key that no longer exists or whose value no longer
	// validates is dropped and reported by Warnings, never fatal.
	Persisted map[string]string
	// Persister saves edits made through Apply and Reset; nil keeps them in memory.
	Persister Persister
	// Keys are the built-in definitions, shared by the schedules of an
	// App; nil builds them for this schedule alone.
	Keys *Keys
}

// Change is passed to subscribers after an edit took effect.
type Change struct {
	Settings Settings
	Values   map[string]string // every key's current value
	Changed  []string          // the keys whose value changed, sorted
}

// Keys are the built-in key definitions. They never change, so one value
// serves every schedule of an App (Spec.Keys): ~1 KB less per schedule
// than a copy each.
type Keys struct{ defs []keyDef }

// NewKeys builds the built-in key definitions.
func NewKeys() *Keys {
	bs := builtins()
	k := &Keys{defs: make([]keyDef, len(bs))}
	for i, b := range bs {
		k.defs[i] = keyDef{name: b.name, def: b.def, editable: b.editable, doc: b.doc, parse: b.parse}
	}
	return k
}

type keyDef struct {
	name     string
	def      string // built-in or declared default
	editable bool
	custom   bool
	verbatim bool
	doc      string
	parse    func(string) error
	kind     string // a custom key's, for an editor
	hint     string
}

// check normalises a value (trimmed unless verbatim), bounds its length,
// and parses it. It returns the value to keep.
func (d *keyDef) check(v string) (string, error) {
	if !d.verbatim {
		v = strings.TrimSpace(v)
	}
	limit := MaxValueLen
	if d.custom {
		limit = MaxCustomValueLen
	}
	if len(v) > limit {
		return v, fmt.Errorf("too long: %d bytes, at most %d", len(v), limit)
	}
	return v, d.parse(v)
}

type snapshot struct {
	values   []string          // every key's value, in the order of Config.defs
	persist  map[string]string // operator edits
	settings Settings
}

// Config holds one schedule's configuration. Reads are lock-free; edits are
// validated as a whole, saved, then published in one step, so a reader never
// sees a half-applied edit.
type Config struct {
	schedule string
	defs     []keyDef // built-in keys first; looked up by a scan (a map per schedule cost more memory than ~20 string compares cost time)
	tags     map[string]string
	saver    Persister
	warnings []string

	mu   sync.Mutex // serialises edits and subscriber calls
	cur  atomic.Pointer[snapshot]
	subs []func(Change)
}

// New validates spec and builds the configuration of schedule. Every problem
// is reported in one *ValidationError.
func New(schedule string, spec Spec) (*Config, error) {
	keys := spec.Keys
	if keys == nil {
		keys = NewKeys()
	}
	c := &Config{schedule: schedule, defs: keys.defs, tags: make(map[string]string, len(spec.Tags)), saver: spec.Persister}
	if len(spec.Custom) > 0 { // the shared built-in definitions are never written: copy
		c.defs = append(make([]keyDef, 0, len(keys.defs)+len(spec.Custom)), keys.defs...)
	}
	var problems []Problem
	for _, k := range spec.Custom {
		what := "custom key"
		if k.Field != "" {
			what = "field " + k.Field
		}
		if k.Name == "" {
			problems = append(problems, Problem{Key: k.Name, Reason: what + ": empty key name"})
			continue
		}
		if prev, dup := c.lookup(k.Name); dup {
			reason := fmt.Sprintf("%s: %q is a built-in key; give the field a key of its own", what, k.Name)
			if prev.custom {
				reason = fmt.Sprintf("%s: key %q is already declared by %s", what, k.Name, prev.doc)
			}
			problems = append(problems, Problem{Key: k.Name, Reason: reason})
			continue
		}
		parse := k.Parse
		if parse == nil {
			parse = func(string) error { return nil }
		}
		d := keyDef{name: k.Name, def: k.Default, editable: true, custom: true, verbatim: k.Verbatim, doc: k.Doc, parse: parse, kind: k.Kind, hint: k.Hint}
		def, err := d.check(k.Default)
		if err != nil {
			problems = append(problems, Problem{Key: k.Name, Value: k.Default, Reason: what + " default: " + err.Error()})
		}
		d.def = def
		c.defs = append(c.defs, d)
	}
	if _, tagged := spec.Tags[KeyName]; !tagged {
		if err := parseName(schedule); err != nil {
			problems = append(problems, Problem{Key: KeyName, Value: schedule, Reason: err.Error()})
		}
	}

	for _, k := range sortedKeys(spec.Tags) {
		v := spec.Tags[k]
		d, ok := c.lookup(k)
		if !ok {
			problems = append(problems, Problem{Key: k, Value: v, Reason: c.unknownReason(k)})
			continue
		}
		v, err := d.check(v)
		if err != nil {
			problems = append(problems, Problem{Key: k, Value: v, Reason: err.Error()})
			continue
		}
		c.tags[k] = v
	}
	if n, ok := c.tags[KeyName]; ok && n != schedule {
		problems = append(problems, Problem{Key: KeyName, Value: n, Reason: fmt.Sprintf("differs from the schedule name %q", schedule)})
	}
	values := c.codeValues()
	problems = append(problems, crossCheck(values, nil)...)
	if len(problems) > 0 {
		return nil, &ValidationError{Schedule: schedule, Problems: problems}
	}

	persist, merged, warnings := c.filterPersisted(values, spec.Persisted)
	c.warnings = warnings
	s, err := settingsFrom(merged)
	if err != nil {
		return nil, fmt.Errorf("config of schedule %q: %w", schedule, err)
	}
	c.cur.Store(&snapshot{values: c.inOrder(merged), persist: persist, settings: s})
	return c, nil
}

// filterPersisted keeps each persisted edit that still makes sense, one by
// one, then checks the whole over the code's values; it drops them all if
// the whole does not hold. It returns the edits kept, every key's value
// with them, and what was dropped and why.
func (c *Config) filterPersisted(code, persisted map[string]string) (persist, merged map[string]string, warnings []string) {
	schedule := c.schedule
	persist = map[string]string{}
	for _, k := range sortedKeys(persisted) {
		v := persisted[k]
		d, ok := c.lookup(k)
		switch {
		case !ok:
			warnings = append(warnings, fmt.Sprintf("schedule %q: persisted key %q is not known any more; ignored", schedule, k))
		case !d.editable:
			warnings = append(warnings, fmt.Sprintf("schedule %q: persisted key %q is not editable; ignored", schedule, k))
		default:
			v, err := d.check(v)
			if err != nil {
				warnings = append(warnings, fmt.Sprintf("schedule %q: persisted value %q of key %q is invalid (%v); ignored", schedule, clip(v), k, err))
				continue
			}
			persist[k] = v
		}
	}
	merged = code
	if len(persist) > 0 {
		merged = maps.Clone(code)
		maps.Copy(merged, persist)
	}
	if ps := crossCheck(merged, persist); len(ps) > 0 {
		warnings = append(warnings, fmt.Sprintf("schedule %q: persisted edits ignored: %v", schedule, (&ValidationError{Schedule: schedule, Problems: ps}).Error()))
		persist, merged = map[string]string{}, code
	}
	return persist, merged, warnings
}

// Edits returns a copy of the operator edits in force.
func (c *Config) Edits() map[string]string { return maps.Clone(c.cur.Load().persist) }

// HasEdits reports whether edits are the operator edits in force, without
// copying them (a cluster's resync compares every schedule's).
func (c *Config) HasEdits(edits map[string]string) bool {
	return maps.Equal(edits, c.cur.Load().persist)
}

// Reload puts persisted in force as the operator edits, without saving
// them: edits another instance of the app saved in a shared store. Edits
// that do not hold here are dropped and returned as warnings, as at New;
// subscribers see the change like any other edit.
func (c *Config) Reload(persisted map[string]string) (warnings []string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.cur.Load()
	persist, _, warnings := c.filterPersisted(c.codeValues(), persisted)
	if maps.Equal(persist, old.persist) {
		return warnings, nil
	}
	return warnings, c.publish(context.Background(), old, persist, nil, false)
}

func (c *Config) lookup(name string) (*keyDef, bool) {
	if i := c.index(name); i >= 0 {
		return &c.defs[i], true
	}
	return nil, false
}

// index returns the position of key name in c.defs, or -1.
func (c *Config) index(name string) int {
	for i := range c.defs {
		if c.defs[i].name == name {
			return i
		}
	}
	return -1
}

// inOrder turns a map of every key's value into the snapshot's slice. The
// maps are built for validation and thrown away: a slice of ~20 strings
// per schedule is a quarter of the memory of a map holding the same.
func (c *Config) inOrder(values map[string]string) []string {
	out := make([]string, len(c.defs))
	for i, d := range c.defs {
		out[i] = values[d.name]
	}
	return out
}

// valueMap returns every key's current value as a new map.
func (s *snapshot) valueMap(defs []keyDef) map[string]string {
	m := make(map[string]string, len(defs))
	for i, d := range defs {
		m[d.name] = s.values[i]
	}
	return m
}

// codeValues returns every key's value as declared in code: tag, else default.
func (c *Config) codeValues() map[string]string {
	v := make(map[string]string, len(c.defs))
	for _, d := range c.defs {
		v[d.name] = c.codeDefault(d.name)
	}
	return v
}

func (c *Config) codeDefault(key string) string {
	if t, ok := c.tags[key]; ok {
		return t
	}
	if key == KeyName {
		return c.schedule
	}
	d, _ := c.lookup(key)
	return d.def
}

// CodeDefaults returns every key's code default (its tag, else its
// built-in default), as Entries reports them, without building the
// entries: an App of many schedules declares them all at its start.
func (c *Config) CodeDefaults() map[string]string {
	out := make(map[string]string, len(c.defs))
	for i := range c.defs {
		d := &c.defs[i]
		switch t, tagged := c.tags[d.name]; {
		case tagged:
			out[d.name] = t
		case d.name == KeyName:
			out[d.name] = c.schedule
		default:
			out[d.name] = d.def
		}
	}
	return out
}

// Schedule returns the name of the schedule this configuration belongs to.
func (c *Config) Schedule() string { return c.schedule }

// Warnings lists persisted edits that were dropped when the config was built.
func (c *Config) Warnings() []string { return slices.Clone(c.warnings) }

// Get returns a key's current value, or "" for an unknown key.
func (c *Config) Get(key string) string {
	if i := c.index(key); i >= 0 {
		return c.cur.Load().values[i]
	}
	return ""
}

// Has reports whether key is defined.
func (c *Config) Has(key string) bool { _, ok := c.lookup(key); return ok }

// Settings returns the typed built-in settings currently in force.
func (c *Config) Settings() Settings { return c.cur.Load().settings }

// Current returns the settings in force without copying them: the engine
// reads them several times per round. The value is shared and immutable:
// never write through the pointer. An edit publishes a new one.
func (c *Config) Current() *Settings { return &c.cur.Load().settings }

// Values returns a copy of every key's current value.
func (c *Config) Values() map[string]string { return c.cur.Load().valueMap(c.defs) }

// Entries lists every key, built-in keys first, in a stable order.
func (c *Config) Entries() []Entry {
	s := c.cur.Load()
	out := make([]Entry, 0, len(c.defs))
	for i, d := range c.defs {
		e := Entry{Key: d.name, Value: s.values[i], Default: c.codeDefault(d.name), Editable: d.editable, Custom: d.custom, Doc: d.doc, Kind: d.kind, Hint: d.hint}
		switch _, tagged := c.tags[d.name]; {
		case hasKey(s.persist, d.name):
			e.Source = SourcePersisted
		case tagged:
			e.Source = SourceTag
		}
		out = append(out, e)
	}
	return out
}

// Subscribe registers fn to be called after each edit that changed a value.
// Calls are serialised and made in the order edits took effect.
func (c *Config) Subscribe(fn func(Change)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.subs = append(c.subs, fn)
}

// saveTimeout bounds a save made without a caller's context.
const saveTimeout = 30 * time.Second

// Apply validates changes as a whole, saves them, and only then makes them
// current. On any error nothing is changed, in memory or in the store. An
// empty value clears an optional key (cron, fixedRate, ...).
func (c *Config) Apply(changes map[string]string) error {
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	return c.ApplyContext(ctx, changes)
}

// Reset removes operator edits of keys (all keys when none are given),
// returning them to the code default.
func (c *Config) Reset(keys ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	return c.ResetContext(ctx, keys...)
}

// ApplyContext is Apply with a context for the save.
func (c *Config) ApplyContext(ctx context.Context, changes map[string]string) error {
	if len(changes) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.cur.Load()
	persist, err := c.edited(old, changes)
	if err != nil {
		return err
	}
	return c.commit(ctx, old, persist, changes)
}

// Check validates changes as Apply would, as a whole, and returns the
// settings they would give, changing nothing: a preview.
func (c *Config) Check(changes map[string]string) (Settings, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	persist, err := c.edited(c.cur.Load(), changes)
	if err != nil {
		return Settings{}, err
	}
	values := c.codeValues()
	maps.Copy(values, persist)
	if ps := crossCheck(values, changes); len(ps) > 0 {
		return Settings{}, &ValidationError{Schedule: c.schedule, Problems: ps}
	}
	return settingsFrom(values)
}

// edited returns the operator edits old holds with changes applied, each
// key checked. Called with c.mu held.
func (c *Config) edited(old *snapshot, changes map[string]string) (map[string]string, error) {
	var problems []Problem
	persist := maps.Clone(old.persist)
	for _, k := range sortedKeys(changes) {
		v := changes[k]
		d, ok := c.lookup(k)
		switch {
		case !ok:
			problems = append(problems, Problem{Key: k, Value: v, Reason: c.unknownReason(k)})
		case !d.editable:
			problems = append(problems, Problem{Key: k, Value: v, Reason: "is not editable at runtime"})
		default:
			v, err := d.check(v)
			if err != nil {
				problems = append(problems, Problem{Key: k, Value: v, Reason: err.Error()})
				continue
			}
			persist[k] = v
		}
	}
	if len(problems) > 0 {
		return nil, &ValidationError{Schedule: c.schedule, Problems: problems}
	}
	return persist, nil
}

// ResetContext is Reset with a context for the save.
func (c *Config) ResetContext(ctx context.Context, keys ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.cur.Load()
	persist := maps.Clone(old.persist)
	if len(keys) == 0 {
		keys = sortedKeys(old.persist)
	}
	var problems []Problem
	for _, k := range keys {
		if _, ok := c.lookup(k); !ok {
			problems = append(problems, Problem{Key: k, Reason: c.unknownReason(k)})
			continue
		}
		delete(persist, k)
	}
	if len(problems) > 0 {
		return &ValidationError{Schedule: c.schedule, Problems: problems}
	}
	return c.commit(ctx, old, persist, nil)
}

// commit checks the whole, saves and publishes. Called with c.mu held.
func (c *Config) commit(ctx context.Context, old *snapshot, persist, touched map[string]string) error {
	return c.publish(ctx, old, persist, touched, true)
}

// publish checks the whole, saves when asked, and publishes. Called with
// c.mu held.
func (c *Config) publish(ctx context.Context, old *snapshot, persist, touched map[string]string, save bool) error {
	values := c.codeValues()
	maps.Copy(values, persist)
	if ps := crossCheck(values, touched); len(ps) > 0 {
		return &ValidationError{Schedule: c.schedule, Problems: ps}
	}
	s, err := settingsFrom(values)
	if err != nil {
		return fmt.Errorf("config of schedule %q: %w", c.schedule, err)
	}
	if save && c.saver != nil && !maps.Equal(persist, old.persist) {
		if err := c.saver.SaveConfig(ctx, c.schedule, maps.Clone(persist)); err != nil {
			return fmt.Errorf("save config of schedule %q: %w", c.schedule, err)
		}
	}
	var changed []string
	next := c.inOrder(values)
	for i, v := range next {
		if old.values[i] != v {
			changed = append(changed, c.defs[i].name)
		}
	}
	c.cur.Store(&snapshot{values: next, persist: persist, settings: s})
	if len(changed) == 0 {
		return nil
	}
	sort.Strings(changed)
	ch := Change{Settings: s, Values: values, Changed: changed} // values is not kept: no copy needed
	for _, fn := range c.subs {
		fn(ch)
	}
	return nil
}

// crossCheck validates rules that span keys. touched, when given, names the
// keys an edit sets, so the message can point at them.
func crossCheck(v map[string]string, touched map[string]string) []Problem {
	var ps []Problem
	var plans []string
	for _, k := range []string{KeyCron, KeyFixedRate, KeyFixedDelay} {
		if v[k] != "" {
			plans = append(plans, k)
		}
	}
	if len(plans) > 1 {
		key := plans[len(plans)-1]
		for _, k := range plans {
			if _, ok := touched[k]; ok {
				key = k
			}
		}
		ps = append(ps, Problem{Key: key, Value: v[key], Reason: fmt.Sprintf("at most one of cron, fixedRate, fixedDelay may be set, found %s (clear the others with an empty value)", strings.Join(plans, " and "))})
	}
	s, err := settingsFrom(v)
	if err == nil && s.ThreadCore > s.ThreadMax {
		key := KeyThreadCore
		if _, ok := touched[KeyThreadMax]; ok {
			key = KeyThreadMax
		}
		ps = append(ps, Problem{Key: key, Value: v[key], Reason: fmt.Sprintf("threadCore (%d) must not exceed threadMax (%d)", s.ThreadCore, s.ThreadMax)})
	}
	return ps
}

// unknownReason explains an unknown key, suggesting a near miss.
func (c *Config) unknownReason(k string) string {
	best, bestD := "", 3
	for _, d := range c.defs {
		if strings.EqualFold(d.name, k) {
			best, bestD = d.name, 0
			break
		}
		if dist := levenshtein(strings.ToLower(d.name), strings.ToLower(k)); dist < bestD {
			best, bestD = d.name, dist
		}
	}
	if best != "" {
		return fmt.Sprintf("unknown key (did you mean %q?)", best)
	}
	return "unknown key"
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }
