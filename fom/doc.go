// Package fom runs scheduled and ad-hoc jobs inside a Go process.
//
// A job is a struct that embeds fom.Schedule; the embedded field's tag
// holds the job's plan and limits, fom.Value fields are settings operators
// can edit at runtime, and its methods (Run, Tasks, a methods tag) are the
// work. App.Register reads the struct by reflection once per type, checks
// everything, and reports every problem of a declaration in one error that
// names the type, the key and the value.
//
// Each registered job gets a *ScheduleContext (package schedule): its own
// state machine and round goroutine, a bounded worker pool, timeouts
// that cancel, conflict detection across the app, and counters. Operator
// edits (sc.Config().Apply) are validated as a whole, saved in the store
// (SQLite in the data directory by default), and override the tags at the
// next start.
//
// Module and Job plug the app into an uber fx application.
//
// There is no package-level state: two Apps in one process are independent.
package fom
