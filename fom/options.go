package fom

import (
	"errors"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"

	"github.com/fom-go/fom/schedule"
	"github.com/fom-go/fom/schedule/wheel"
	"github.com/fom-go/fom/store"
	"github.com/fom-go/fom/timer"
)

// Option configures an App.
type Option func(*options) error

type options struct {
	dataDir string // default "./fom-data"
	store   store.Store
	logger  *zap.Logger
	clock   clockwork.Clock
	// On a cluster store (PostgreSQL):
	instanceID string
	leaseTTL   time.Duration
	flushEvery time.Duration  // 0: flushInterval
	coalesce   *time.Duration // nil: DefaultFireCoalescing
	timers     timer.Options  // the timer service's tuning
	tracer     schedule.Tracer
	noPacing   bool // WithGCPacing(false)
	// lazyStore leaves the embedded store to the first use (Register,
	// Start): fx builds the App before it knows whether the graph starts,
	// and a graph that fails after it would never close an opened store.
	lazyStore bool
}

// DefaultDataDir is where the SQLite store lives unless WithDataDir or
// WithStore says otherwise.
const DefaultDataDir = "fom-data"

// WithDataDir sets the directory of the embedded SQLite store (fom.db).
// Default: ./fom-data.
func WithDataDir(dir string) Option {
	return func(o *options) error {
		if dir == "" {
			return ErrEmptyDataDir
		}
		o.dataDir = dir
		return nil
	}
}

// WithStore uses s instead of the embedded SQLite store. The app does not
// close a store it was given.
func WithStore(s store.Store) Option {
	return func(o *options) error {
		if s == nil {
			return ErrNilStore
		}
		o.store = s
		return nil
	}
}

// WithLogger sets the parent logger; each schedule logs through a named
// child with its own level. Default: no-op.
func WithLogger(l *zap.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return ErrNilLogger
		}
		o.logger = l
		return nil
	}
}

// WithClock sets the clock every schedule uses. Tests pass a fake clock.
// Default: the real clock.
func WithClock(c clockwork.Clock) Option {
	return func(o *options) error {
		if c == nil {
			return ErrNilClock
		}
		o.clock = c
		return nil
	}
}

// WithInstanceID names this App among the instances sharing a PostgreSQL
// store. Default: host-pid-random.
func WithInstanceID(id string) Option {
	return func(o *options) error {
		if id == "" {
			return errors.New("fom: instance id is empty")
		}
		o.instanceID = id
		return nil
	}
}

// WithLeaseTTL sets how long a schedule's lease lasts without renewal on a
// PostgreSQL store (renewed every third of it): how long a crashed
// instance's schedules wait for another owner. Default 15s; at least 300ms.
func WithLeaseTTL(d time.Duration) Option {
	return func(o *options) error {
		if d < 300*time.Millisecond {
			return fmt.Errorf("fom: lease TTL %s: at least 300ms", d)
		}
		o.leaseTTL = d
		return nil
	}
}

// WithTracer observes every round, batch and task of the App's schedules:
// package otelfom makes OpenTelemetry spans of them.
func WithTracer(t schedule.Tracer) Option {
	return func(o *options) error {
		if t == nil {
			return errors.New("fom: tracer is nil")
		}
		o.tracer = t
		return nil
	}
}

// WithTimerOptions tunes the durable timer service (App.Timers): its
// window, poll, lease, retention and claim batch. Its Store, Clock, Logger
// and Instance are the App's and are ignored here.
func WithTimerOptions(t timer.Options) Option {
	return func(o *options) error {
		if t.Window < 0 || t.Poll < 0 || t.Lease < 0 || t.RetainSucceeded < 0 || t.RetainDead < 0 || t.ClaimBatch < 0 {
			return fmt.Errorf("fom: timer options: negative window %s, poll %s, lease %s, retention %s/%s or claim batch %d",
				t.Window, t.Poll, t.Lease, t.RetainSucceeded, t.RetainDead, t.ClaimBatch)
		}
		o.timers = t
		return nil
	}
}

// WithFlushInterval sets how often statistics and the run history are
// written to the store (and at Stop). Default 5s; from 100ms to 1h. A
// longer interval writes fewer, larger transactions and keeps more in
// memory between them (at most a schedule's failures and rounds settings).
// An interval of a second or more falls half-way between whole seconds,
// up to a second sooner than the interval, away from cron's fires.
func WithFlushInterval(d time.Duration) Option {
	return func(o *options) error {
		if d < 100*time.Millisecond || d > time.Hour {
			return fmt.Errorf("fom: flush interval %s: from 100ms to 1h", d)
		}
		o.flushEvery = d
		return nil
	}
}

// WithGCPacing says whether the running App starts, just after a whole
// second, a garbage collection its schedules' aligned fires would
// otherwise set off in their burst (the mark takes its CPU from the
// fires). Default true. It acts only in a process whose collections come
// at least ten seconds apart, and brings one forward by two seconds of
// allocation at most; a process that collects more often is left to the
// runtime's pacing. It is the process's collector: with several Apps in
// one process, one with it is enough.
func WithGCPacing(on bool) Option {
	return func(o *options) error {
		o.noPacing = !on
		return nil
	}
}

// DefaultFireCoalescing is how far the App moves a planned fire, at most,
// unless WithFireCoalescing says otherwise.
const DefaultFireCoalescing = time.Millisecond

// WithFireCoalescing sets how far a planned fire may be moved so that it
// shares a wake-up with others: each runs at the first whole multiple of
// d of wall time at or after its planned instant (never before it), so
// that the schedules due within d of each other are woken together. With
// thousands of schedules spread over the second, a wake-up per fire is
// most of its CPU. A fire planned on a whole multiple of d (a cron
// expression's second) is not moved. Default 1ms, or 0 with WithClock:
// under a test's clock a fire comes at its instant, as the test advances
// the clock to it. 0 keeps each fire at the timing wheel's own resolution
// (100µs); at most 1s.
func WithFireCoalescing(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 || d > wheel.MaxCoalesce { // checked here too, so that New names the option
			return fmt.Errorf("fom: fire coalescing %s: from 0 to %s", d, wheel.MaxCoalesce)
		}
		o.coalesce = &d
		return nil
	}
}

// RegisterOption adjusts one registration.
type RegisterOption func(*registerOptions)

type registerOptions struct {
	name string
}

// Named registers the job under name instead of its tag's or its type's,
// so that one job type can serve several schedules (one per tenant, say).
func Named(name string) RegisterOption {
	return func(o *registerOptions) { o.name = name }
}
