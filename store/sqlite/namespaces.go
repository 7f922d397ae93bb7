package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/fom-go/fom/store"
)

var _ store.NamespaceStore = (*Store)(nil)

const nsCols = `name, token_hash, secrets, rate, burst, concurrency, max_timers, created, updated`

func scanNamespace(sc interface{ Scan(...any) error }) (store.Namespace, error) {
	var n store.Namespace
	var secrets string
	err := sc.Scan(&n.Name, &n.TokenHash, &secrets, &n.Rate, &n.Burst, &n.Concurrency, &n.MaxTimers, &n.Created, &n.Updated)
	n.Secrets = []byte(secrets)
	return n, err
}

// InsertNamespace implements store.NamespaceStore.
func (s *Store) InsertNamespace(ctx context.Context, n store.Namespace) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO namespaces (`+nsCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			n.Name, n.TokenHash, string(n.Secrets), n.Rate, n.Burst, n.Concurrency, n.MaxTimers, n.Created, n.Updated)
		if err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed") {
			return fmt.Errorf("%w: %q", store.ErrDuplicateNamespace, n.Name)
		}
		return err
	})
	return err
}

// UpdateNamespace implements store.NamespaceStore.
func (s *Store) UpdateNamespace(ctx context.Context, n store.Namespace) (bool, error) {
	return s.execOne(ctx, `UPDATE namespaces SET token_hash = ?, secrets = ?, rate = ?, burst = ?, concurrency = ?, max_timers = ?, updated = ? WHERE name = ?`,
		n.TokenHash, string(n.Secrets), n.Rate, n.Burst, n.Concurrency, n.MaxTimers, n.Updated, n.Name)
}

// execOne runs a statement that changes one row in a transaction, and
// says whether it did.
func (s *Store) execOne(ctx context.Context, query string, args ...any) (bool, error) {
	var found bool
	err := s.tx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		k, err := r.RowsAffected()
		found = k == 1
		return err
	})
	return found, err
}

func (s *Store) oneNamespace(ctx context.Context, where string, arg any) (store.Namespace, bool, error) {
	n, err := scanNamespace(s.db.QueryRowContext(ctx, `SELECT `+nsCols+` FROM namespaces WHERE `+where+` = ?`, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return n, false, nil
	}
	if err != nil {
		return n, false, fmt.Errorf("fom: store %q: read namespace: %w", s.path, err)
	}
	return n, true, nil
}

// GetNamespace implements store.NamespaceStore.
func (s *Store) GetNamespace(ctx context.Context, name string) (store.Namespace, bool, error) {
	return s.oneNamespace(ctx, "name", name)
}

// NamespaceByToken implements store.NamespaceStore.
func (s *Store) NamespaceByToken(ctx context.Context, tokenHash string) (store.Namespace, bool, error) {
	return s.oneNamespace(ctx, "token_hash", tokenHash)
}

// ListNamespaces implements store.NamespaceStore.
func (s *Store) ListNamespaces(ctx context.Context) ([]store.Namespace, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+nsCols+` FROM namespaces ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("fom: store %q: list namespaces: %w", s.path, err)
	}
	defer rows.Close()
	var out []store.Namespace
	for rows.Next() {
		n, err := scanNamespace(rows)
		if err != nil {
			return nil, fmt.Errorf("fom: store %q: list namespaces: %w", s.path, err)
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// DeleteNamespace implements store.NamespaceStore.
func (s *Store) DeleteNamespace(ctx context.Context, name string) (bool, error) {
	return s.execOne(ctx, `DELETE FROM namespaces WHERE name = ?`, name)
}
