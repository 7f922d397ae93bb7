// Package store is fom's persistence: operator config edits, per-schedule
// settings such as the log level, and statistics. store/sqlite is the
// embedded default.
//
// Every write is atomic: after a crash a reader finds either the old or
// the new value, never a mix.
package store

import (
	"context"
	"errors"
	"time"
)

// DataFormat is the version of the encodings this build writes into a
// store's rows (statistics days, pages of rounds, the embedded store's
// log). Each store keeps the highest it was written in and refuses to be
// opened by a build that knows a lower one (ErrNewerSchema): a row such a
// build cannot read would be skipped and then overwritten. Bump it with
// every change of an encoding (statistics' format test pins the bytes).
//
// Format 2: a round's cause may be "catchup" (index 5), which a build of
// format 1 cannot read.
const DataFormat = 2

// ErrNewerSchema is returned when a store was written by a newer fom.
var ErrNewerSchema = errors.New("fom: store was written by a newer version of fom")

// ErrCorrupt is returned when a store file cannot be read as a fom store.
var ErrCorrupt = errors.New("fom: store is corrupt or not a fom store")

// ErrInUse is returned when another process holds the store: two
// processes on one embedded store would both run every job.
var ErrInUse = errors.New("fom: store is in use by another process")

// ErrGone is returned by a write when the store's file was removed or
// replaced while the process ran: the write would have gone nowhere.
var ErrGone = errors.New("fom: store file was removed or replaced while in use")

// Store persists what fom must keep across restarts. Implementations are
// safe for concurrent use.
type Store interface {
	// LoadConfig returns a schedule's operator edits (empty when none).
	LoadConfig(ctx context.Context, schedule string) (map[string]string, error)
	// SaveConfig replaces a schedule's operator edits as one unit.
	SaveConfig(ctx context.Context, schedule string, edits map[string]string) error

	// GetSetting returns a per-schedule setting such as "logLevel".
	GetSetting(ctx context.Context, schedule, key string) (value string, ok bool, err error)
	// PutSetting saves a per-schedule setting.
	PutSetting(ctx context.Context, schedule, key, value string) error

	// SaveStats upserts daily statistics and appends failures, in one unit.
	// It keeps nothing of the batch once it returns: the statistics write
	// their next rounds into a page's array once it is saved.
	SaveStats(ctx context.Context, batch StatsBatch) error
	// LoadDays returns a schedule's daily statistics from `from` on, oldest first.
	LoadDays(ctx context.Context, schedule string, from time.Time) ([]Day, error)
	// LoadFailures returns a schedule's most recent failures, newest first.
	LoadFailures(ctx context.Context, schedule string, limit int) ([]Failure, error)
	// LoadRounds returns a schedule's most recent pages of the run
	// history, at most limit, newest first, every instance's on a shared
	// store.
	LoadRounds(ctx context.Context, schedule string, limit int) ([]Round, error)
	// LoadRound returns the page holding round seq of instance ("" is this
	// store's own).
	LoadRound(ctx context.Context, schedule, instance string, seq int64) (Round, bool, error)
	// LastRoundSeq returns the highest round sequence number this store's
	// instance wrote for schedule, 0 when none.
	LastRoundSeq(ctx context.Context, schedule string) (int64, error)
	// Prune applies retention rules, all in one unit (the audit trail
	// included: entries before a rule's time go).
	Prune(ctx context.Context, rules []Retention) error

	// AppendAudit records an operator's action.
	AppendAudit(ctx context.Context, e AuditEntry) error
	// LoadAudit returns a schedule's most recent audit entries, newest first.
	LoadAudit(ctx context.Context, schedule string, limit int) ([]AuditEntry, error)

	Close() error
}

// Day is one schedule's aggregate for one day; Data is the statistics
// package's encoding of it.
type Day struct {
	Schedule string
	Day      time.Time // midnight UTC
	Data     []byte
	Instance string // the instance that recorded it, on a shared store; "" otherwise
}

// Failure is one recorded failure.
type Failure struct {
	Schedule string
	Round    int64 // the scheduled round (or ad-hoc batch) it belonged to; 0 if unknown
	At       time.Time
	TaskID   string
	Status   string
	Error    string
	Stack    string
	Cost     time.Duration
}

// Round is a page of a schedule's run history: the rounds First to Seq
// (sequence numbers of one instance) that one flush wrote. A store keeps a
// page per (schedule, instance, slot): writing a slot again replaces the
// page that was there. Start is the start of its last round; Data is the
// statistics package's encoding of the rounds.
type Round struct {
	Schedule string
	Instance string // the instance that ran them, on a shared store; "" otherwise
	Slot     int
	First    int64
	Seq      int64
	Start    time.Time
	Data     []byte
}

// LastPerSlot returns rs without the rounds a later one of the same
// schedule, instance and slot replaces: what a store writes of a batch.
func LastPerSlot(rs []Round) []Round {
	type key struct {
		schedule, instance string
		slot               int
	}
	return lastPer(rs, func(r *Round) key { return key{r.Schedule, r.Instance, r.Slot} })
}

// LastPerDay returns ds without the days a later one of the same
// schedule, instance and day (in UTC) replaces: a store writing a batch in
// one statement may write each row once.
func LastPerDay(ds []Day) []Day {
	type key struct {
		schedule, instance string
		y                  int
		m                  time.Month
		d                  int
	}
	return lastPer(ds, func(d *Day) key {
		y, m, dd := d.Day.UTC().Date()
		return key{d.Schedule, d.Instance, y, m, dd}
	})
}

// lastPer returns xs without the items a later one of the same key
// replaces, in their order; xs itself when none does.
func lastPer[T any, K comparable](xs []T, keyOf func(*T) K) []T {
	last := make(map[K]int, len(xs))
	for i := range xs {
		last[keyOf(&xs[i])] = i
	}
	if len(last) == len(xs) {
		return xs
	}
	out := make([]T, 0, len(last))
	for i := range xs {
		if last[keyOf(&xs[i])] == i {
			out = append(out, xs[i])
		}
	}
	return out
}

// MaxAudit bounds the audit entries a store keeps per schedule (Prune).
const MaxAudit = 1000

// AuditEntry is one operator action on a schedule.
type AuditEntry struct {
	At        time.Time `json:"at"`
	Schedule  string    `json:"schedule"`
	Action    string    `json:"action"`    // start, stop, exec, config, reset, logLevel, statsSettings
	Principal string    `json:"principal"` // the authenticated user, or the client's address
	Detail    string    `json:"detail"`    // for edits: each key's old and new value
	Outcome   string    `json:"outcome"`   // "ok", or why it was refused
}

// Retention is what one schedule keeps: days, failures and run history
// from Before on (a zero Before keeps every age), and at most KeepFailures
// failures, the newest, and no page of rounds in a slot from KeepRounds on
// (a history made smaller; 0: no bound).
type Retention struct {
	Schedule     string
	Before       time.Time
	KeepFailures int
	KeepRounds   int
}

// RetentionGroup is the schedules that share one retention rule: a store
// deletes for all of them with the same statements.
type RetentionGroup struct {
	Before       time.Time // zero: no deletion by age
	KeepFailures int
	KeepRounds   int
	Schedules    []string
}

// GroupRetention groups rules by rule, in the order rules first give them.
func GroupRetention(rules []Retention) []RetentionGroup {
	index := map[[3]int64]int{}
	var out []RetentionGroup
	for _, r := range rules {
		before := r.Before.UTC()
		var at int64
		if !before.IsZero() {
			at = before.UnixNano()
		}
		k := [3]int64{at, int64(max(r.KeepFailures, 0)), int64(max(r.KeepRounds, 0))}
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, RetentionGroup{Before: before, KeepFailures: int(k[1]), KeepRounds: int(k[2])})
		}
		out[i].Schedules = append(out[i].Schedules, r.Schedule)
	}
	return out
}

// DayNumber is t's day since 1970-01-01 (UTC), as the statistics logs
// key a day; DayTime is its midnight.
func DayNumber(t time.Time) int64 {
	sec := t.Unix()
	d := sec / 86400
	if sec%86400 < 0 {
		d--
	}
	return d
}

// DayTime is the midnight (UTC) of day d since 1970-01-01.
func DayTime(d int64) time.Time { return time.Unix(d*86400, 0).UTC() }

// LogFlushes is how many flushes a store that logs its statistics (SQLite's
// and PostgreSQL's: a flush's days and pages as one row, an entry written
// to its table only once no newer flush holds its key) keeps: a lap of the
// default history (50 rounds kept, a page of five rounds per flush at a
// round a second) and two more, so that a page of such a schedule is always
// replaced in the log rather than written. A flush an app writes in several
// batches (over ten thousand schedules) is several rows of one flush
// (StatsBatch.Flush): counted in rows, the log would hold too few flushes
// for a lap, and every page of such a schedule would be written twice.
const LogFlushes = 12

// StatsBatch is what a statistics flush writes; it may hold any number of
// schedules.
type StatsBatch struct {
	Days     []Day
	Failures []Failure
	Rounds   []Round
	// Flush numbers the flush the batch is part of, when a flush writes
	// its schedules in several batches: those share it, and a store that
	// keeps its recent flushes (a statistics log) counts them by it. 0: a
	// flush of its own.
	Flush uint64
}
