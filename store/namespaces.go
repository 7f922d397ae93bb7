package store

import (
	"context"
	"errors"
)

// ErrDuplicateNamespace is returned when a namespace of that name exists.
var ErrDuplicateNamespace = errors.New("fom: a namespace of that name already exists")

// Namespace is a tenant of the timer service (fomd): its credentials and
// its limits. The token is kept only as a hash; the signing secrets are
// kept as they are (the service signs with them).
type Namespace struct {
	Name      string
	TokenHash string // hex SHA-256 of the bearer token
	// Secrets are the signing secrets in force, as the service encodes
	// them (JSON): two during a rotation.
	Secrets     []byte
	Rate        float64
	Burst       int
	Concurrency int
	MaxTimers   int64
	Created     int64 // Unix ms
	Updated     int64
}

// NamespaceStore keeps the timer service's namespaces; on PostgreSQL every
// instance reads the same ones.
type NamespaceStore interface {
	// InsertNamespace stores a new namespace: ErrDuplicateNamespace when
	// its name or its token hash is taken.
	InsertNamespace(ctx context.Context, n Namespace) error
	// UpdateNamespace replaces a namespace's fields but its name and
	// Created. False when there is none of that name.
	UpdateNamespace(ctx context.Context, n Namespace) (bool, error)
	GetNamespace(ctx context.Context, name string) (Namespace, bool, error)
	// NamespaceByToken finds the namespace whose token has that hash.
	NamespaceByToken(ctx context.Context, tokenHash string) (Namespace, bool, error)
	// ListNamespaces lists every namespace by name.
	ListNamespaces(ctx context.Context) ([]Namespace, error)
	DeleteNamespace(ctx context.Context, name string) (bool, error)
}
