// Package cluster makes the Apps that share one PostgreSQL store one
// scheduler: each fire of a schedule runs on one instance, once.
//
// Each App is an instance: it registers itself and heartbeats. Each
// schedule has one owner at a time, through a lease with a fencing term
// (bumped by every new owner) that lives as long as its owner's row of
// heartbeats says, on the database's clock. Every instance keeps every
// schedule's plan running, but before a planned round the engine asks the
// Coordinator (a schedule.Gate): only the owner, within its local trust
// window, records the fire (schedule, planned time, term) in a batch
// fenced by its row, and only a recorded fire runs. So a fire runs once
// even if two instances both believe they own the schedule, and a fire
// recorded by a dead owner is not run again. A fire record whose answer
// is lost (the connection cut after the commit) is asked again, within the
// renewal interval and while the leases are trusted, and the retry admits
// the fires that same batch recorded: a lost answer alone does not leave a
// fire recorded that nobody runs.
//
// A schedule tells the coordinator its next fire when it arms its wait
// for it (schedule.Announcer), seconds ahead for most plans. The owner
// records the fires due within the same RecordAhead in one statement,
// RecordAhead before they are due, so an aligned burst is recorded by a
// few statements before its instant and each fire is admitted at its time
// without a round trip. A fire not announced, or whose record ahead
// failed, is recorded when due, in batches. A lease given back (to
// rebalance, or at a graceful stop) deletes, in the same transaction, the
// records of its fires recorded ahead and not run, so the next owner
// resumes from the last fire that ran and misses none.
//
// Leases are renewed together, by one row an instance whatever the number
// of schedules, and spread: an instance takes free or expired
// leases up to its share (schedules / live instances) and gives back what
// is beyond its share plus one, so a new instance gets work. An instance
// trusts its leases until the renewal it sent, plus the TTL, minus a
// margin: it stops admitting fires before its lease can expire, so when it
// is paused or cut off from the database another instance can take over
// without two running at once. When an instance takes a lease, the App is
// told the schedule's last recorded fire, so the plan continues from it and
// a fire missed during the failover runs once, at once (or is skipped,
// with misfire "skip").
//
// An instance that does not hold a schedule's lease parks its copy at
// the first fire it refuses (schedule.Holder): it arms no wait until it
// takes the lease, so each fire wakes one instance, not all of them.
//
// The engine sees none of this: schedule keeps no SQL, and an App without
// a cluster store pays nothing.
//
// This package holds the cluster's types; the coordinator on PostgreSQL is
// package pgcluster, which store/postgres builds for an App.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/fom-go/fom/schedule"
)

// Defaults of Options.
const (
	DefaultLeaseTTL = 15 * time.Second
	// DefaultRenewEvery is a third of the TTL: two renewals may fail
	// before the lease is at risk.
	DefaultRenewEvery = 5 * time.Second
	// DefaultRecordAhead: a fire announced to the coordinator is recorded
	// 100 to 200 ms before it is due.
	DefaultRecordAhead = 100 * time.Millisecond
)

// Options configure a Coordinator.
type Options struct {
	// InstanceID names this instance. Default: host-pid-random.
	InstanceID string
	// LeaseTTL is how long a lease lasts without renewal, and how long an
	// instance without a heartbeat counts as alive. Default 15s.
	LeaseTTL time.Duration
	// RenewEvery is the renewal and heartbeat interval. Default LeaseTTL/3.
	RenewEvery time.Duration
	// RecordAhead is how long before its planned time, at least, the owner
	// records a fire the schedule announced when it armed its wait (a
	// schedule.Announcer): the fires due within the same RecordAhead are
	// recorded by one statement, between RecordAhead and twice it early,
	// and admitted at their time without a round trip. A fire recorded
	// ahead and not run (its owner killed within that time) is not run
	// elsewhere; a lease given back deletes the records of its fires not
	// run. Default 100ms, or RenewEvery when that is less; at most
	// RenewEvery.
	RecordAhead time.Duration
	// Version is shown for the instance. Default "".
	Version string
	// Logger logs lease changes. Default: no-op.
	Logger *zap.Logger
	// Acquired is called (from the coordinator's goroutine) for each
	// schedule whose lease this instance took, with the schedule's last
	// recorded fire, or when none was recorded the moment the previous
	// owner's lease ended (zero for a lease never owned before). It must
	// resume or unpark the schedule (see schedule.Holder): a schedule not
	// held here parks at its first refused fire.
	Acquired func(schedule string, lastFire time.Time)
	// Busy reports whether a schedule is in a round here; a busy
	// schedule's lease is not given back to rebalance. Default: never.
	Busy func(schedule string) bool
	// Wants returns those of schedules this instance would run now (their
	// desired state is running and their copy here has not stopped by
	// itself), in their order, in a slice of its own: a lease is taken
	// only for such a schedule, and given back when it no longer is, so
	// that no instance holds a schedule it does not run. It is asked of
	// every schedule at every renewal, at once rather than one by one.
	// Called without the coordinator's lock. Default: every schedule
	// added.
	Wants func(schedules []string) []string
	// Channel, when set, is LISTENed to; Notified gets each payload (from
	// the coordinator's listening goroutine).
	Channel  string
	Notified func(payload string)
	// Resync re-reads what others may have changed: the fallback for a
	// lost notification. It is called after a tick when one may have been
	// lost (the first tick after the listening connection is established
	// or re-established, every tick while there is none), after a tick
	// that found the live instances changed (one started, stopped or
	// died), and at least once a minute.
	Resync func(ctx context.Context)
	// DesiredChanged is told that a schedule's desired state changed.
	DesiredChanged func(schedule string)
	// Execute carries out an action forwarded to this instance as the
	// schedule's owner; its error is the answer.
	Execute func(schedule, action, by string) error
}

// ErrStarted is returned by Start on a running coordinator.
var ErrStarted = errors.New("fom: cluster: coordinator already started")

// Counters are what a coordinator has sent to the database.
type Counters struct {
	TickStatements int64 // heartbeats, lease renewals and rebalancing: per tick, whatever the number of schedules
	Fires          int64 // fires recorded when due, in batches (those not announced ahead, or whose record ahead failed)
	FireStatements int64 // fire-record statements sent, ahead or when due
}

// Status is this instance's standing in the cluster.
type Status struct {
	Trusted     bool      `json:"trusted"`     // its leases are in their trust window: it runs its schedules
	LastRenewal time.Time `json:"lastRenewal"` // the last successful heartbeat and renewal
	Error       string    `json:"error,omitempty"`
}

// ErrNoOwner is returned when no instance answered a forwarded request in time.
var ErrNoOwner = errors.New("fom: cluster: no instance that owns the schedule answered")

// Instance is one instance of the cluster as the database knows it.
type Instance struct {
	ID        string    `json:"id"`
	Host      string    `json:"host"`
	Version   string    `json:"version"`
	Started   time.Time `json:"started"`
	Heartbeat time.Time `json:"heartbeat"`
	Live      bool      `json:"live"` // heartbeat within the lease TTL, not stopped
	// Answering: heartbeat within two renewal intervals. A live instance
	// that is not answering has missed renewals: it may have died, and
	// its leases are taken over once they expire.
	Answering bool     `json:"answering"`
	Stopped   bool     `json:"stopped"`
	Owned     int      `json:"owned"`     // unexpired leases
	Schedules []string `json:"schedules"` // what it can run
}

// Lease is a schedule's lease as the database knows it, with its owner's
// standing and the schedule's last recorded fire.
type Lease struct {
	Owner     string    `json:"owner,omitempty"` // "" when no instance holds it
	Expires   time.Time `json:"expires,omitzero"`
	Heartbeat time.Time `json:"ownerHeartbeat,omitzero"` // the owner's last heartbeat
	Answering bool      `json:"ownerAnswering"`          // the owner heartbeat within two renewal intervals
	// TakeoverBy is when another instance takes the schedule over at the
	// latest, should the owner not answer again: the lease's expiry and
	// one renewal interval.
	TakeoverBy time.Time `json:"takeoverBy,omitzero"`
	LastFire   time.Time `json:"lastFire,omitzero"` // the last fire recorded, by any instance
}

// Disagreement is a schedule that live instances declare differently.
type Disagreement struct {
	Schedule string    `json:"schedule"`
	Keys     []string  `json:"keys"`     // the keys whose code defaults differ
	Variants []Variant `json:"variants"` // one per declaration, the newest (its latest-started instance) first
}

// Variant is one declaration of a schedule and the instances on it.
type Variant struct {
	Instances []string          `json:"instances"`
	Values    map[string]string `json:"values"` // the differing keys' values
	Newest    bool              `json:"newest"` // an instance on it started last
}

// String says it in a sentence, as logs and pages show it.
func (d Disagreement) String() string {
	var parts []string
	for _, v := range d.Variants {
		var kv []string
		for _, k := range d.Keys {
			kv = append(kv, fmt.Sprintf("%s %q", k, v.Values[k]))
		}
		which := "an older declaration"
		if v.Newest {
			which = "the newest declaration"
		}
		n := "instances"
		if len(v.Instances) == 1 {
			n = "instance"
		}
		parts = append(parts, fmt.Sprintf("%d %s on %s (%s: %s)", len(v.Instances), n, which, strings.Join(v.Instances, ", "), strings.Join(kv, ", ")))
	}
	return fmt.Sprintf("schedule %s is declared differently: %s", d.Schedule, strings.Join(parts, "; "))
}

// Coordinator is one instance's part in the cluster (package pgcluster
// on PostgreSQL). It is a schedule.Gate (Admit) and the conflict
// registry's claims across instances (Claim, Unclaim).
type Coordinator interface {
	ID() string
	Add(ctx context.Context, names ...string) error
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
	// Drain begins a graceful stop, before the schedules stop: the leases
	// of those not in a round are handed to the others at once.
	Drain(ctx context.Context)
	// Abandon stops without giving the leases back (tests: a crash).
	Abandon()
	Listening() bool
	// Ready says the instance runs its schedules now: the others are
	// told (once it listens) to hand it its share of the leases at once.
	Ready()
	Kick()
	Counters() Counters
	Status() Status
	Admit(ctx context.Context, schedule string, planned time.Time) (bool, error)
	Announce(schedule string, planned time.Time)
	// GateOf is schedule's own gate: Admit, Announce, Holds and Withdraw
	// for it alone, which reach its state without a lookup by name.
	GateOf(schedule string) schedule.Gate
	Holds(schedule string) bool
	Owner(schedule string) bool
	Owned() int
	SetDesired(ctx context.Context, schedule string, running bool) error
	Desired(ctx context.Context, schedules []string) (map[string]bool, error)
	Forward(ctx context.Context, schedule, action, by string) error
	Instances(ctx context.Context) ([]Instance, error)
	Owners(ctx context.Context, schedules []string) (map[string]string, error)
	Leases(ctx context.Context, schedules []string) (map[string]Lease, error)
	AllSchedules(ctx context.Context) ([]string, error)
	Claim(id string) bool
	Unclaim(id string)
	Declare(ctx context.Context, decls map[string]map[string]string, replace bool) error
	Disagreements(ctx context.Context) ([]Disagreement, error)
}

// Notification prefixes of a store's edits, which every instance applies:
// a schedule's config edits, and its settings (log level, statistics).
const (
	NotifyConfig   = "config:"
	NotifySettings = "settings:"
)
