package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fom-go/fom/store"
)

var _ store.NamespaceStore = (*Store)(nil)

const nsCols = `name, token_hash, secrets, rate, burst, concurrency, max_timers, created, updated`

const nsSelect = `SELECT name, token_hash, secrets::text, rate, burst, concurrency, max_timers, created, updated FROM `

func scanNamespace(sc pgx.Row) (store.Namespace, error) {
	var n store.Namespace
	var secrets string
	err := sc.Scan(&n.Name, &n.TokenHash, &secrets, &n.Rate, &n.Burst, &n.Concurrency, &n.MaxTimers, &n.Created, &n.Updated)
	n.Secrets = []byte(secrets)
	return n, err
}

// InsertNamespace implements store.NamespaceStore.
func (s *Store) InsertNamespace(ctx context.Context, n store.Namespace) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO `+s.t("namespaces")+` (`+nsCols+`) VALUES ($1, $2, $3::text::jsonb, $4, $5, $6, $7, $8, $9)`,
		n.Name, n.TokenHash, string(n.Secrets), n.Rate, n.Burst, n.Concurrency, n.MaxTimers, n.Created, n.Updated)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return fmt.Errorf("%w: %q", store.ErrDuplicateNamespace, n.Name)
	}
	if err != nil {
		return s.wrap("insert namespace", err)
	}
	return nil
}

// UpdateNamespace implements store.NamespaceStore.
func (s *Store) UpdateNamespace(ctx context.Context, n store.Namespace) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE `+s.t("namespaces")+` SET token_hash = $2, secrets = $3::text::jsonb, rate = $4, burst = $5, concurrency = $6, max_timers = $7, updated = $8 WHERE name = $1`,
		n.Name, n.TokenHash, string(n.Secrets), n.Rate, n.Burst, n.Concurrency, n.MaxTimers, n.Updated)
	if err != nil {
		return false, s.wrap("update namespace", err)
	}
	return tag.RowsAffected() == 1, nil
}

func (s *Store) oneNamespace(ctx context.Context, where string, arg any) (store.Namespace, bool, error) {
	n, err := scanNamespace(s.pool.QueryRow(ctx, nsSelect+s.t("namespaces")+` WHERE `+where+` = $1`, arg))
	if errors.Is(err, pgx.ErrNoRows) {
		return n, false, nil
	}
	if err != nil {
		return n, false, s.wrap("read namespace", err)
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
	rows, err := s.pool.Query(ctx, nsSelect+s.t("namespaces")+` ORDER BY name`)
	if err != nil {
		return nil, s.wrap("list namespaces", err)
	}
	defer rows.Close()
	var out []store.Namespace
	for rows.Next() {
		n, err := scanNamespace(rows)
		if err != nil {
			return nil, s.wrap("list namespaces", err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("list namespaces", err)
	}
	return out, nil
}

// DeleteNamespace implements store.NamespaceStore.
func (s *Store) DeleteNamespace(ctx context.Context, name string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM `+s.t("namespaces")+` WHERE name = $1`, name)
	if err != nil {
		return false, s.wrap("delete namespace", err)
	}
	return tag.RowsAffected() == 1, nil
}
