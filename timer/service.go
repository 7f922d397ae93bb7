package timer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/fom-go/fom/internal/slots"
	"github.com/fom-go/fom/schedule"
	"github.com/fom-go/fom/schedule/wheel"
	"github.com/fom-go/fom/store"
)

// Options configure a Service. Every field but Store is optional.
type Options struct {
	// Store keeps the timers: store/sqlite for one process,
	// store/postgres for several instances sharing the work.
	Store store.TimerStore
	// Clock drives every time the service reads or stores. Default: real.
	Clock clockwork.Clock
	// Logger. Default: no-op.
	Logger *zap.Logger
	// Instance names this process among those sharing the store (fire
	// claims carry it). Default: host-pid.
	Instance string
	// Window is how far ahead fires are claimed and armed in the timing
	// wheel, to run on time to the millisecond. Default 3s.
	Window time.Duration
	// Poll is how often the store is asked for fires due within the
	// window (a timer created for the window is armed at once). Default
	// 500ms; at most Window/2.
	Poll time.Duration
	// Lease is how long a claim outlives its fire's due time, and the
	// grace after an attempt's timeout, before another instance may take
	// the fire over (at least once). Default 30s.
	Lease time.Duration
	// RetainSucceeded and RetainDead keep finished fires (for
	// reconciliation) that long after they finished. Defaults 24h, 7 days.
	RetainSucceeded, RetainDead time.Duration
	// ClaimBatch bounds the timers made and the fires claimed by one
	// statement. Default 1000.
	ClaimBatch int
	// Ahead is how long before its due time, at least, a fire's attempt
	// begins (its timer checked enabled and at its version, its attempt
	// counted), in one statement with the other fires due within the
	// same Ahead; the handler is then called at the due time, never
	// before. Fires due at instants k*Ahead to (k+1)*Ahead begin Ahead
	// before k*Ahead, or twice the longest recent such statement when
	// the store is slower than that (up to Window/4). A disable, update
	// or delete committed after a fire's attempt began no longer stops
	// it. Default 50ms; at most Window/4.
	Ahead time.Duration
	// Coalesce bounds how often deliveries wake up: after a wake-up, the
	// next comes Coalesce later at the earliest, for every fire due by
	// then. A fire alone is delivered on its millisecond; under load
	// (fires due less than Coalesce apart) each is at most Coalesce
	// late, and a wake-up delivers many: a wake-up of the process costs
	// more than a fire's own work. Default 5ms; negative: every fire on
	// its millisecond.
	Coalesce time.Duration
}

func (o *Options) defaults() error {
	if o.Store == nil {
		return errors.New("fom: timer service: no store")
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Instance == "" {
		h, _ := os.Hostname()
		o.Instance = fmt.Sprintf("%s-%d", h, os.Getpid())
	}
	if o.Window == 0 {
		o.Window = 3 * time.Second
	}
	if o.Poll == 0 {
		o.Poll = 500 * time.Millisecond
	}
	if o.Poll > o.Window/2 {
		o.Poll = o.Window / 2
	}
	if o.Lease == 0 {
		o.Lease = 30 * time.Second
	}
	if o.RetainSucceeded == 0 {
		o.RetainSucceeded = 24 * time.Hour
	}
	if o.RetainDead == 0 {
		o.RetainDead = 7 * 24 * time.Hour
	}
	if o.ClaimBatch == 0 {
		o.ClaimBatch = 1000
	}
	if o.Ahead == 0 {
		o.Ahead = 50 * time.Millisecond
	}
	if o.Coalesce == 0 {
		o.Coalesce = 5 * time.Millisecond
	}
	if o.Ahead > o.Window/4 {
		o.Ahead = o.Window / 4
	}
	if o.Window < 10*time.Millisecond || o.Poll <= 0 || o.Lease < time.Second || o.Ahead < 0 {
		return fmt.Errorf("fom: timer service: window %s (at least 10ms), poll %s, lease %s (at least 1s), ahead %s (not negative)", o.Window, o.Poll, o.Lease, o.Ahead)
	}
	return nil
}

// kind is a registered handler and its policy.
type kind struct {
	h       Handler
	retry   Retry
	timeout time.Duration
	took    atomic.Int64 // the handler's recent run time, ns: an eighth of each call's
}

// note counts a call of the kind's handler that took d into took.
func (k *kind) note(d time.Duration) {
	old := k.took.Load()
	k.took.Store(old + (int64(d)-old)/8)
}

// HandleOption sets a kind's default policy.
type HandleOption func(*kind)

// WithRetry sets a kind's retry policy (fields left zero keep the
// defaults).
func WithRetry(r Retry) HandleOption { return func(k *kind) { k.retry = mergeRetry(r, k.retry) } }

// WithTimeout sets a kind's attempt deadline.
func WithTimeout(d time.Duration) HandleOption { return func(k *kind) { k.timeout = d } }

func mergeRetry(r, def Retry) Retry {
	if r.MaxAttempts == 0 {
		r.MaxAttempts = def.MaxAttempts
	}
	if r.MinBackoff == 0 {
		r.MinBackoff = def.MinBackoff
	}
	if r.MaxBackoff == 0 {
		r.MaxBackoff = max(def.MaxBackoff, r.MinBackoff)
	}
	return r
}

// Limits bound a namespace's deliveries and timers (zero: no bound).
type Limits struct {
	Rate        float64 `json:"rate"`        // deliveries a second
	Burst       int     `json:"burst"`       // deliveries at once above the rate (default: 1, or Rate rounded up)
	Concurrency int     `json:"concurrency"` // deliveries under way at once
	MaxTimers   int64   `json:"max_timers"`  // timers in the namespace
}

// namespace is a namespace's limits in force.
type namespace struct {
	l   Limits
	lim *rate.Limiter // nil: no rate
	sem chan struct{} // nil: no bound on concurrency
}

// Service is the durable timer service of one process. Build it with New,
// register handlers with Handle, Start it; several processes on one
// PostgreSQL store share the work.
type Service struct {
	o   Options
	st  store.TimerStore
	clk clockwork.Clock
	log *zap.Logger

	mu       sync.Mutex
	kinds    map[string]*kind
	spaces   map[string]*namespace
	armed    map[store.FireRef]int64                 // claimed fires waiting in the wheel: their slot
	live     map[store.FireRef]int64                 // claimed here and not over (armed, queued, begun, or its outcome unwritten): its due time
	slots    *slots.Set[store.FireRef, *wheel.Timer] // claimed fires by slot, each slot's timer in the wheel
	due      []store.FireRef                         // fires whose slot came, for the dispatcher
	finished []store.Outcome                         // outcomes for the finisher
	running  bool
	stop     chan struct{}
	quit     chan struct{}  // closed when Stop gives up waiting for deliveries
	wg       sync.WaitGroup // the loop and the dispatcher
	inflight sync.WaitGroup // deliveries
	wheel    *wheel.Wheel
	kick     chan struct{} // the loop polls now
	dueSig   chan struct{} // the dispatcher has fires
	finSig   chan struct{} // the finisher has outcomes
	metrics  metrics
	seq      atomic.Uint32 // orders the ids made in one millisecond
	stepMax  atomic.Int64  // the longest recent batch statement, ns (see lead)
}

// New builds a service. It starts nothing.
func New(o Options) (*Service, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	return &Service{
		o: o, st: o.Store, clk: o.Clock, log: o.Logger.Named("timer").With(zap.String("fom_instance", o.Instance)),
		kinds: map[string]*kind{}, spaces: map[string]*namespace{}, armed: map[store.FireRef]int64{}, live: map[store.FireRef]int64{},
		slots: slots.New[store.FireRef, *wheel.Timer](o.Ahead.Milliseconds()),
		kick:  make(chan struct{}, 1), dueSig: make(chan struct{}, 1), finSig: make(chan struct{}, 1),
		metrics: newMetrics(),
	}, nil
}

// Handle registers the handler of a kind, with its default policy.
// Fires of a kind without a handler here wait for a process that has one.
func (s *Service) Handle(kindName string, h Handler, opts ...HandleOption) error {
	if err := checkName("kind", kindName, true); err != nil {
		return err
	}
	if h == nil {
		return fmt.Errorf("fom: timer kind %q: nil handler", kindName)
	}
	k := &kind{h: h, retry: DefaultRetry(), timeout: DefaultTimeout}
	for _, o := range opts {
		o(k)
	}
	if k.timeout <= 0 {
		return fmt.Errorf("fom: timer kind %q: timeout %s must be positive", kindName, k.timeout)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.kinds[kindName]; dup {
		return fmt.Errorf("fom: timer kind %q already has a handler", kindName)
	}
	s.kinds[kindName] = k
	return nil
}

// Kinds lists the kinds with a handler.
func (s *Service) Kinds() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.kinds))
	for k := range s.kinds {
		out = append(out, k)
	}
	return out
}

// SetLimits puts a namespace's limits in force (for deliveries from now
// on, and for creates).
func (s *Service) SetLimits(ns string, l Limits) error {
	if l.Rate < 0 || l.Burst < 0 || l.Concurrency < 0 || l.MaxTimers < 0 {
		return fmt.Errorf("fom: timer namespace %q: limits must not be negative: %+v", ns, l)
	}
	n := &namespace{l: l}
	if l.Rate > 0 {
		burst := l.Burst
		if burst == 0 {
			burst = max(1, int(l.Rate+0.999))
		}
		n.lim = rate.NewLimiter(rate.Limit(l.Rate), burst)
	}
	if l.Concurrency > 0 {
		n.sem = make(chan struct{}, l.Concurrency)
	}
	s.mu.Lock()
	s.spaces[ns] = n
	s.mu.Unlock()
	return nil
}

// Limits returns a namespace's limits.
func (s *Service) Limits(ns string) Limits {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.spaces[ns]; n != nil {
		return n.l
	}
	return Limits{}
}

// record turns a spec into a stored timer, checking it and its kind.
func (s *Service) record(spec Spec, now time.Time) (store.Timer, error) {
	if err := validate(&spec, now); err != nil {
		return store.Timer{}, err
	}
	s.mu.Lock()
	_, known := s.kinds[spec.Kind]
	s.mu.Unlock()
	if !known {
		return store.Timer{}, fmt.Errorf("%w: %q (timer %q): register it with Handle before creating timers of it", ErrUnknownKind, spec.Kind, spec.Name)
	}
	t := store.Timer{
		ID: newID(now, uint16(s.seq.Add(1))), Namespace: spec.Namespace, Name: spec.Name, Kind: spec.Kind, At: ms(spec.At), Cron: spec.Cron,
		Payload: []byte(spec.Payload), Enabled: !spec.Disabled, Version: 1,
		MaxAttempts: spec.Retry.MaxAttempts, MinBackoff: spec.Retry.MinBackoff.Milliseconds(), MaxBackoff: spec.Retry.MaxBackoff.Milliseconds(),
		Timeout: spec.Timeout.Milliseconds(), Misfire: spec.Misfire, Created: ms(now), Updated: ms(now),
	}
	if t.Payload == nil {
		t.Payload = []byte("null")
	}
	t.NextAt = firstFire(t, now)
	return t, nil
}

// firstFire is a timer's first fire from now: a one-shot's due time, a
// cron timer's first fire after now.
func firstFire(t store.Timer, now time.Time) int64 {
	if t.Cron == "" {
		return t.At
	}
	p, err := schedule.CronPlan(t.Cron)
	if err != nil {
		return 0
	}
	next, ok := p.Next(schedule.Round{Start: now})
	if !ok {
		return 0
	}
	return ms(next)
}

// Create stores a timer and returns its id. Its fire is armed at once
// when it is due within the window.
func (s *Service) Create(ctx context.Context, spec Spec) (string, error) {
	ids, err := s.CreateMany(ctx, []Spec{spec})
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// CreateMany stores timers in one transaction: all or none.
func (s *Service) CreateMany(ctx context.Context, specs []Spec) ([]string, error) {
	return s.create(ctx, nil, specs)
}

// CreateTx stores a timer in the caller's transaction (on PostgreSQL, a
// pgx.Tx): it exists only if that transaction commits. It is armed by the
// next poll after the commit.
func (s *Service) CreateTx(ctx context.Context, tx any, spec Spec) (string, error) {
	ids, err := s.create(ctx, tx, []Spec{spec})
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

func (s *Service) create(ctx context.Context, tx any, specs []Spec) ([]string, error) {
	now := s.clk.Now()
	ts := make([]store.Timer, len(specs))
	ids := make([]string, len(specs))
	per := map[string]int64{}
	for i, spec := range specs {
		t, err := s.record(spec, now)
		if err != nil {
			if len(specs) > 1 {
				return nil, fmt.Errorf("timer %d of %d: %w", i+1, len(specs), err)
			}
			return nil, err
		}
		ts[i], ids[i] = t, t.ID
		per[t.Namespace]++
	}
	for ns, n := range per {
		if max := s.Limits(ns).MaxTimers; max > 0 {
			have, err := s.st.CountTimers(ctx, ns)
			if err != nil {
				return nil, err
			}
			if have+n > max {
				return nil, fmt.Errorf("%w: namespace %q has %d of %d timers; %d more asked", ErrQuota, ns, have, max, n)
			}
		}
	}
	// A one-shot's fire, and a cron timer's first when due within the
	// window, is made with its timer (one row more in the same statement,
	// where making it later is a statement of its own). One due within the
	// window is also, unless the caller's transaction may yet roll back,
	// claimed here and armed at once: on time without waiting for a poll.
	horizon := now.Add(s.o.Window)
	running := s.isRunning()
	for i := range ts {
		t := &ts[i]
		if !t.Enabled || t.NextAt == 0 || (t.Cron != "" && t.NextAt > ms(horizon)) {
			continue
		}
		a := advance(*t, now, horizon)
		if t.Cron == "" {
			a = store.Advance{Fires: []int64{t.NextAt}}
		}
		if len(a.Fires) == 0 {
			continue
		}
		t.First, t.NextAt = a.Fires[0], a.Next
		if len(a.Fires) > 1 { // a cron firing more than once in the window: the rest by the poll
			t.NextAt = a.Fires[1]
		}
		if tx == nil && running && t.First <= ms(horizon) {
			t.Owner, t.LeaseUntil = s.o.Instance, max(t.First, ms(now))+s.o.Lease.Milliseconds()
		}
	}
	var err error
	if tx != nil {
		err = s.st.InsertTimersTx(ctx, tx, ts)
	} else {
		err = s.st.InsertTimers(ctx, ts)
	}
	if errors.Is(err, ErrDuplicate) && len(ts) == 1 {
		return nil, fmt.Errorf("%w: namespace %q, name %q", ErrDuplicate, ts[0].Namespace, ts[0].Name)
	}
	if err != nil {
		return nil, err
	}
	s.metrics.created.Add(int64(len(ts)))
	var claimed []store.Claimed
	poke := false
	for _, t := range ts {
		switch {
		case t.Owner != "":
			claimed = append(claimed, store.Claimed{FireRef: store.FireRef{TimerID: t.ID, Planned: t.First}, DueAt: t.First, Namespace: t.Namespace})
		case t.First != 0 && t.First <= ms(horizon):
			poke = true
		}
	}
	s.arm(claimed)
	if poke {
		s.poke()
	}
	return ids, nil
}

func (s *Service) isRunning() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

// poke asks the loop to poll now.
func (s *Service) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Get returns a timer.
func (s *Service) Get(ctx context.Context, id string) (Timer, error) {
	t, ok, err := s.st.GetTimer(ctx, id)
	if err != nil {
		return Timer{}, err
	}
	if !ok {
		return Timer{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return s.view(t), nil
}

// view is a stored timer as the API shows it.
func (s *Service) view(t store.Timer) Timer {
	v := Timer{ID: t.ID, Version: t.Version, Next: fromMS(t.NextAt), Created: fromMS(t.Created), Updated: fromMS(t.Updated),
		Spec: Spec{Namespace: t.Namespace, Name: t.Name, Kind: t.Kind, At: fromMS(t.At), Cron: t.Cron, Payload: t.Payload, Disabled: !t.Enabled,
			Retry:   Retry{MaxAttempts: t.MaxAttempts, MinBackoff: time.Duration(t.MinBackoff) * time.Millisecond, MaxBackoff: time.Duration(t.MaxBackoff) * time.Millisecond},
			Timeout: time.Duration(t.Timeout) * time.Millisecond, Misfire: t.Misfire}}
	switch {
	case !t.Enabled:
		v.State = "disabled"
	case t.NextAt == 0 && !t.Live:
		v.State = "done"
	default:
		v.State = "enabled"
	}
	return v
}

// Filter selects timers for List.
type Filter struct {
	Namespace, Kind string
	// State is enabled, disabled or done (a one-shot that fired), or dead:
	// a fire of the timer is dead (what needs attention).
	State  string
	Cursor string // from the previous page's next cursor
	Limit  int    // default 100, at most 1000
}

// List returns a page of timers by id (by age) and the cursor of the next
// page ("" after the last).
func (s *Service) List(ctx context.Context, f Filter) ([]Timer, string, error) {
	switch f.State {
	case "", "enabled", "disabled", "done", "dead":
	default:
		return nil, "", bad("state", f.State, "enabled, disabled, done or dead (a fire of it is dead)")
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	f.Limit = min(f.Limit, 1000)
	ts, err := s.st.ListTimers(ctx, store.TimerFilter{Namespace: f.Namespace, Kind: f.Kind, State: f.State, After: f.Cursor, Limit: f.Limit + 1})
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(ts) > f.Limit {
		ts = ts[:f.Limit]
		next = ts[len(ts)-1].ID
	}
	out := make([]Timer, len(ts))
	for i, t := range ts {
		out[i] = s.view(t)
	}
	return out, next, nil
}

// Update replaces a timer's definition (its namespace and name stay):
// every fire not yet begun uses the new one.
func (s *Service) Update(ctx context.Context, id string, spec Spec) error {
	old, ok, err := s.st.GetTimer(ctx, id)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	spec.Namespace, spec.Name = old.Namespace, old.Name
	now := s.clk.Now()
	t, err := s.record(spec, now)
	if err != nil {
		return err
	}
	t.ID, t.Enabled, t.Created = id, old.Enabled, old.Created
	if ok, err := s.st.UpdateTimer(ctx, t); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	s.unarm(id)
	s.poke()
	return nil
}

// Disable stops a timer's fires not yet begun; Enable starts it again
// from now (a one-shot already past fires at once).
func (s *Service) Disable(ctx context.Context, id string) error { return s.setEnabled(ctx, id, false) }

// Enable starts a disabled timer again.
func (s *Service) Enable(ctx context.Context, id string) error { return s.setEnabled(ctx, id, true) }

func (s *Service) setEnabled(ctx context.Context, id string, on bool) error {
	t, ok, err := s.st.GetTimer(ctx, id)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	now := s.clk.Now()
	next := int64(0)
	if on {
		if t.Enabled {
			return nil
		}
		next = firstFire(t, now)
		if t.Cron == "" {
			// A one-shot whose fire was made is not made again.
			fs, err := s.st.Fires(ctx, id, 1)
			if err != nil {
				return err
			}
			if len(fs) > 0 {
				next = 0
			}
		}
	}
	if ok, err := s.st.SetEnabled(ctx, id, on, next, ms(now)); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if on {
		s.poke()
	} else {
		s.unarm(id)
	}
	return nil
}

// Delete removes a timer with its fires and their history.
func (s *Service) Delete(ctx context.Context, id string) error {
	ok, err := s.st.DeleteTimer(ctx, id)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	s.unarm(id)
	return nil
}

// unarm takes a timer's armed fires out of the wheel; the store refuses
// to start them anyway (StartFires), this only saves the attempt.
func (s *Service) unarm(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ref := range s.armed {
		if ref.TimerID == id {
			delete(s.armed, ref)
			delete(s.live, ref)
		}
	}
}

// FireRecord is a fire of a timer with its attempts.
type FireRecord struct {
	Planned   time.Time       `json:"planned"`
	Key       string          `json:"key"`
	State     string          `json:"state"`
	Attempt   int             `json:"attempt"`
	Due       time.Time       `json:"due"`
	LastError string          `json:"last_error,omitempty"`
	Attempts  []AttemptRecord `json:"attempts"`
}

// AttemptRecord is one attempt of a fire.
type AttemptRecord struct {
	Attempt    int       `json:"attempt"`
	At         time.Time `json:"at"`
	LatencyMS  int64     `json:"latency_ms"`
	Error      string    `json:"error,omitempty"`
	StatusCode int       `json:"status_code,omitempty"`
}

// Fires returns a timer's fires, newest first, with their attempts.
func (s *Service) Fires(ctx context.Context, id string, limit int) ([]FireRecord, error) {
	if limit <= 0 {
		limit = 50
	}
	fs, err := s.st.Fires(ctx, id, min(limit, 1000))
	if err != nil {
		return nil, err
	}
	out := make([]FireRecord, len(fs))
	for i, f := range fs {
		r := FireRecord{Planned: fromMS(f.Planned), Key: KeyOf(id, fromMS(f.Planned)), State: f.State, Attempt: f.Attempt, Due: fromMS(f.DueAt), LastError: f.LastError, Attempts: []AttemptRecord{}}
		for _, a := range f.Attempts {
			r.Attempts = append(r.Attempts, AttemptRecord{Attempt: a.Attempt, At: fromMS(a.Started), LatencyMS: a.Finished - a.Started, Error: a.Error, StatusCode: a.StatusCode})
		}
		out[i] = r
	}
	return out, nil
}

// RetryFire re-queues a dead fire now, with a fresh count of attempts.
func (s *Service) RetryFire(ctx context.Context, id string, planned time.Time) error {
	ok, err := s.st.RetryFire(ctx, store.FireRef{TimerID: id, Planned: ms(planned)}, ms(s.clk.Now()))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: timer %s, fire planned %s", ErrNotDead, id, planned.UTC().Format(time.RFC3339Nano))
	}
	s.poke()
	return nil
}

// Counts are the fires of a namespace ("" for all) by state, the late
// ones and those due within the next minute.
func (s *Service) Counts(ctx context.Context, ns string) (store.FireCounts, error) {
	now := s.clk.Now()
	return s.st.CountFires(ctx, ns, ms(now.Add(-time.Second)), ms(now.Add(time.Minute)))
}

// Count is the number of timers of a namespace ("" for all).
func (s *Service) Count(ctx context.Context, ns string) (int64, error) {
	return s.st.CountTimers(ctx, ns)
}
