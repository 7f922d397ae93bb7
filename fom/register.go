package fom

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/fom-go/fom/config"
	"github.com/fom-go/fom/schedule"
)

// jobType is what reflection learns about a job type. It is computed once
// per type and app, and holds no instance data.
type jobType struct {
	typeName string
	defName  string
	tags     [][2]string
	tagErr   error
	values   []valueField
	methods  []workMethod // from the methods tag
	run      bool         // has Run(ctx) (any, error) or Run(ctx) error
	runErr   bool         // Run's form is Run(ctx) error
	tasks    bool         // has Tasks(ctx) ([]Task, error)
	next     bool         // has Next(Round) (time.Time, bool)
	problems []string
}

type valueField struct {
	index  []int
	field  string
	key    string
	def    string
	hasDef bool
	bounds bounds
}

type workMethod struct {
	name    string
	errOnly bool // func(ctx) error rather than func(ctx) (any, error)
}

var (
	ctxType      = reflect.TypeFor[context.Context]()
	errType      = reflect.TypeFor[error]()
	anyType      = reflect.TypeFor[any]()
	scheduleType = reflect.TypeFor[Schedule]()
	binderType   = reflect.TypeFor[binder]()
)

// signatures of the methods fom looks for, by name.
type signature struct {
	in, out []reflect.Type
	text    string
}

func signatures() map[string]signature {
	return map[string]signature{
		"Run":         {[]reflect.Type{ctxType}, []reflect.Type{anyType, errType}, "func(context.Context) (any, error) or func(context.Context) error"},
		"Tasks":       {[]reflect.Type{ctxType}, []reflect.Type{reflect.TypeFor[[]Task](), errType}, "func(context.Context) ([]fom.Task, error)"},
		"OnComplete":  {[]reflect.Type{ctxType, reflect.TypeFor[Round]()}, nil, "func(context.Context, fom.Round)"},
		"OnResult":    {[]reflect.Type{reflect.TypeFor[Result]()}, nil, "func(fom.Result)"},
		"OnCancel":    {[]reflect.Type{reflect.TypeFor[string](), reflect.TypeFor[time.Duration]()}, nil, "func(taskID string, elapsed time.Duration)"},
		"OnTerminate": {[]reflect.Type{reflect.TypeFor[Summary]()}, nil, "func(fom.Summary)"},
		"Next":        {[]reflect.Type{reflect.TypeFor[Round]()}, []reflect.Type{reflect.TypeFor[time.Time](), reflect.TypeFor[bool]()}, "func(prev fom.Round) (time.Time, bool)"},
	}
}

// matches reports whether method m (from a type, receiver first) has the
// signature.
func (s signature) matches(m reflect.Method) bool {
	t := m.Type
	if t.NumIn() != len(s.in)+1 || t.NumOut() != len(s.out) || t.IsVariadic() {
		return false
	}
	for i, in := range s.in {
		if t.In(i+1) != in {
			return false
		}
	}
	for i, out := range s.out {
		if t.Out(i) != out {
			return false
		}
	}
	return true
}

func methodText(m reflect.Method) string {
	// Drop the receiver from the printed signature.
	t := m.Type
	var in, out []string
	for i := 1; i < t.NumIn(); i++ {
		in = append(in, typeText(t.In(i)))
	}
	for i := 0; i < t.NumOut(); i++ {
		out = append(out, typeText(t.Out(i)))
	}
	s := "func(" + strings.Join(in, ", ") + ")"
	switch len(out) {
	case 0:
	case 1:
		s += " " + out[0]
	default:
		s += " (" + strings.Join(out, ", ") + ")"
	}
	return s
}

// typeText prints a type as a job's author wrote it: the engine's types
// are re-exported by fom, so schedule.Round reads fom.Round.
func typeText(t reflect.Type) string {
	s := t.String()
	if strings.Contains(t.PkgPath()+elemPkg(t), "github.com/fom-go/fom/schedule") {
		s = strings.ReplaceAll(s, "schedule.", "fom.")
	}
	return s
}

func elemPkg(t reflect.Type) string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	return t.PkgPath()
}

// analyze inspects a job type. t is a pointer to a struct.
func analyze(t reflect.Type) *jobType {
	jt := &jobType{typeName: t.String()}
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		jt.problems = append(jt.problems, "a job must be a pointer to a struct that embeds fom.Schedule")
		return jt
	}
	st := t.Elem()
	jt.defName = lowerCamel(st.Name())
	marker := false
	for i := 0; i < st.NumField(); i++ {
		f := st.Field(i)
		if f.Anonymous && f.Type == scheduleType {
			marker = true
			jt.tags, jt.tagErr = parseTag(string(f.Tag))
			continue
		}
		if reflect.PointerTo(f.Type).Implements(binderType) {
			key, ok := f.Tag.Lookup("fom")
			def, hasDef := f.Tag.Lookup("default")
			switch {
			case !f.IsExported():
				jt.problems = append(jt.problems, fmt.Sprintf("field %s: a fom.Value field must be exported", f.Name))
			case !ok || key == "":
				jt.problems = append(jt.problems, fmt.Sprintf("field %s: a fom.Value field needs a key, such as `fom:\"%s\"`", f.Name, lowerCamel(f.Name)))
			default:
				vf := valueField{index: f.Index, field: f.Name, key: key, def: def, hasDef: hasDef}
				vf.bounds.min, vf.bounds.max = f.Tag.Get("min"), f.Tag.Get("max")
				if o := f.Tag.Get("oneof"); o != "" {
					for _, c := range strings.Split(o, ",") {
						vf.bounds.oneof = append(vf.bounds.oneof, strings.TrimSpace(c))
					}
				}
				jt.values = append(jt.values, vf)
			}
		}
	}
	if !marker {
		jt.problems = append(jt.problems, "the struct does not embed fom.Schedule")
	}
	sigs := signatures()
	for _, name := range []string{"Run", "Tasks", "OnComplete", "OnResult", "OnCancel", "OnTerminate", "Next"} {
		m, ok := t.MethodByName(name)
		if !ok {
			continue
		}
		sig := sigs[name]
		if name == "Run" && (signature{in: []reflect.Type{ctxType}, out: []reflect.Type{errType}}).matches(m) {
			jt.run, jt.runErr = true, true // the methods tag's short form, for Run too
			continue
		}
		if !sig.matches(m) {
			jt.problems = append(jt.problems, fmt.Sprintf("method %s has signature %s, want %s", name, methodText(m), sig.text))
			continue
		}
		switch name {
		case "Run":
			jt.run = true
		case "Tasks":
			jt.tasks = true
		case "Next":
			jt.next = true
		}
	}
	named := false // the methods tag names at least one method
	for _, kv := range jt.tags {
		if kv[0] != "methods" {
			continue
		}
		for _, name := range strings.Split(kv[1], ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			named = true
			m, ok := t.MethodByName(name)
			if !ok {
				jt.problems = append(jt.problems, fmt.Sprintf("key \"methods\" value %q: method %s not found on %s (it must be exported and have a pointer or value receiver)", kv[1], name, t))
				continue
			}
			full := signature{[]reflect.Type{ctxType}, []reflect.Type{anyType, errType}, ""}
			short := signature{[]reflect.Type{ctxType}, []reflect.Type{errType}, ""}
			switch {
			case full.matches(m):
				jt.methods = append(jt.methods, workMethod{name: name})
			case short.matches(m):
				jt.methods = append(jt.methods, workMethod{name: name, errOnly: true})
			default:
				jt.problems = append(jt.problems, fmt.Sprintf("key \"methods\" value %q: method %s has signature %s, want func(context.Context) (any, error) or func(context.Context) error", kv[1], name, methodText(m)))
			}
		}
	}
	// A methods tag whose every name was bad has its own problems above;
	// one that names nothing at all is "no work" like a missing one.
	if !jt.run && !jt.tasks && len(jt.methods) == 0 && marker && !named {
		jt.problems = append(jt.problems, "no work: define Run(ctx context.Context) (any, error) or Run(ctx context.Context) error, Tasks(ctx context.Context) ([]fom.Task, error), or a methods tag")
	}
	return jt
}

// lowerCamel turns "SyncUsers" into "syncUsers" and "HTTPPoller" into "httpPoller".
func lowerCamel(s string) string {
	r := []rune(s)
	for i := 0; i < len(r); i++ {
		if !unicode.IsUpper(r[i]) {
			break
		}
		if i > 0 && i+1 < len(r) && !unicode.IsUpper(r[i+1]) {
			break
		}
		r[i] = unicode.ToLower(r[i])
	}
	return string(r)
}

// declaration is one job instance resolved against its type.
type declaration struct {
	name   string
	tags   map[string]string
	custom []config.CustomKey
	job    schedule.Job
	setter map[string]func(string) error
}

// declare resolves tags (with ${ENV} expansion), Value fields and work,
// under name when it is given (Named) rather than the tag's or type's.
func (jt *jobType) declare(job any, name string) (*declaration, []string) {
	problems := slices.Clone(jt.problems)
	if jt.tagErr != nil {
		problems = append(problems, "fom.Schedule tag: "+jt.tagErr.Error())
	}
	d := &declaration{tags: map[string]string{}, setter: map[string]func(string) error{}}
	for _, kv := range jt.tags {
		if kv[0] == "methods" {
			continue
		}
		v, err := expandEnv(kv[1])
		if err != nil {
			problems = append(problems, fmt.Sprintf("key %q value %q: %v", kv[0], kv[1], err))
			continue
		}
		if _, dup := d.tags[kv[0]]; dup {
			problems = append(problems, fmt.Sprintf("key %q is given twice", kv[0]))
		}
		d.tags[kv[0]] = v
	}
	if name != "" { // Named: before the tasks, which are named after it
		d.tags[config.KeyName] = name
	}
	d.name = jt.defName
	if n, ok := d.tags[config.KeyName]; ok {
		d.name = n
	}
	if jt.next {
		for _, k := range []string{config.KeyCron, config.KeyFixedRate, config.KeyFixedDelay} {
			if d.tags[k] != "" {
				problems = append(problems, fmt.Sprintf("key %q value %q: two plans: the job also has a Next method", k, d.tags[k]))
			}
		}
	}
	rv := reflect.ValueOf(job)
	if rv.Kind() == reflect.Pointer && rv.IsNil() {
		return d, append(problems, "job is a nil pointer")
	}
	for _, vf := range jt.values {
		def, err := expandEnv(vf.def)
		if err != nil {
			problems = append(problems, fmt.Sprintf("field %s key %q default %q: %v", vf.field, vf.key, vf.def, err))
			continue
		}
		b := rv.Elem().FieldByIndex(vf.index).Addr().Interface().(binder)
		parse, set, kind, typ, hint, err := b.parser(vf.bounds)
		if err != nil {
			problems = append(problems, fmt.Sprintf("field %s key %q: %v", vf.field, vf.key, err))
			continue
		}
		// A method Validate<Field>(T) error of the job checks what the
		// type and the tag's bounds let through.
		if m := rv.MethodByName("Validate" + vf.field); m.IsValid() {
			mt := m.Type()
			if mt.NumIn() != 1 || mt.In(0) != b.valueType() || mt.NumOut() != 1 || mt.Out(0) != errType {
				problems = append(problems, fmt.Sprintf("field %s key %q: method Validate%s has signature %s, want func(%s) error", vf.field, vf.key, vf.field, mt, b.valueType()))
				continue
			}
			check := func(s string) error {
				x, err := b.typed(s)
				if err != nil {
					return err
				}
				if out := m.Call([]reflect.Value{x})[0]; !out.IsNil() {
					return out.Interface().(error)
				}
				return nil
			}
			parse0, set0 := parse, set
			parse = func(s string) error {
				if err := parse0(s); err != nil {
					return err
				}
				return check(s)
			}
			set = func(s string) error {
				if err := parse(s); err != nil {
					return err
				}
				return set0(s)
			}
		}
		if err := parse(def); err != nil {
			if !vf.hasDef {
				err = fmt.Errorf("no default given and the zero text is not a %s; add `default:\"...\"`", typ)
			}
			problems = append(problems, fmt.Sprintf("field %s key %q default %q: %v", vf.field, vf.key, def, err))
			continue
		}
		d.custom = append(d.custom, config.CustomKey{Name: vf.key, Default: def, Parse: parse, Doc: typ + " (field " + vf.field + ")",
			Field: jt.typeName + "." + vf.field, Verbatim: typ == "string", Kind: kind, Hint: hint})
		d.setter[vf.key] = set
	}
	d.job = jt.work(d.name, job)
	return d, problems
}

// work builds the engine's Job from the job's methods.
func (jt *jobType) work(name string, job any) schedule.Job {
	b := &boundJob{}
	rv := reflect.ValueOf(job)
	// Run and methods tasks hold no state of a round: built once, the same
	// (read-only) slice serves every round.
	var fixed []Task
	if jt.run {
		r, ok := job.(runner)
		if jt.runErr {
			r, ok = errRun{job.(errRunner)}, true
		}
		if ok {
			b.run = runTask{id: name, job: r}
			fixed = append(fixed, &b.run)
		}
	}
	for _, m := range jt.methods {
		id := name + "." + m.name
		mv := rv.MethodByName(m.name).Interface()
		if m.errOnly {
			fn := mv.(func(context.Context) error)
			fixed = append(fixed, TaskFunc(id, func(ctx context.Context) (any, error) { return nil, fn(ctx) }))
		} else {
			fixed = append(fixed, TaskFunc(id, mv.(func(context.Context) (any, error))))
		}
	}
	if len(fixed) == 1 {
		b.one[0] = fixed[0]
		fixed = b.one[:]
	}
	b.fixed = fixed
	if jt.tasks {
		b.batch = job.(batcher)
	}
	j := schedule.Job{Tasks: b.tasks}
	if b.batch == nil { // no Tasks method: the same tasks every round, no job code before them
		j.Tasks, j.Fixed = nil, b.fixed
	}
	if h, ok := job.(interface{ OnComplete(context.Context, Round) }); ok {
		j.OnComplete = h.OnComplete
	}
	if h, ok := job.(interface{ OnResult(Result) }); ok {
		j.OnResult = h.OnResult
	}
	if h, ok := job.(interface {
		OnCancel(string, time.Duration)
	}); ok {
		j.OnCancel = h.OnCancel
	}
	if h, ok := job.(interface{ OnTerminate(Summary) }); ok {
		j.OnTerminate = h.OnTerminate
	}
	if jt.next {
		b.next = job.(planner)
		b.desc = "custom (" + jt.typeName + ".Next)"
		j.Plan = b
	}
	return j
}

type (
	runner interface {
		Run(context.Context) (any, error)
	}
	batcher interface {
		Tasks(context.Context) ([]Task, error)
	}
	planner   interface{ Next(Round) (time.Time, bool) }
	errRunner interface{ Run(context.Context) error }
)

// errRun is a job's Run(ctx) error as the runner a task calls: made once,
// at registration.
type errRun struct{ j errRunner }

func (e errRun) Run(ctx context.Context) (any, error) { return nil, e.j.Run(ctx) }

// boundJob is what the engine calls of a registered job: its tasks, its
// Run as a task and its Next as the plan, in one object. A fire reaches
// each through it and the job's own methods, rather than through a
// closure, a slice, a task and a method value allocated apart: with
// thousands of schedules each of those is a cache line a fire finds cold.
type boundJob struct {
	// What a round of a job with Run alone reads, in the object's first
	// cache line (the object is 128 bytes: aligned to its size).
	batch batcher // the job's Tasks method, or nil
	one   [1]Task // the only task of a job with one fixed task
	run   runTask
	fixed []Task  // Run and the methods tag's tasks, the same every round
	next  planner // the job's Next method, or nil
	desc  string
}

// tasks is the Tasks of a job with a Tasks method, and its fixed tasks
// after the method's.
func (b *boundJob) tasks(ctx context.Context) ([]Task, error) {
	ts, err := b.batch.Tasks(ctx)
	if err != nil || len(b.fixed) == 0 {
		return ts, err
	}
	out := make([]Task, 0, len(ts)+len(b.fixed)) // never append to the job's own slice
	return append(append(out, ts...), b.fixed...), nil
}

// Next and String make a job's Next method its plan.
func (b *boundJob) Next(prev Round) (time.Time, bool) { return b.next.Next(prev) }
func (b *boundJob) String() string                    { return b.desc }

// runTask is a job's Run method as its task, named after the schedule.
type runTask struct {
	id  string
	job runner
}

func (t *runTask) ID() string                            { return t.id }
func (t *runTask) Exec(ctx context.Context) (any, error) { return t.job.Run(ctx) }

// configProblems turns a config validation error into problem lines.
func configProblems(err error) []string {
	var ve *config.ValidationError
	if !errors.As(err, &ve) {
		return []string{err.Error()}
	}
	out := make([]string, len(ve.Problems))
	for i, p := range ve.Problems {
		out[i] = p.String()
	}
	return out
}
