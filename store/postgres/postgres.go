// Package postgres is fom's PostgreSQL store: the same store.Store as the
// embedded SQLite one, for apps whose instances share one database.
//
// Its tables live in one schema (default "fom"; WithSchema), created and
// migrated at open. Migrations are embedded, numbered, and each runs in a
// transaction under an advisory lock keyed by the schema, so instances
// starting at once migrate once; the version is kept in the schema's
// schema_version table. A database migrated by a newer fom is refused
// (store.ErrNewerSchema), never altered.
//
// Statistics go through a log (statslog.go): a flush of an App's days and
// history pages is one row of stats_log, and a day or page reaches its
// table only once no newer flush of its instance holds its key; every
// read overlays every instance's log on the tables.
package postgres

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fom-go/fom/cluster"
	"github.com/fom-go/fom/internal/pgbulk"
	"github.com/fom-go/fom/store"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// DefaultSchema is the schema fom's tables live in unless WithSchema says otherwise.
const DefaultSchema = "fom"

// Errors of the options.
var (
	ErrEmptySchema = errors.New("fom: postgres store: empty schema name")
	ErrNilPool     = errors.New("fom: postgres store: pool is nil")
)

// Option configures a Store.
type Option func(*options) error

type options struct {
	schema         string
	connectTimeout time.Duration
}

// WithSchema puts fom's tables in schema (created if missing). Default "fom".
func WithSchema(schema string) Option {
	return func(o *options) error {
		if schema == "" {
			return ErrEmptySchema
		}
		o.schema = schema
		return nil
	}
}

// WithConnectTimeout bounds how long Open waits for the database at
// start. Default 10s: an unreachable database is a clear error, not a hang.
func WithConnectTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("fom: postgres store: connect timeout %s: must be positive", d)
		}
		o.connectTimeout = d
		return nil
	}
}

// Store is a PostgreSQL-backed store.Store.
type Store struct {
	instance atomic.Pointer[string] // the App instance this store writes statistics for
	pool     *pgxpool.Pool
	own      bool   // the pool was opened by Open and is closed by Close
	schema   string // quoted identifier
	name     string // as given
	version  int

	timerMu        sync.Mutex // guards the four below
	timerInserted  int        // timers inserted since the last ANALYZE
	timerAtAnalyze int        // and before it
	timerAnalyzed  time.Time
	closed         bool // Close was called: no ANALYZE starts

	analyzing atomic.Bool        // an ANALYZE runs (at most one at a time)
	bg        sync.WaitGroup     // the running ANALYZE, waited for by Close
	bgCtx     context.Context    // cancelled by Close
	bgCancel  context.CancelFunc // cancels bgCtx

	logMu   sync.Mutex    // held across a flush: guards log and sendBuf
	log     statsLog      // this store's instance's statistics log (statslog.go)
	sendBuf pgbulk.Buffer // a flush's log row, encoded (pgbulk.Send)
}

var _ store.Store = (*Store)(nil)

// Open connects to dsn (a postgres:// URL or key=value string), creates
// and migrates the schema, and returns the store. Close closes the pool.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	o, err := apply(opts)
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("fom: postgres store: bad database URL: %w", err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 || cfg.ConnConfig.ConnectTimeout > o.connectTimeout {
		cfg.ConnConfig.ConnectTimeout = o.connectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("fom: postgres store: %w", err)
	}
	s, err := open(ctx, pool, o, hostOf(cfg))
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.own = true
	return s, nil
}

// New uses an existing pool; Close leaves the pool open.
func New(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, ErrNilPool
	}
	o, err := apply(opts)
	if err != nil {
		return nil, err
	}
	return open(ctx, pool, o, hostOf(pool.Config()))
}

func apply(opts []Option) (options, error) {
	o := options{schema: DefaultSchema, connectTimeout: 10 * time.Second}
	for _, opt := range opts {
		if opt == nil {
			return o, errors.New("fom: postgres store: nil option")
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

func hostOf(cfg *pgxpool.Config) string {
	return net.JoinHostPort(cfg.ConnConfig.Host, fmt.Sprint(cfg.ConnConfig.Port)) + "/" + cfg.ConnConfig.Database
}

func open(ctx context.Context, pool *pgxpool.Pool, o options, host string) (*Store, error) {
	s := &Store{pool: pool, schema: pgx.Identifier{o.schema}.Sanitize(), name: o.schema}
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	pctx, cancel := context.WithTimeout(ctx, o.connectTimeout)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		return nil, fmt.Errorf("fom: postgres store: cannot reach the database at %s: %w", host, err)
	}
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// BindInstance ties the store to the App instance that uses it: its
// statistics are kept apart from other instances'. An App binds its store
// when it is built; one store serves one App.
func (s *Store) BindInstance(id string) error {
	if s.instance.CompareAndSwap(nil, &id) {
		return nil
	}
	if cur := *s.instance.Load(); cur != id {
		return fmt.Errorf("fom: postgres store (schema %s) already serves instance %q: open one store per App", s.name, cur)
	}
	return nil
}

func (s *Store) instanceID() string {
	if p := s.instance.Load(); p != nil {
		return *p
	}
	return ""
}

// Schema returns the schema the tables live in.
func (s *Store) Schema() string { return s.name }

// Pool returns the connection pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// SchemaVersion is the schema version this build writes.
func SchemaVersion() int {
	ms, _ := migrations()
	return len(ms)
}

// migrations returns the embedded migrations in order.
func migrations() ([]string, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]string, len(names))
	for i, n := range names {
		b, err := migrationFS.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out[i] = string(b)
	}
	return out, nil
}

// lockKey is the advisory lock that serialises migrations of one schema.
func (s *Store) lockKey() int64 {
	h := fnv.New64a()
	h.Write([]byte("fom migrate " + s.name))
	return int64(h.Sum64())
}

// migrate creates the schema and applies the missing migrations, each in
// its own transaction holding the schema's advisory lock.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("fom: postgres store: read migrations: %w", err)
	}
	for {
		done, err := s.migrateOne(ctx, ms)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

func (s *Store) migrateOne(ctx context.Context, ms []string) (done bool, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, s.wrap("begin migration", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", s.lockKey()); err != nil {
		return false, s.wrap("lock for migration", err)
	}
	stmts := []string{
		"CREATE SCHEMA IF NOT EXISTS " + s.schema,
		"CREATE TABLE IF NOT EXISTS " + s.schema + ".schema_version (version INT NOT NULL)",
	}
	for _, q := range stmts {
		if _, err := tx.Exec(ctx, q); err != nil {
			return false, s.wrap("create schema", err)
		}
	}
	var v int
	err = tx.QueryRow(ctx, "SELECT version FROM "+s.schema+".schema_version").Scan(&v)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if _, err := tx.Exec(ctx, "INSERT INTO "+s.schema+".schema_version (version) VALUES (0)"); err != nil {
			return false, s.wrap("init schema version", err)
		}
	case err != nil:
		return false, s.wrap("read schema version", err)
	}
	if v > len(ms) {
		return false, fmt.Errorf("%w: schema %s has version %d, this build knows up to %d; it was left untouched", store.ErrNewerSchema, s.name, v, len(ms))
	}
	s.version = v
	if v == len(ms) {
		if err := s.checkFormat(ctx, tx); err != nil {
			return false, err
		}
		return true, tx.Commit(ctx)
	}
	if _, err := tx.Exec(ctx, strings.ReplaceAll(ms[v], "{{schema}}", s.schema)); err != nil {
		return false, s.wrap(fmt.Sprintf("migrate to version %d", v+1), err)
	}
	if _, err := tx.Exec(ctx, "UPDATE "+s.schema+".schema_version SET version = $1", v+1); err != nil {
		return false, s.wrap("set schema version", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, s.wrap(fmt.Sprintf("migrate to version %d", v+1), err)
	}
	s.version = v + 1
	return false, nil
}

// checkFormat refuses a schema written in a data format newer than this
// build's, and records this build's when it is newer.
func (s *Store) checkFormat(ctx context.Context, tx pgx.Tx) error {
	var v string
	if err := tx.QueryRow(ctx, "SELECT value FROM "+s.schema+".meta WHERE key = 'data_format'").Scan(&v); err != nil {
		return s.wrap("read data format", err)
	}
	n, err := strconv.Atoi(v)
	switch {
	case err != nil:
		return fmt.Errorf("%w: schema %s records data format %q; it was left untouched", store.ErrCorrupt, s.name, v)
	case n > store.DataFormat:
		return fmt.Errorf("%w: schema %s holds rows in data format %d, this build reads up to %d; it was left untouched", store.ErrNewerSchema, s.name, n, store.DataFormat)
	case n < store.DataFormat:
		if _, err := tx.Exec(ctx, "UPDATE "+s.schema+".meta SET value = $1 WHERE key = 'data_format'", strconv.Itoa(store.DataFormat)); err != nil {
			return s.wrap("record data format", err)
		}
	}
	return nil
}

func (s *Store) wrap(action string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return fmt.Errorf("fom: postgres store (schema %s): %s: %s (SQLSTATE %s): %w", s.name, action, pe.Message, pe.Code, err)
	}
	return fmt.Errorf("fom: postgres store (schema %s): %s: %w", s.name, action, err)
}

// Close closes the pool if Open made it.
func (s *Store) Close() error {
	s.timerMu.Lock()
	s.closed = true
	s.timerMu.Unlock()
	s.bgCancel()
	s.bg.Wait()
	if s.own {
		s.pool.Close()
	}
	return nil
}

func (s *Store) t(name string) string { return s.schema + "." + name }

// LoadConfig implements store.Store.
func (s *Store) LoadConfig(ctx context.Context, schedule string) (map[string]string, error) {
	rows, err := s.pool.Query(ctx, "SELECT key, value FROM "+s.t("config_edits")+" WHERE schedule = $1", schedule)
	if err != nil {
		return nil, s.wrap(fmt.Sprintf("load config of schedule %q", schedule), err)
	}
	out := map[string]string{}
	var k, v string
	_, err = pgx.ForEachRow(rows, []any{&k, &v}, func() error { out[k] = v; return nil })
	if err != nil {
		return nil, s.wrap(fmt.Sprintf("load config of schedule %q", schedule), err)
	}
	return out, nil
}

// SaveConfig implements store.Store: the whole set replaced in one transaction.
func (s *Store) SaveConfig(ctx context.Context, schedule string, edits map[string]string) error {
	keys := make([]string, 0, len(edits))
	values := make([]string, 0, len(edits))
	for k, v := range edits {
		keys, values = append(keys, k), append(values, v)
	}
	return s.tx(ctx, fmt.Sprintf("save config of schedule %q", schedule), func(tx pgx.Tx) error {
		// Saves of one schedule's set take turns: under READ COMMITTED two
		// delete-then-insert transactions would both insert.
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", "fom config "+s.name+" "+schedule); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM "+s.t("config_edits")+" WHERE schedule = $1", schedule); err != nil {
			return err
		}
		if len(keys) > 0 {
			if _, err := tx.Exec(ctx, "INSERT INTO "+s.t("config_edits")+" (schedule, key, value) SELECT $1, k, v FROM unnest($2::text[], $3::text[]) AS e(k, v)", schedule, keys, values); err != nil {
				return err
			}
		}
		return s.notify(ctx, tx, NotifyConfig+schedule)
	})
}

// Notifications sent on Channel when a write commits: the payload is one
// of these prefixes followed by the schedule's name.
const (
	NotifyConfig   = cluster.NotifyConfig
	NotifySettings = cluster.NotifySettings
)

// Channel is the LISTEN channel of this store's schema: every App sharing
// it hears of edits saved by the others.
func (s *Store) Channel() string { return "fom_changes_" + s.name }

func (s *Store) notify(ctx context.Context, tx pgx.Tx, payload string) error {
	_, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", s.Channel(), payload)
	return err
}

// LoadConfigs returns the operator edits of many schedules in one query
// (a schedule without edits has none in the map).
func (s *Store) LoadConfigs(ctx context.Context, schedules []string) (map[string]map[string]string, error) {
	rows, err := s.pool.Query(ctx, "SELECT schedule, key, value FROM "+s.t("config_edits")+" WHERE schedule = ANY($1)", schedules)
	if err != nil {
		return nil, s.wrap("load configs", err)
	}
	out := map[string]map[string]string{}
	var sch, k, v string
	_, err = pgx.ForEachRow(rows, []any{&sch, &k, &v}, func() error {
		if out[sch] == nil {
			out[sch] = map[string]string{}
		}
		out[sch][k] = v
		return nil
	})
	if err != nil {
		return nil, s.wrap("load configs", err)
	}
	return out, nil
}

// LoadSettings returns one setting of many schedules in one query.
func (s *Store) LoadSettings(ctx context.Context, key string, schedules []string) (map[string]string, error) {
	rows, err := s.pool.Query(ctx, "SELECT schedule, value FROM "+s.t("settings")+" WHERE key = $1 AND schedule = ANY($2)", key, schedules)
	if err != nil {
		return nil, s.wrap("load settings", err)
	}
	out := map[string]string{}
	var sch, v string
	_, err = pgx.ForEachRow(rows, []any{&sch, &v}, func() error { out[sch] = v; return nil })
	if err != nil {
		return nil, s.wrap("load settings", err)
	}
	return out, nil
}

// GetSetting implements store.Store.
func (s *Store) GetSetting(ctx context.Context, schedule, key string) (string, bool, error) {
	var v string
	err := s.pool.QueryRow(ctx, "SELECT value FROM "+s.t("settings")+" WHERE schedule = $1 AND key = $2", schedule, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, s.wrap(fmt.Sprintf("load setting %q of schedule %q", key, schedule), err)
	}
	return v, true, nil
}

// PutSetting implements store.Store.
func (s *Store) PutSetting(ctx context.Context, schedule, key, value string) error {
	return s.tx(ctx, fmt.Sprintf("save setting %q of schedule %q", key, schedule), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO "+s.t("settings")+" (schedule, key, value) VALUES ($1, $2, $3) ON CONFLICT (schedule, key) DO UPDATE SET value = excluded.value", schedule, key, value); err != nil {
			return err
		}
		return s.notify(ctx, tx, NotifySettings+schedule)
	})
}

func dayKey(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// LoadDays implements store.Store: the days this store's instance recorded.
func (s *Store) LoadDays(ctx context.Context, schedule string, from time.Time) ([]store.Day, error) {
	return s.loadDays(ctx, schedule, from, false)
}

// LoadClusterDays returns the days every instance recorded, each with its
// instance, oldest first.
func (s *Store) LoadClusterDays(ctx context.Context, schedule string, from time.Time) ([]store.Day, error) {
	return s.loadDays(ctx, schedule, from, true)
}

// LoadFailures implements store.Store.
func (s *Store) LoadFailures(ctx context.Context, schedule string, limit int) ([]store.Failure, error) {
	rows, err := s.pool.Query(ctx, "SELECT at, task_id, status, error, stack, cost_ns, round FROM "+s.t("failures")+" WHERE schedule = $1 ORDER BY at DESC, id DESC LIMIT $2", schedule, limit)
	if err != nil {
		return nil, s.wrap(fmt.Sprintf("load failures of schedule %q", schedule), err)
	}
	var out []store.Failure
	var f store.Failure
	var at, cost int64
	_, err = pgx.ForEachRow(rows, []any{&at, &f.TaskID, &f.Status, &f.Error, &f.Stack, &cost, &f.Round}, func() error {
		f.Schedule, f.At, f.Cost = schedule, time.Unix(0, at).UTC(), time.Duration(cost)
		out = append(out, f)
		return nil
	})
	if err != nil {
		return nil, s.wrap(fmt.Sprintf("load failures of schedule %q", schedule), err)
	}
	return out, nil
}

// AppendAudit implements store.Store.
func (s *Store) AppendAudit(ctx context.Context, e store.AuditEntry) error {
	_, err := s.pool.Exec(ctx, "INSERT INTO "+s.t("audit")+" (schedule, at, action, principal, detail, outcome, instance) VALUES ($1, $2, $3, $4, $5, $6, $7)",
		e.Schedule, e.At, e.Action, e.Principal, e.Detail, e.Outcome, s.instanceID())
	if err != nil {
		return s.wrap(fmt.Sprintf("record an action on schedule %q", e.Schedule), err)
	}
	return nil
}

// LoadAudit implements store.Store.
func (s *Store) LoadAudit(ctx context.Context, schedule string, limit int) ([]store.AuditEntry, error) {
	rows, err := s.pool.Query(ctx, "SELECT at, action, principal, detail, outcome FROM "+s.t("audit")+" WHERE schedule = $1 ORDER BY id DESC LIMIT $2", schedule, limit)
	if err != nil {
		return nil, s.wrap(fmt.Sprintf("load audit of schedule %q", schedule), err)
	}
	var out []store.AuditEntry
	e := store.AuditEntry{Schedule: schedule}
	_, err = pgx.ForEachRow(rows, []any{&e.At, &e.Action, &e.Principal, &e.Detail, &e.Outcome}, func() error {
		e.At = e.At.UTC()
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, s.wrap(fmt.Sprintf("load audit of schedule %q", schedule), err)
	}
	return out, nil
}

// Prune implements store.Store: schedules with the same rule share
// statements; failures beyond the count go newest kept.
func (s *Store) Prune(ctx context.Context, rules []store.Retention) error {
	if len(rules) == 0 {
		return nil
	}
	return s.tx(ctx, "apply statistics retention", func(tx pgx.Tx) error { return s.prune(ctx, tx, rules) })
}

// PruneShared applies rules as Prune does, unless an instance with the
// same schedules applied them less than every ago; it reports whether it
// did. Instances sharing the store need not each delete the same old rows
// at every start and every hour: the first to ask after every does it for
// the others. The claim, a row of meta keyed by the schedules' names, is
// taken in the transaction that prunes, so a prune that fails leaves it
// to the next instance asking. An instance whose set of schedules differs
// (a rolling deploy adding one) claims its own.
func (s *Store) PruneShared(ctx context.Context, rules []store.Retention, every time.Duration) (pruned bool, err error) {
	if len(rules) == 0 {
		return false, nil
	}
	names := make([]string, len(rules))
	for i, r := range rules {
		names[i] = r.Schedule
	}
	slices.Sort(names)
	h := sha256.New()
	for _, n := range names {
		h.Write([]byte(n))
		h.Write([]byte{0})
	}
	key := "retention pruned " + hex.EncodeToString(h.Sum(nil)[:12])
	err = s.tx(ctx, "apply statistics retention", func(tx pgx.Tx) error {
		// Waits for a claim being taken (its transaction pruning), then
		// sees it.
		err := tx.QueryRow(ctx, "INSERT INTO "+s.t("meta")+` (key, value) VALUES ($1, extract(epoch FROM now())::text)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value
			WHERE `+s.t("meta")+`.value::float8 <= extract(epoch FROM now() - $2::interval)
			RETURNING true`, key, every).Scan(&pruned)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		// The claims of sets of schedules no instance has had for a day
		// (earlier deploys) go.
		if _, err := tx.Exec(ctx, "DELETE FROM "+s.t("meta")+` WHERE key LIKE 'retention pruned %' AND key <> $1
			AND value::float8 < extract(epoch FROM now() - interval '1 day')`, key); err != nil {
			return err
		}
		return s.prune(ctx, tx, rules)
	})
	return pruned && err == nil, err
}

// prune applies rules in tx.
func (s *Store) prune(ctx context.Context, tx pgx.Tx, rules []store.Retention) error {
	groups := store.GroupRetention(rules)
	if err := s.foldForRetention(ctx, tx, groups); err != nil {
		return err
	}
	for _, g := range groups {
		names := g.Schedules
		if !g.Before.IsZero() {
			if _, err := tx.Exec(ctx, "DELETE FROM "+s.t("stats_days")+" WHERE day < $1::date AND schedule = ANY($2)", dayKey(g.Before), names); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "DELETE FROM "+s.t("failures")+" WHERE at < $1 AND schedule = ANY($2)", g.Before.UnixNano(), names); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "DELETE FROM "+s.t("audit")+" WHERE at < $1 AND schedule = ANY($2)", g.Before, names); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "DELETE FROM "+s.t("rounds")+" WHERE start < $1 AND schedule = ANY($2)", g.Before.UnixNano(), names); err != nil {
				return err
			}
			q := "DELETE FROM " + s.t("audit") + ` WHERE id IN (SELECT id FROM (
					SELECT id, row_number() OVER (PARTITION BY schedule ORDER BY id DESC) AS n
					FROM ` + s.t("audit") + ` WHERE schedule = ANY($1)) AS r WHERE n > $2)`
			if _, err := tx.Exec(ctx, q, names, store.MaxAudit); err != nil {
				return err
			}
		}
		if g.KeepRounds > 0 { // slots past the history's size: it shrank
			if _, err := tx.Exec(ctx, "DELETE FROM "+s.t("rounds")+" WHERE slot >= $1 AND schedule = ANY($2)", g.KeepRounds, names); err != nil {
				return err
			}
		}
		q := "DELETE FROM " + s.t("failures") + ` WHERE id IN (SELECT id FROM (
				SELECT id, row_number() OVER (PARTITION BY schedule ORDER BY id DESC) AS n
				FROM ` + s.t("failures") + ` WHERE schedule = ANY($1)) AS r WHERE n > $2)`
		if _, err := tx.Exec(ctx, q, names, g.KeepFailures); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) tx(ctx context.Context, action string, fn func(pgx.Tx) error) error {
	err := pgx.BeginFunc(ctx, s.pool, fn)
	if err != nil {
		return s.wrap(action, err)
	}
	return nil
}
