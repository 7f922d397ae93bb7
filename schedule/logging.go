package schedule

import (
	"fmt"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// LogLevel returns the schedule's log level.
func (c *Context) LogLevel() zapcore.Level { return c.level.Level() }

// SetLogLevel changes the schedule's log level; it is saved when the
// context was built with a level store (package fom does so).
func (c *Context) SetLogLevel(l zapcore.Level) error {
	if l < zapcore.DebugLevel || l > zapcore.FatalLevel {
		return fmt.Errorf("schedule %s: log level %q is not one of debug, info, warn, error, dpanic, panic, fatal", c.name, l)
	}
	if save := c.hooks.onLevel; save != nil {
		if err := save(l); err != nil {
			return fmt.Errorf("schedule %s: save log level: %w", c.name, err)
		}
	}
	c.setLevel(l)
	return nil
}

// BindLogLevel sets the initial level and a function that saves changes.
func (c *Context) BindLogLevel(initial zapcore.Level, save func(zapcore.Level) error) {
	c.setLevel(initial)
	c.hooks.onLevel = save
}

// ApplyLogLevel puts l in force without saving it: a level another
// instance of the app saved in a shared store.
func (c *Context) ApplyLogLevel(l zapcore.Level) { c.setLevel(l) }

// setLevel puts l in force for the logger and for debug.
func (c *Context) setLevel(l zapcore.Level) {
	c.level.SetLevel(l)
	c.debugOn.Store(l <= zapcore.DebugLevel)
}

// debug reports whether the schedule logs at debug level: one atomic load
// of a flag beside the context's state, so that the round path skips
// building entries nobody writes without reaching for the level's own
// allocation (a cache miss per fire with thousands of schedules).
func (c *Context) debug() bool { return c.debugOn.Load() }

// checkDebug is log.Check at debug level, skipped at the cost of one atomic
// load when the schedule's own level is above debug.
func (c *Context) checkDebug(msg string) *zapcore.CheckedEntry {
	if !c.debug() {
		return nil
	}
	return c.log.Check(zapcore.DebugLevel, msg)
}

// levelCore gives a schedule's logger a level of its own.
type levelCore struct {
	zapcore.Core
	lvl zap.AtomicLevel
}

func (c levelCore) Enabled(l zapcore.Level) bool { return c.lvl.Enabled(l) && c.Core.Enabled(l) }
func (c levelCore) With(f []zapcore.Field) zapcore.Core {
	return levelCore{Core: c.Core.With(f), lvl: c.lvl}
}
func (c levelCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !c.lvl.Enabled(e.Level) {
		return ce
	}
	return c.Core.Check(e, ce)
}
