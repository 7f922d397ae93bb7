package store

import (
	"context"
	"errors"
)

// Durable timers (package timer) are kept by a TimerStore: store/sqlite for
// one process, store/postgres for several instances. Times are Unix
// milliseconds, the precision of a fire's key, given by the timer
// service's clock (so that a test's clock drives them too).

// ErrDuplicateTimer is returned when a namespace already has a timer of
// that name.
var ErrDuplicateTimer = errors.New("fom: a timer of that name already exists in its namespace")

// ErrTxNotSupported is returned by InsertTimersTx for a transaction the
// store cannot write in (only a PostgreSQL store's pgx.Tx is one).
var ErrTxNotSupported = errors.New("fom: timers can be created in a caller's transaction only on PostgreSQL, with a pgx.Tx")

// Fire states.
const (
	FirePending   = "pending"   // waiting for its due time (and a claim)
	FireRunning   = "running"   // an attempt is being delivered
	FireSucceeded = "succeeded" // delivered
	FireRetry     = "retry"     // an attempt failed; the next is due at DueAt
	FireDead      = "dead"      // the last attempt failed, or a permanent failure
)

// Timer is a stored durable timer.
type Timer struct {
	ID        string
	Namespace string
	Name      string
	Kind      string
	At        int64  // one-shot: its due time; 0 for a cron timer
	Cron      string // recurring: its spec; "" for a one-shot
	Payload   []byte // JSON
	Enabled   bool
	Version   int64 // bumped by every update
	// Policy; 0 is the kind's default.
	MaxAttempts int
	MinBackoff  int64 // ms
	MaxBackoff  int64 // ms
	Timeout     int64 // ms: an attempt's deadline
	Misfire     string
	NextAt      int64 // the next fire not yet materialized; 0: none (a one-shot whose fire exists)
	Created     int64
	Updated     int64
	// Live (read by GetTimer and ListTimers): a fire of it is pending,
	// running or to be retried.
	Live bool
	// First, when set at insert, is the timer's first fire, made with it
	// (its NextAt is then the fire after it, or 0): a fire due soon is
	// armed at once rather than at the next poll. Claimed by Owner until
	// Lease, when Owner is set.
	First      int64
	Owner      string
	LeaseUntil int64
}

// TimerFilter selects timers for a listing, ordered by id.
type TimerFilter struct {
	Namespace, Kind string // "" for any
	State           string // "", "enabled", "disabled", "done", or "dead": with a dead fire
	After           string // the cursor: ids after it
	Limit           int
}

// FireRef names a fire: a timer and its planned time.
type FireRef struct {
	TimerID string
	Planned int64
}

// Advance materializes a timer's fires: Fires are inserted (each once:
// one that exists is left as it is) and the timer's NextAt moves from
// From to Next, unless another writer moved it already.
type Advance struct {
	TimerID string
	From    int64
	Next    int64
	Fires   []int64
}

// FireKey orders the unclaimed fires for claims: by due time, then timer
// and planned time. A poll claims in chunks, each after the key the one
// before it ended on: a chunk does not walk again past the fires claimed
// already (on PostgreSQL, index entries left behind until a vacuum: the
// claims of a burst of fires due at one instant were quadratic).
type FireKey struct {
	DueAt int64
	FireRef
}

// Less reports whether k comes before o.
func (k FireKey) Less(o FireKey) bool {
	if k.DueAt != o.DueAt {
		return k.DueAt < o.DueAt
	}
	if k.TimerID != o.TimerID {
		return k.TimerID < o.TimerID
	}
	return k.Planned < o.Planned
}

// Past is the later of k and c's key: the key a claim goes on from once
// it took c.
func (k FireKey) Past(c Claimed) FireKey {
	if ck := (FireKey{DueAt: c.DueAt, FireRef: c.FireRef}); k.Less(ck) {
		return ck
	}
	return k
}

// Claimed is a fire claimed by an instance, to be armed for its due time.
type Claimed struct {
	FireRef
	DueAt     int64
	Namespace string
}

// Started is a fire whose attempt began, with what its delivery reads
// of its timer as it is now: ID, Namespace, Name, Kind, Payload, the
// retry policy (MaxAttempts, MinBackoff, MaxBackoff) and Timeout. The
// timer's other fields are left zero: a batch reads no more than it
// delivers.
type Started struct {
	FireRef
	Attempt int
	Timer   Timer
}

// Outcome is how an attempt ended.
type Outcome struct {
	FireRef
	Attempt    int
	State      string // FireSucceeded, FireRetry or FireDead
	DueAt      int64  // FireRetry: when the next attempt is due
	Started    int64
	Finished   int64
	Error      string
	StatusCode int // an HTTP callback's status, 0 otherwise
	Tries      int // times the service asked to record it (not stored)
}

// FireRecord is a fire with its attempts, for history.
type FireRecord struct {
	FireRef
	State     string
	Attempt   int // attempts so far, every one counted (a retry-now does not reset it)
	DueAt     int64
	Owner     string
	LastError string
	// Last is the last attempt as the fire's row keeps it; Attempts are
	// the attempts, oldest first (a store keeps a row for each failed one,
	// a success only in the fire's row: CompleteAttempts adds it).
	Last     Attempt
	Attempts []Attempt
}

// CompleteAttempts adds to each succeeded fire its successful attempt,
// which stores keep in the fire's row only.
func CompleteAttempts(fs []FireRecord) {
	for i := range fs {
		f := &fs[i]
		if f.State == FireSucceeded && (len(f.Attempts) == 0 || f.Attempts[len(f.Attempts)-1].Attempt != f.Attempt) {
			l := f.Last
			l.Attempt = f.Attempt
			f.Attempts = append(f.Attempts, l)
		}
	}
}

// Attempt is one attempt of a fire.
type Attempt struct {
	Attempt    int
	Started    int64
	Finished   int64
	Error      string
	StatusCode int
}

// FireCounts are the fires by state, and the pending ones late (due before
// the time asked about) or due soon (within the window asked about).
type FireCounts struct {
	ByState map[string]int64
	Late    int64
	DueSoon int64
}

// TimerStore persists durable timers and their fires. Implementations are
// safe for concurrent use; on PostgreSQL several instances share it.
type TimerStore interface {
	// InsertTimers stores new timers in one transaction: all or none.
	// A name taken in its namespace is ErrDuplicateTimer, naming it.
	InsertTimers(ctx context.Context, ts []Timer) error
	// InsertTimersTx is InsertTimers in the caller's transaction.
	InsertTimersTx(ctx context.Context, tx any, ts []Timer) error
	GetTimer(ctx context.Context, id string) (Timer, bool, error)
	ListTimers(ctx context.Context, f TimerFilter) ([]Timer, error)
	CountTimers(ctx context.Context, namespace string) (int64, error)
	// UpdateTimer replaces a timer's definition (its Version is bumped,
	// its NextAt set as given) and deletes its fires not yet begun, so
	// they are made again from the new definition. False when none.
	UpdateTimer(ctx context.Context, t Timer) (bool, error)
	// SetEnabled enables or disables a timer (bumping its version). On
	// disable its fires not yet begun are deleted; on enable NextAt is
	// set as given.
	SetEnabled(ctx context.Context, id string, enabled bool, nextAt, now int64) (bool, error)
	// DeleteTimer deletes a timer and every fire and attempt of it.
	DeleteTimer(ctx context.Context, id string) (bool, error)

	// DueTimers lists enabled timers whose NextAt is at or before before.
	DueTimers(ctx context.Context, before int64, limit int) ([]Timer, error)
	// AdvanceTimers applies advances in one transaction.
	AdvanceTimers(ctx context.Context, as []Advance) error
	// ClaimFires claims for owner up to limit fires due at or before
	// before that no live claim holds (pending or retry, or running with
	// an expired lease: at-least-once), each leased until its due time
	// plus lease. The unclaimed fires are taken in FireKey order after
	// after (the zero key: from the first); the key returned is the last
	// of them claimed (after, when none was), from which the next claim
	// of the same poll goes on.
	ClaimFires(ctx context.Context, owner string, after FireKey, before, now, lease int64, limit int) ([]Claimed, FireKey, error)
	// StartFires begins an attempt of each fire owner claimed, if its
	// timer is still enabled: its attempt counted, its lease running to
	// now plus the timer's timeout (defTimeout when it has none) plus
	// grace. The fires not returned
	// must not be delivered (disabled, deleted, updated, claimed by
	// another after the lease ran out).
	StartFires(ctx context.Context, owner string, refs []FireRef, now, defTimeout, grace int64) ([]Started, error)
	// FinishFires records outcomes of owner's attempts and their history.
	FinishFires(ctx context.Context, owner string, os []Outcome) error
	// StepFires is FinishFires of os then StartFires of refs, in one
	// transaction: the fire path's one write per batch.
	StepFires(ctx context.Context, owner string, os []Outcome, refs []FireRef, now, defTimeout, grace int64) ([]Started, error)
	// ReleaseFires gives back owner's claims of fires not begun.
	ReleaseFires(ctx context.Context, owner string) error
	// RetryFire re-queues a dead fire, due at now, with its attempts
	// counted anew. False when it is not dead.
	RetryFire(ctx context.Context, ref FireRef, now int64) (bool, error)
	// Fires returns a timer's fires, newest planned first, with attempts.
	Fires(ctx context.Context, timerID string, limit int) ([]FireRecord, error)
	// CountFires counts the fires of namespace ("" for every one): by
	// state, the pending ones late at now, and those due before soon.
	CountFires(ctx context.Context, namespace string, now, soon int64) (FireCounts, error)
	// PruneFires deletes finished fires: succeeded ones finished before
	// succeededBefore, dead ones before deadBefore.
	PruneFires(ctx context.Context, succeededBefore, deadBefore int64) (int64, error)
}
