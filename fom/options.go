package fom

import (
	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"

	"github.com/fom-go/fom/store"
)

// Option configures an App.
type Option func(*options) error

type options struct {
	dataDir string // default "./fom-data"
	store   store.Store
	logger  *zap.Logger
	clock   clockwork.Clock
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
