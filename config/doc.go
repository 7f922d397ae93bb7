// Package config holds a schedule's configuration: the built-in keys with
// their defaults and validation, the job's custom keys, and operator edits.
//
// A value comes from, in rising priority, the built-in default, the job's
// struct tag, and a persisted operator edit. Edits go through Apply, which
// validates all changed keys and the rules that span keys (one plan at most,
// threadCore ≤ threadMax) on a copy, saves the copy through the Persister,
// and only then publishes it with one atomic swap; a failed validation or
// save changes nothing. Readers (Get, Settings) never lock.
//
// Persisted edits from an older version that no longer make sense (an
// unknown key, a value that no longer parses) are dropped with a warning
// instead of stopping the application.
package config
