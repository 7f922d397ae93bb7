package pgcluster

import "github.com/fom-go/fom/cluster"

// The cluster's types, as this package's code names them.
type (
	Options      = cluster.Options
	Counters     = cluster.Counters
	Status       = cluster.Status
	Instance     = cluster.Instance
	Lease        = cluster.Lease
	Disagreement = cluster.Disagreement
	Variant      = cluster.Variant
)

// Defaults of Options.
const (
	DefaultLeaseTTL    = cluster.DefaultLeaseTTL
	DefaultRenewEvery  = cluster.DefaultRenewEvery
	DefaultRecordAhead = cluster.DefaultRecordAhead
)

// Errors, as package cluster defines them.
var (
	ErrStarted = cluster.ErrStarted
	ErrNoOwner = cluster.ErrNoOwner
)

var _ cluster.Coordinator = (*Coordinator)(nil)
