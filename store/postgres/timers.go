package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fom-go/fom/internal/pgbulk"
	"github.com/fom-go/fom/store"
)

// Durable timers on PostgreSQL, shared by the instances. A batch is one
// statement over arrays (unnest), whatever its size: the fires due at one
// instant begin, and end, in a statement each. Claims take fires with
// FOR UPDATE SKIP LOCKED, so instances claiming at once take different
// ones; a claim or a running attempt whose lease ran out is taken over by
// any instance (at least once).

var _ store.TimerStore = (*Store)(nil)

const timerCols = `id, namespace, name, kind, at, cron, payload, enabled, version, max_attempts, min_backoff, max_backoff, timeout, misfire, next_at, created, updated`

func scanTimer(row pgx.Row) (store.Timer, error) {
	var t store.Timer
	err := row.Scan(&t.ID, &t.Namespace, &t.Name, &t.Kind, &t.At, &t.Cron, &t.Payload, &t.Enabled, &t.Version,
		&t.MaxAttempts, &t.MinBackoff, &t.MaxBackoff, &t.Timeout, &t.Misfire, &t.NextAt, &t.Created, &t.Updated)
	return t, err
}

// liveCol reads whether a timer has a fire not over.
func (s *Store) liveCol() string {
	return `, EXISTS (SELECT 1 FROM ` + s.t("timer_fires") + ` f WHERE f.timer_id = timers.id AND f.state IN ('pending', 'retry', 'running'))`
}

func scanTimerLive(row pgx.Row) (store.Timer, error) {
	var t store.Timer
	err := row.Scan(&t.ID, &t.Namespace, &t.Name, &t.Kind, &t.At, &t.Cron, &t.Payload, &t.Enabled, &t.Version,
		&t.MaxAttempts, &t.MinBackoff, &t.MaxBackoff, &t.Timeout, &t.Misfire, &t.NextAt, &t.Created, &t.Updated, &t.Live)
	return t, err
}

// querier is a pool or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// InsertTimers implements store.TimerStore.
func (s *Store) InsertTimers(ctx context.Context, ts []store.Timer) error {
	if err := s.insertTimers(ctx, s.pool, ts); err != nil {
		return err
	}
	s.analyzeAfter(len(ts))
	return nil
}

// analyzeAfter refreshes the planner's statistics of the timer tables
// once the timers inserted since it last did are a thousand and half as
// many as before (at most once a second). A table that grew faster than
// autovacuum looks (a minute) is planned as the small table it was: a
// batch's lookups by key then scan it whole, hundreds of milliseconds a
// batch at ten thousand fires, past the statement's deadline at a hundred
// thousand. The ANALYZE runs on a goroutine of the store's (one at a
// time, waited for by Close): at a hundred thousand rows it takes about
// 150 ms, which the caller's insert does not wait for.
func (s *Store) analyzeAfter(inserted int) {
	now := time.Now()
	s.timerMu.Lock()
	defer s.timerMu.Unlock()
	s.timerInserted += inserted
	due := s.timerInserted >= 1000 && 2*s.timerInserted >= s.timerAtAnalyze && now.Sub(s.timerAnalyzed) >= time.Second
	if !due || s.closed || !s.analyzing.CompareAndSwap(false, true) {
		return
	}
	s.timerAtAnalyze += s.timerInserted
	s.timerInserted, s.timerAnalyzed = 0, now
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		defer s.analyzing.Store(false)
		ctx, cancel := context.WithTimeout(s.bgCtx, time.Minute)
		defer cancel()
		// Only a plan's quality rides on it: a failure is left to
		// autovacuum's own ANALYZE.
		s.pool.Exec(ctx, "ANALYZE "+s.t("timers")+", "+s.t("timer_fires"))
	}()
}

// InsertTimersTx implements store.TimerStore: tx is the caller's pgx.Tx,
// so the timers exist only if it commits.
func (s *Store) InsertTimersTx(ctx context.Context, tx any, ts []store.Timer) error {
	q, ok := tx.(pgx.Tx)
	if !ok {
		return fmt.Errorf("%w (got %T)", store.ErrTxNotSupported, tx)
	}
	return s.insertTimers(ctx, q, ts)
}

func (s *Store) insertTimers(ctx context.Context, q querier, ts []store.Timer) error {
	if len(ts) == 0 {
		return nil
	}
	var b pgbulk.Batch
	var t, f pgbulk.Selection
	id := pgbulk.Col(&b, &t, "id", "text", ts, func(t *store.Timer) string { return t.ID })
	ns := pgbulk.Col(&b, &t, "namespace", "text", ts, func(t *store.Timer) string { return t.Namespace })
	pgbulk.Col(&b, &t, "name", "text", ts, func(t *store.Timer) string { return t.Name })
	pgbulk.Col(&b, &t, "kind", "text", ts, func(t *store.Timer) string { return t.Kind })
	pgbulk.Col(&b, &t, "at", "bigint", ts, func(t *store.Timer) int64 { return t.At })
	pgbulk.Col(&b, &t, "cron", "text", ts, func(t *store.Timer) string { return t.Cron })
	pgbulk.ColEq(&b, &t, "payload", "bytea", ts, func(t *store.Timer) []byte { return t.Payload }, bytes.Equal)
	pgbulk.Col(&b, &t, "enabled", "bool", ts, func(t *store.Timer) bool { return t.Enabled })
	pgbulk.Col(&b, &t, "version", "bigint", ts, func(t *store.Timer) int64 { return t.Version })
	pgbulk.Col(&b, &t, "max_attempts", "int", ts, func(t *store.Timer) int32 { return int32(t.MaxAttempts) })
	pgbulk.Col(&b, &t, "min_backoff", "bigint", ts, func(t *store.Timer) int64 { return t.MinBackoff })
	pgbulk.Col(&b, &t, "max_backoff", "bigint", ts, func(t *store.Timer) int64 { return t.MaxBackoff })
	pgbulk.Col(&b, &t, "timeout", "bigint", ts, func(t *store.Timer) int64 { return t.Timeout })
	pgbulk.Col(&b, &t, "misfire", "text", ts, func(t *store.Timer) string { return t.Misfire })
	pgbulk.Col(&b, &t, "next_at", "bigint", ts, func(t *store.Timer) int64 { return t.NextAt })
	pgbulk.Col(&b, &t, "created", "bigint", ts, func(t *store.Timer) int64 { return t.Created })
	pgbulk.Col(&b, &t, "updated", "bigint", ts, func(t *store.Timer) int64 { return t.Updated })
	sql := `INSERT INTO ` + s.t("timers") + ` (` + timerCols + `) ` + t.SQL()
	// The first fires (First 0: none), made in the same statement by a
	// data-modifying CTE: atomic without a transaction of its own. They
	// are aligned with the timers, so they reuse the timers' id and
	// namespace parameters.
	if slices.ContainsFunc(ts, func(t store.Timer) bool { return t.First != 0 }) {
		f.Use(id)
		f.Use(ns)
		pgbulk.Col(&b, &f, "planned", "bigint", ts, func(t *store.Timer) int64 { return t.First })
		pgbulk.Col(&b, &f, "owner", "text", ts, func(t *store.Timer) string { return t.Owner })
		pgbulk.Col(&b, &f, "lease_until", "bigint", ts, func(t *store.Timer) int64 { return t.LeaseUntil })
		sql = `WITH t AS (` + sql + `) INSERT INTO ` + s.t("timer_fires") + ` (timer_id, planned, namespace, state, attempt, base, due_at, owner, lease_until, last_error, finished)
			SELECT id, planned, namespace, 'pending', 0, 0, planned, owner, lease_until, '', 0 FROM (` + f.SQL() + `) AS f WHERE planned <> 0`
	}
	_, err := q.Exec(ctx, sql, b.Args...)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "timers_namespace_name_key" {
		return fmt.Errorf("%w: %s", store.ErrDuplicateTimer, pe.Detail)
	}
	if err != nil {
		return s.wrap("insert timers", err)
	}
	return nil
}

// GetTimer implements store.TimerStore.
func (s *Store) GetTimer(ctx context.Context, id string) (store.Timer, bool, error) {
	t, err := scanTimerLive(s.pool.QueryRow(ctx, `SELECT `+timerCols+s.liveCol()+` FROM `+s.t("timers")+` AS timers WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return t, false, nil
	}
	if err != nil {
		return t, false, s.wrap("read timer", err)
	}
	return t, true, nil
}

func (s *Store) stateCond(state string) string {
	live := `EXISTS (SELECT 1 FROM ` + s.t("timer_fires") + ` f WHERE f.timer_id = timers.id AND f.state IN ('pending', 'retry', 'running'))`
	switch state {
	case "enabled":
		return `enabled AND (next_at > 0 OR ` + live + `)`
	case "disabled":
		return `NOT enabled`
	case "done":
		return `enabled AND next_at = 0 AND NOT ` + live
	case "dead":
		return `EXISTS (SELECT 1 FROM ` + s.t("timer_fires") + ` f WHERE f.timer_id = timers.id AND f.state = 'dead')`
	}
	return "true"
}

func (s *Store) timers(ctx context.Context, sql string, args ...any) ([]store.Timer, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, s.wrap("read timers", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Timer, error) { return scanTimer(r) })
	if err != nil {
		return nil, s.wrap("read timers", err)
	}
	return out, nil
}

// ListTimers implements store.TimerStore.
func (s *Store) ListTimers(ctx context.Context, f store.TimerFilter) ([]store.Timer, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+timerCols+s.liveCol()+` FROM `+s.t("timers")+` AS timers
		WHERE ($1 = '' OR namespace = $1) AND ($2 = '' OR kind = $2) AND id > $3 AND `+s.stateCond(f.State)+`
		ORDER BY id LIMIT $4`, f.Namespace, f.Kind, f.After, f.Limit)
	if err != nil {
		return nil, s.wrap("list timers", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Timer, error) { return scanTimerLive(r) })
	if err != nil {
		return nil, s.wrap("list timers", err)
	}
	return out, nil
}

// CountTimers implements store.TimerStore.
func (s *Store) CountTimers(ctx context.Context, namespace string) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM `+s.t("timers")+` WHERE namespace = $1`, namespace).Scan(&n); err != nil {
		return 0, s.wrap("count timers", err)
	}
	return n, nil
}

// UpdateTimer implements store.TimerStore.
func (s *Store) UpdateTimer(ctx context.Context, t store.Timer) (bool, error) {
	var ok bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE `+s.t("timers")+` SET kind = $1, at = $2, cron = $3, payload = $4, version = version + 1,
			max_attempts = $5, min_backoff = $6, max_backoff = $7, timeout = $8, misfire = $9, next_at = $10, updated = $11 WHERE id = $12`,
			t.Kind, t.At, t.Cron, t.Payload, t.MaxAttempts, t.MinBackoff, t.MaxBackoff, t.Timeout, t.Misfire, t.NextAt, t.Updated, t.ID)
		if err != nil {
			return err
		}
		if ok = tag.RowsAffected() == 1; !ok {
			return nil
		}
		_, err = tx.Exec(ctx, `DELETE FROM `+s.t("timer_fires")+` WHERE timer_id = $1 AND state IN ('pending', 'retry') AND attempt = base`, t.ID)
		return err
	})
	if err != nil {
		return false, s.wrap("update timer", err)
	}
	return ok, nil
}

// SetEnabled implements store.TimerStore.
func (s *Store) SetEnabled(ctx context.Context, id string, enabled bool, nextAt, now int64) (bool, error) {
	var ok bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := `UPDATE ` + s.t("timers") + ` SET enabled = false, version = version + 1, updated = $1 WHERE id = $2`
		args := []any{now, id}
		if enabled {
			q = `UPDATE ` + s.t("timers") + ` SET enabled = true, version = version + 1, updated = $1, next_at = $3 WHERE id = $2`
			args = append(args, nextAt)
		}
		tag, err := tx.Exec(ctx, q, args...)
		if err != nil {
			return err
		}
		if ok = tag.RowsAffected() == 1; !ok || enabled {
			return nil
		}
		_, err = tx.Exec(ctx, `DELETE FROM `+s.t("timer_fires")+` WHERE timer_id = $1 AND state IN ('pending', 'retry')`, id)
		return err
	})
	if err != nil {
		return false, s.wrap("enable or disable timer", err)
	}
	return ok, nil
}

// DeleteTimer implements store.TimerStore.
func (s *Store) DeleteTimer(ctx context.Context, id string) (bool, error) {
	var ok bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM `+s.t("timers")+` WHERE id = $1`, id)
		if err != nil {
			return err
		}
		ok = tag.RowsAffected() == 1
		if _, err := tx.Exec(ctx, `DELETE FROM `+s.t("timer_fires")+` WHERE timer_id = $1`, id); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM `+s.t("timer_attempts")+` WHERE timer_id = $1`, id)
		return err
	})
	if err != nil {
		return false, s.wrap("delete timer", err)
	}
	return ok, nil
}

// DueTimers implements store.TimerStore.
func (s *Store) DueTimers(ctx context.Context, before int64, limit int) ([]store.Timer, error) {
	return s.timers(ctx, `SELECT `+timerCols+` FROM `+s.t("timers")+` WHERE enabled AND next_at > 0 AND next_at <= $1 ORDER BY next_at LIMIT $2`, before, limit)
}

// AdvanceTimers implements store.TimerStore: every timer moved in one
// statement, and the fires of those it moved inserted in another.
func (s *Store) AdvanceTimers(ctx context.Context, as []store.Advance) error {
	if len(as) == 0 {
		return nil
	}
	ids, from, next := make([]string, len(as)), make([]int64, len(as)), make([]int64, len(as))
	var fid []string
	var fp []int64
	for i, a := range as {
		ids[i], from[i], next[i] = a.TimerID, a.From, a.Next
		for _, p := range a.Fires {
			fid, fp = append(fid, a.TimerID), append(fp, p)
		}
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE `+s.t("timers")+` AS t SET next_at = a.next
			FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS a(id, from_at, next)
			WHERE t.id = a.id AND t.next_at = a.from_at RETURNING t.id`, ids, from, next)
		if err != nil {
			return err
		}
		moved, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if len(moved) == 0 || len(fid) == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `INSERT INTO `+s.t("timer_fires")+` (timer_id, planned, namespace, state, attempt, base, due_at, owner, lease_until, last_error, finished)
			SELECT f.id, f.p, t.namespace, 'pending', 0, 0, f.p, '', 0, '', 0
			FROM unnest($1::text[], $2::bigint[]) AS f(id, p) JOIN `+s.t("timers")+` t ON t.id = f.id
			WHERE f.id = ANY($3) ON CONFLICT DO NOTHING`, fid, fp, moved)
		return err
	})
	if err != nil {
		return s.wrap("make timer fires", err)
	}
	return nil
}

// ClaimFires implements store.TimerStore.
func (s *Store) ClaimFires(ctx context.Context, owner string, after store.FireKey, before, now, lease int64, limit int) ([]store.Claimed, store.FireKey, error) {
	// Unclaimed fires in key order from after, and leases that ran out
	// by lease, each from its own index (see migrations 0012 and 0013).
	rows, err := s.pool.Query(ctx, `WITH free AS (SELECT timer_id, planned FROM `+s.t("timer_fires")+`
			WHERE owner = '' AND state IN ('pending', 'retry', 'running') AND due_at <= $2 AND (due_at, timer_id, planned) > ($6, $7, $8)
			ORDER BY due_at, timer_id, planned LIMIT $5 FOR UPDATE SKIP LOCKED),
		expired AS (SELECT timer_id, planned FROM `+s.t("timer_fires")+`
			WHERE owner <> '' AND state IN ('pending', 'retry', 'running') AND lease_until < $3 AND due_at <= $2
			ORDER BY lease_until LIMIT $5 FOR UPDATE SKIP LOCKED)
		UPDATE `+s.t("timer_fires")+` AS f SET owner = $1, lease_until = greatest(f.due_at, $3) + $4
		FROM (SELECT *, true AS free FROM free UNION ALL SELECT *, false FROM expired) AS c
		WHERE f.timer_id = c.timer_id AND f.planned = c.planned
		RETURNING f.timer_id, f.planned, f.due_at, f.namespace, c.free`, owner, before, now, lease, limit, after.DueAt, after.TimerID, after.Planned)
	if err != nil {
		return nil, after, s.wrap("claim timer fires", err)
	}
	next := after
	var free bool
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Claimed, error) {
		var c store.Claimed
		err := r.Scan(&c.TimerID, &c.Planned, &c.DueAt, &c.Namespace, &free)
		if free {
			next = next.Past(c)
		}
		return c, err
	})
	if err != nil {
		return nil, after, s.wrap("claim timer fires", err)
	}
	return out, next, nil
}

func refArrays(refs []store.FireRef) ([]string, []int64) {
	ids, ps := make([]string, len(refs)), make([]int64, len(refs))
	for i, r := range refs {
		ids[i], ps[i] = r.TimerID, r.Planned
	}
	return ids, ps
}

// StartFires implements store.TimerStore, in one statement.
func (s *Store) StartFires(ctx context.Context, owner string, refs []store.FireRef, now, defTimeout, grace int64) ([]store.Started, error) {
	return s.startFires(ctx, owner, refs, now, defTimeout, grace)
}

// StepFires implements store.TimerStore in one statement: the outcomes
// recorded and the attempts begun by data-modifying CTEs, which one
// statement makes atomic without a transaction's BEGIN and COMMIT (a
// batch is then one round trip, not four). The rows they change are
// disjoint: a fire that just ended is not claimed again before a poll,
// so it is not among those beginning.
func (s *Store) StepFires(ctx context.Context, owner string, os []store.Outcome, refs []store.FireRef, now, defTimeout, grace int64) ([]store.Started, error) {
	if len(os) == 0 {
		return s.startFires(ctx, owner, refs, now, defTimeout, grace)
	}
	if len(refs) == 0 {
		return nil, s.FinishFires(ctx, owner, os)
	}
	var b pgbulk.Batch
	o := outcomeCols(&b, os)
	ids, ps := refArrays(refs)
	own := b.Arg(owner)
	var out []store.Started
	err := s.fireBatch(ctx, `WITH `+s.finishCTE(o, own)+`,
		s AS (`+s.startUpdate(b.Arg(ids), b.Arg(ps), b.Arg(now), b.Arg(grace), own, b.Arg(defTimeout))+`)
		SELECT * FROM s`, b.Args,
		func(rows pgx.Rows) (err error) { out, err = collectStarted(rows, len(refs)); return err })
	if err != nil {
		return nil, s.wrap("record and begin timer fires", err)
	}
	return out, nil
}

// fireBatch runs a statement of the fire path, over arrays of keys, under
// a generic plan, in one round trip (BEGIN, SET LOCAL, the statement and
// COMMIT pipelined); read reads its rows. A custom plan reads a batch's
// values against statistics that a burst makes stale within a second:
// fires all unclaimed when last analyzed, all claimed by one owner now,
// so "owner = $1" reads as one row and a batch of 2 000 outcomes was
// joined by scanning the table once for each (40 s a batch at 100 000
// fires; fires ran out their leases and were delivered twice). A generic
// plan looks each key up by its index, whatever the batch and the
// statistics. The store's other statements keep custom plans.
func (s *Store) fireBatch(ctx context.Context, sql string, args []any, read func(pgx.Rows) error) error {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SET LOCAL plan_cache_mode = force_generic_plan")
	b.Queue(sql, args...)
	b.Queue("COMMIT")
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	if err := read(rows); err != nil {
		return err
	}
	if _, err := br.Exec(); err != nil {
		return err
	}
	return br.Close()
}

// startUpdate is the statement beginning attempts: refs $ids/$ps, now,
// grace, owner and the default timeout as the parameters named.
func (s *Store) startUpdate(ids, ps, now, grace, owner, defTimeout string) string {
	return `UPDATE ` + s.t("timer_fires") + ` AS f SET state = 'running', attempt = f.attempt + 1, lease_until = ` + now + ` + CASE WHEN t.timeout > 0 THEN t.timeout ELSE ` + defTimeout + ` END + ` + grace + `
		FROM unnest(` + ids + `::text[], ` + ps + `::bigint[]) AS r(id, p), ` + s.t("timers") + ` AS t
		WHERE f.timer_id = r.id AND f.planned = r.p AND t.id = f.timer_id AND t.enabled
			AND f.owner = ` + owner + ` AND f.state IN ('pending', 'retry', 'running')
		RETURNING f.timer_id, f.planned, f.attempt, t.namespace, t.name, t.kind, t.payload, t.max_attempts, t.min_backoff, t.max_backoff, t.timeout`
}

// collectStarted reads a batch's begun fires, n at most.
func collectStarted(rows pgx.Rows, n int) ([]store.Started, error) {
	return pgx.AppendRows(make([]store.Started, 0, n), rows, func(r pgx.CollectableRow) (store.Started, error) {
		var st store.Started
		t := &st.Timer
		err := r.Scan(&st.TimerID, &st.Planned, &st.Attempt, &t.Namespace, &t.Name, &t.Kind, &t.Payload, &t.MaxAttempts, &t.MinBackoff, &t.MaxBackoff, &t.Timeout)
		t.ID = st.TimerID
		return st, err
	})
}

func (s *Store) startFires(ctx context.Context, owner string, refs []store.FireRef, now, defTimeout, grace int64) ([]store.Started, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	ids, ps := refArrays(refs)
	var out []store.Started
	err := s.fireBatch(ctx, s.startUpdate("$1", "$2", "$3", "$4", "$5", "$6"), []any{ids, ps, now, grace, owner, defTimeout},
		func(rows pgx.Rows) (err error) { out, err = collectStarted(rows, len(refs)); return err })
	if err != nil {
		return nil, s.wrap("begin timer fires", err)
	}
	return out, nil
}

// FinishFires implements store.TimerStore: the fires updated in one
// statement, their attempts inserted in another.
func (s *Store) FinishFires(ctx context.Context, owner string, os []store.Outcome) error {
	if len(os) == 0 {
		return nil
	}
	err := s.finishFires(ctx, owner, os)
	if err != nil {
		return s.wrap("finish timer fires", err)
	}
	return nil
}

// outcomeCols adds os to b, as the columns id, p, state, attempt, due,
// err, started, finished and code of the selection it returns.
func outcomeCols(b *pgbulk.Batch, os []store.Outcome) pgbulk.Selection {
	var o pgbulk.Selection
	pgbulk.Col(b, &o, "id", "text", os, func(x *store.Outcome) string { return x.TimerID })
	pgbulk.Col(b, &o, "p", "bigint", os, func(x *store.Outcome) int64 { return x.Planned })
	pgbulk.Col(b, &o, "state", "text", os, func(x *store.Outcome) string { return x.State })
	pgbulk.Col(b, &o, "attempt", "int", os, func(x *store.Outcome) int32 { return int32(x.Attempt) })
	pgbulk.Col(b, &o, "due", "bigint", os, func(x *store.Outcome) int64 { return x.DueAt })
	pgbulk.Col(b, &o, "err", "text", os, func(x *store.Outcome) string { return x.Error })
	pgbulk.Col(b, &o, "started", "bigint", os, func(x *store.Outcome) int64 { return x.Started })
	pgbulk.Col(b, &o, "finished", "bigint", os, func(x *store.Outcome) int64 { return x.Finished })
	pgbulk.Col(b, &o, "code", "int", os, func(x *store.Outcome) int32 { return int32(x.StatusCode) })
	return o
}

// finishCTE records outcomes, o (outcomeCols): the fires updated
// (fenced by owner, a placeholder, and attempt) and a row for each failed
// attempt.
func (s *Store) finishCTE(o pgbulk.Selection, owner string) string {
	return `o AS (` + o.SQL() + `),
		u AS (UPDATE ` + s.t("timer_fires") + ` AS f SET state = o.state, due_at = CASE WHEN o.state = 'retry' THEN o.due ELSE f.due_at END,
			owner = '', lease_until = 0, last_error = o.err, started = o.started, finished = o.finished, status_code = o.code
			FROM o WHERE f.timer_id = o.id AND f.planned = o.p AND f.owner = ` + owner + ` AND f.attempt = o.attempt
			RETURNING f.timer_id, f.planned, f.attempt, f.state, f.started, f.finished, f.last_error, f.status_code),
		a AS (INSERT INTO ` + s.t("timer_attempts") + ` (timer_id, planned, attempt, started, finished, error, status_code)
			SELECT timer_id, planned, attempt, started, finished, last_error, status_code FROM u WHERE state <> 'succeeded'
			ON CONFLICT (timer_id, planned, attempt) DO UPDATE SET started = excluded.started, finished = excluded.finished, error = excluded.error, status_code = excluded.status_code)`
}

func (s *Store) finishFires(ctx context.Context, owner string, os []store.Outcome) error {
	var b pgbulk.Batch
	o := outcomeCols(&b, os)
	return s.fireBatch(ctx, `WITH `+s.finishCTE(o, b.Arg(owner))+` SELECT count(*) FROM u`, b.Args,
		func(rows pgx.Rows) error { rows.Close(); return rows.Err() })
}

// ReleaseFires implements store.TimerStore.
func (s *Store) ReleaseFires(ctx context.Context, owner string) error {
	_, err := s.pool.Exec(ctx, `UPDATE `+s.t("timer_fires")+` SET owner = '', lease_until = 0 WHERE owner = $1 AND state IN ('pending', 'retry')`, owner)
	if err != nil {
		return s.wrap("give back timer fires", err)
	}
	return nil
}

// RetryFire implements store.TimerStore.
func (s *Store) RetryFire(ctx context.Context, ref store.FireRef, now int64) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE `+s.t("timer_fires")+` SET state = 'pending', base = attempt, due_at = $3, owner = '', lease_until = 0
		WHERE timer_id = $1 AND planned = $2 AND state = 'dead'`, ref.TimerID, ref.Planned, now)
	if err != nil {
		return false, s.wrap("retry timer fire", err)
	}
	return tag.RowsAffected() == 1, nil
}

// Fires implements store.TimerStore.
func (s *Store) Fires(ctx context.Context, timerID string, limit int) ([]store.FireRecord, error) {
	rows, err := s.pool.Query(ctx, `SELECT planned, state, attempt, due_at, owner, last_error, started, finished, status_code FROM `+s.t("timer_fires")+` WHERE timer_id = $1 ORDER BY planned DESC LIMIT $2`, timerID, limit)
	if err != nil {
		return nil, s.wrap("read timer fires", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.FireRecord, error) {
		f := store.FireRecord{FireRef: store.FireRef{TimerID: timerID}}
		err := r.Scan(&f.Planned, &f.State, &f.Attempt, &f.DueAt, &f.Owner, &f.LastError, &f.Last.Started, &f.Last.Finished, &f.Last.StatusCode)
		return f, err
	})
	if err != nil || len(out) == 0 {
		if err != nil {
			err = s.wrap("read timer fires", err)
		}
		store.CompleteAttempts(out)
		return out, err
	}
	idx := map[int64]int{}
	for i, f := range out {
		idx[f.Planned] = i
	}
	arows, err := s.pool.Query(ctx, `SELECT planned, attempt, started, finished, error, status_code FROM `+s.t("timer_attempts")+`
		WHERE timer_id = $1 AND planned >= $2 ORDER BY planned, attempt`, timerID, out[len(out)-1].Planned)
	if err != nil {
		return nil, s.wrap("read timer attempts", err)
	}
	var p int64
	var a store.Attempt
	_, err = pgx.ForEachRow(arows, []any{&p, &a.Attempt, &a.Started, &a.Finished, &a.Error, &a.StatusCode}, func() error {
		if i, ok := idx[p]; ok {
			out[i].Attempts = append(out[i].Attempts, a)
		}
		return nil
	})
	if err != nil {
		return nil, s.wrap("read timer attempts", err)
	}
	store.CompleteAttempts(out)
	return out, nil
}

// CountFires implements store.TimerStore.
func (s *Store) CountFires(ctx context.Context, namespace string, now, soon int64) (store.FireCounts, error) {
	c := store.FireCounts{ByState: map[string]int64{}}
	rows, err := s.pool.Query(ctx, `SELECT state, count(*),
			count(*) FILTER (WHERE state IN ('pending', 'retry') AND due_at < $1),
			count(*) FILTER (WHERE state IN ('pending', 'retry') AND due_at >= $1 AND due_at < $2)
		FROM `+s.t("timer_fires")+` WHERE $3 = '' OR namespace = $3 GROUP BY state`, now, soon, namespace)
	if err != nil {
		return c, s.wrap("count timer fires", err)
	}
	var st string
	var n, late, due int64
	_, err = pgx.ForEachRow(rows, []any{&st, &n, &late, &due}, func() error {
		c.ByState[st] = n
		c.Late += late
		c.DueSoon += due
		return nil
	})
	if err != nil {
		return c, s.wrap("count timer fires", err)
	}
	return c, nil
}

// PruneFires implements store.TimerStore.
func (s *Store) PruneFires(ctx context.Context, succeededBefore, deadBefore int64) (int64, error) {
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `DELETE FROM `+s.t("timer_fires")+` WHERE (state = 'succeeded' AND finished < $1) OR (state = 'dead' AND finished < $2)
			RETURNING timer_id, planned`, succeededBefore, deadBefore)
		if err != nil {
			return err
		}
		var ids []string
		var ps []int64
		var id string
		var p int64
		if _, err := pgx.ForEachRow(rows, []any{&id, &p}, func() error { ids, ps = append(ids, id), append(ps, p); return nil }); err != nil {
			return err
		}
		n = int64(len(ids))
		if n == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `DELETE FROM `+s.t("timer_attempts")+` a USING unnest($1::text[], $2::bigint[]) AS g(id, p) WHERE a.timer_id = g.id AND a.planned = g.p`, ids, ps)
		return err
	})
	if err != nil {
		return 0, s.wrap("prune timer fires", err)
	}
	return n, nil
}
