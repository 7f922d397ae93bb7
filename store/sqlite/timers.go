package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/fom-go/fom/store"
)

// Durable timers on SQLite: one process holds the store, so a claim needs
// no lock beyond the write transaction; each batch is one transaction of
// statements prepared once.

var _ store.TimerStore = (*Store)(nil)

const timerCols = `id, namespace, name, kind, at, cron, payload, enabled, version, max_attempts, min_backoff, max_backoff, timeout, misfire, next_at, created, updated`

func scanTimer(sc interface{ Scan(...any) error }) (store.Timer, error) {
	var t store.Timer
	var enabled int
	err := sc.Scan(&t.ID, &t.Namespace, &t.Name, &t.Kind, &t.At, &t.Cron, &t.Payload, &enabled, &t.Version,
		&t.MaxAttempts, &t.MinBackoff, &t.MaxBackoff, &t.Timeout, &t.Misfire, &t.NextAt, &t.Created, &t.Updated)
	t.Enabled = enabled == 1
	return t, err
}

// liveCol reads whether a timer has a fire not over.
const liveCol = `, EXISTS (SELECT 1 FROM timer_fires f WHERE f.timer_id = timers.id AND f.state IN ('pending', 'retry', 'running'))`

func scanTimerLive(sc interface{ Scan(...any) error }) (store.Timer, error) {
	var t store.Timer
	var enabled, live int
	err := sc.Scan(&t.ID, &t.Namespace, &t.Name, &t.Kind, &t.At, &t.Cron, &t.Payload, &enabled, &t.Version,
		&t.MaxAttempts, &t.MinBackoff, &t.MaxBackoff, &t.Timeout, &t.Misfire, &t.NextAt, &t.Created, &t.Updated, &live)
	t.Enabled, t.Live = enabled == 1, live == 1
	return t, err
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// InsertTimers implements store.TimerStore.
func (s *Store) InsertTimers(ctx context.Context, ts []store.Timer) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, `INSERT INTO timers (`+timerCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		fire, err := tx.PrepareContext(ctx, `INSERT INTO timer_fires (timer_id, planned, namespace, state, attempt, base, due_at, owner, lease_until, last_error, finished)
			VALUES (?, ?, ?, 'pending', 0, 0, ?, ?, ?, '', 0)`)
		if err != nil {
			return err
		}
		defer fire.Close()
		for _, t := range ts {
			_, err := st.ExecContext(ctx, t.ID, t.Namespace, t.Name, t.Kind, t.At, t.Cron, t.Payload, b2i(t.Enabled), t.Version,
				t.MaxAttempts, t.MinBackoff, t.MaxBackoff, t.Timeout, t.Misfire, t.NextAt, t.Created, t.Updated)
			if err != nil {
				if strings.Contains(err.Error(), "UNIQUE constraint failed: timers.namespace, timers.name") {
					return fmt.Errorf("%w: namespace %q, name %q", store.ErrDuplicateTimer, t.Namespace, t.Name)
				}
				return fmt.Errorf("insert timer %q: %w", t.Name, err)
			}
			if t.First != 0 {
				if _, err := fire.ExecContext(ctx, t.ID, t.First, t.Namespace, t.First, t.Owner, t.LeaseUntil); err != nil {
					return fmt.Errorf("insert the first fire of timer %q: %w", t.Name, err)
				}
			}
		}
		return nil
	})
}

// InsertTimersTx implements store.TimerStore: a SQLite store has no
// transaction of the caller's to join.
func (s *Store) InsertTimersTx(context.Context, any, []store.Timer) error {
	return store.ErrTxNotSupported
}

// GetTimer implements store.TimerStore.
func (s *Store) GetTimer(ctx context.Context, id string) (store.Timer, bool, error) {
	t, err := scanTimerLive(s.db.QueryRowContext(ctx, `SELECT `+timerCols+liveCol+` FROM timers WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return t, false, nil
	}
	if err != nil {
		return t, false, s.readErr(err)
	}
	return t, true, nil
}

// stateCond is the SQL condition of a timer state filter.
func stateCond(state string) string {
	const live = `EXISTS (SELECT 1 FROM timer_fires f WHERE f.timer_id = timers.id AND f.state IN ('pending', 'retry', 'running'))`
	switch state {
	case "enabled":
		return `enabled = 1 AND (next_at > 0 OR ` + live + `)`
	case "disabled":
		return `enabled = 0`
	case "done":
		return `enabled = 1 AND next_at = 0 AND NOT ` + live
	case "dead":
		return `EXISTS (SELECT 1 FROM timer_fires f WHERE f.timer_id = timers.id AND f.state = 'dead')`
	}
	return "1 = 1"
}

// ListTimers implements store.TimerStore.
func (s *Store) ListTimers(ctx context.Context, f store.TimerFilter) ([]store.Timer, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+timerCols+liveCol+` FROM timers
		WHERE (? = '' OR namespace = ?) AND (? = '' OR kind = ?) AND id > ? AND `+stateCond(f.State)+`
		ORDER BY id LIMIT ?`, f.Namespace, f.Namespace, f.Kind, f.Kind, f.After, f.Limit)
	if err != nil {
		return nil, s.readErr(err)
	}
	return s.collectTimers(rows, scanTimerLive)
}

// CountTimers implements store.TimerStore.
func (s *Store) CountTimers(ctx context.Context, namespace string) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM timers WHERE namespace = ?`, namespace).Scan(&n)
	return n, err
}

// notBegun are the fires no attempt of which is under way or over.
const notBegun = `state IN ('pending', 'retry')`

// UpdateTimer implements store.TimerStore.
func (s *Store) UpdateTimer(ctx context.Context, t store.Timer) (bool, error) {
	var ok bool
	err := s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE timers SET kind = ?, at = ?, cron = ?, payload = ?, version = version + 1,
			max_attempts = ?, min_backoff = ?, max_backoff = ?, timeout = ?, misfire = ?, next_at = ?, updated = ? WHERE id = ?`,
			t.Kind, t.At, t.Cron, t.Payload, t.MaxAttempts, t.MinBackoff, t.MaxBackoff, t.Timeout, t.Misfire, t.NextAt, t.Updated, t.ID)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		if ok = n == 1; !ok {
			return nil
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM timer_fires WHERE timer_id = ? AND `+notBegun+` AND attempt = base`, t.ID)
		return err
	})
	return ok, err
}

// SetEnabled implements store.TimerStore.
func (s *Store) SetEnabled(ctx context.Context, id string, enabled bool, nextAt, now int64) (bool, error) {
	var ok bool
	err := s.tx(ctx, func(tx *sql.Tx) error {
		q := `UPDATE timers SET enabled = 0, version = version + 1, updated = ? WHERE id = ?`
		args := []any{now, id}
		if enabled {
			q = `UPDATE timers SET enabled = 1, version = version + 1, updated = ?, next_at = ? WHERE id = ?`
			args = []any{now, nextAt, id}
		}
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		if ok = n == 1; !ok || enabled {
			return nil
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM timer_fires WHERE timer_id = ? AND `+notBegun, id)
		return err
	})
	return ok, err
}

// DeleteTimer implements store.TimerStore.
func (s *Store) DeleteTimer(ctx context.Context, id string) (bool, error) {
	var ok bool
	err := s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM timers WHERE id = ?`, id)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		ok = n == 1
		if _, err := tx.ExecContext(ctx, `DELETE FROM timer_fires WHERE timer_id = ?`, id); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM timer_attempts WHERE timer_id = ?`, id)
		return err
	})
	return ok, err
}

// DueTimers implements store.TimerStore.
func (s *Store) DueTimers(ctx context.Context, before int64, limit int) ([]store.Timer, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+timerCols+` FROM timers WHERE enabled = 1 AND next_at > 0 AND next_at <= ? ORDER BY next_at LIMIT ?`, before, limit)
	if err != nil {
		return nil, s.readErr(err)
	}
	return s.collectTimers(rows, scanTimer)
}

// collectTimers reads every row of rows with scan, and closes rows.
func (s *Store) collectTimers(rows *sql.Rows, scan func(interface{ Scan(...any) error }) (store.Timer, error)) ([]store.Timer, error) {
	defer rows.Close()
	var out []store.Timer
	for rows.Next() {
		t, err := scan(rows)
		if err != nil {
			return nil, s.readErr(err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// AdvanceTimers implements store.TimerStore.
func (s *Store) AdvanceTimers(ctx context.Context, as []store.Advance) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		move, err := tx.PrepareContext(ctx, `UPDATE timers SET next_at = ? WHERE id = ? AND next_at = ?`)
		if err != nil {
			return err
		}
		defer move.Close()
		ins, err := tx.PrepareContext(ctx, `INSERT INTO timer_fires (timer_id, planned, namespace, state, attempt, base, due_at, owner, lease_until, last_error, finished)
			SELECT id, ?, namespace, 'pending', 0, 0, ?, '', 0, '', 0 FROM timers WHERE id = ? ON CONFLICT DO NOTHING`)
		if err != nil {
			return err
		}
		defer ins.Close()
		for _, a := range as {
			res, err := move.ExecContext(ctx, a.Next, a.TimerID, a.From)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				continue // moved by another writer
			}
			for _, p := range a.Fires {
				if _, err := ins.ExecContext(ctx, p, p, a.TimerID); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// ClaimFires implements store.TimerStore.
func (s *Store) ClaimFires(ctx context.Context, owner string, after store.FireKey, before, now, lease int64, limit int) ([]store.Claimed, store.FireKey, error) {
	var out []store.Claimed
	next := after
	err := s.tx(ctx, func(tx *sql.Tx) error {
		out, next = nil, after
		// Unclaimed fires in key order from after, then leases that ran
		// out by lease, each from its own index (see migrations 12 and
		// 13); a fire the first claims is leased past now, so the second
		// does not take it again.
		claim := func(free bool, pick string, args ...any) error {
			rows, err := tx.QueryContext(ctx, `UPDATE timer_fires SET owner = ?, lease_until = max(due_at, ?) + ?
				WHERE (timer_id, planned) IN (`+pick+`)
				RETURNING timer_id, planned, due_at, namespace`, append([]any{owner, now, lease}, args...)...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var c store.Claimed
				if err := rows.Scan(&c.TimerID, &c.Planned, &c.DueAt, &c.Namespace); err != nil {
					return err
				}
				if free {
					next = next.Past(c)
				}
				out = append(out, c)
			}
			return rows.Err()
		}
		if err := claim(true, `SELECT timer_id, planned FROM timer_fires
				WHERE owner = '' AND state IN ('pending', 'retry', 'running') AND due_at <= ? AND (due_at, timer_id, planned) > (?, ?, ?)
				ORDER BY due_at, timer_id, planned LIMIT ?`, before, after.DueAt, after.TimerID, after.Planned, limit); err != nil {
			return err
		}
		return claim(false, `SELECT timer_id, planned FROM timer_fires
				WHERE owner <> '' AND state IN ('pending', 'retry', 'running') AND lease_until < ? AND due_at <= ?
				ORDER BY lease_until LIMIT ?`, now, before, limit)
	})
	return out, next, err
}

// StartFires implements store.TimerStore.
func (s *Store) StartFires(ctx context.Context, owner string, refs []store.FireRef, now, defTimeout, grace int64) ([]store.Started, error) {
	return s.StepFires(ctx, owner, nil, refs, now, defTimeout, grace)
}

// FinishFires implements store.TimerStore.
func (s *Store) FinishFires(ctx context.Context, owner string, os []store.Outcome) error {
	_, err := s.StepFires(ctx, owner, os, nil, 0, 0, 0)
	return err
}

// StepFires implements store.TimerStore.
func (s *Store) StepFires(ctx context.Context, owner string, os []store.Outcome, refs []store.FireRef, now, defTimeout, grace int64) ([]store.Started, error) {
	if len(os) == 0 && len(refs) == 0 {
		return nil, nil
	}
	var out []store.Started
	err := s.tx(ctx, func(tx *sql.Tx) error {
		out = nil
		if err := finishFires(ctx, tx, owner, os); err != nil {
			return err
		}
		if len(refs) == 0 {
			return nil
		}
		// One statement for the batch: its keys as a JSON array.
		keys, err := refsJSON(refs)
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `UPDATE timer_fires SET state = 'running', attempt = attempt + 1,
				lease_until = ? + (SELECT CASE WHEN timeout > 0 THEN timeout ELSE ? END FROM timers WHERE id = timer_id) + ?
			WHERE (timer_id, planned) IN (SELECT value->>0, value->>1 FROM json_each(?)) AND owner = ? AND state IN ('pending', 'retry', 'running')
				AND EXISTS (SELECT 1 FROM timers WHERE id = timer_id AND enabled = 1)
			RETURNING timer_id, planned, attempt`, now, defTimeout, grace, keys, owner)
		if err != nil {
			return err
		}
		for rows.Next() {
			var st store.Started
			if err := rows.Scan(&st.TimerID, &st.Planned, &st.Attempt); err != nil {
				rows.Close()
				return err
			}
			out = append(out, st)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		// The timers of the fires begun, in one statement over their ids
		// as a JSON array, as the fires were.
		ids := make([]string, len(out))
		for i, st := range out {
			ids[i] = st.TimerID
		}
		idsJSON, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		trows, err := tx.QueryContext(ctx, `SELECT id, namespace, name, kind, payload, max_attempts, min_backoff, max_backoff, timeout
			FROM timers WHERE id IN (SELECT value FROM json_each(?))`, string(idsJSON))
		if err != nil {
			return err
		}
		byID := make(map[string]store.Timer, len(out))
		for trows.Next() {
			var t store.Timer
			if err := trows.Scan(&t.ID, &t.Namespace, &t.Name, &t.Kind, &t.Payload, &t.MaxAttempts, &t.MinBackoff, &t.MaxBackoff, &t.Timeout); err != nil {
				trows.Close()
				return err
			}
			byID[t.ID] = t
		}
		trows.Close()
		if err := trows.Err(); err != nil {
			return err
		}
		for i := range out {
			out[i].Timer = byID[out[i].TimerID]
		}
		return nil
	})
	return out, err
}

// finishFires records outcomes in tx.
func finishFires(ctx context.Context, tx *sql.Tx, owner string, os []store.Outcome) error {
	if len(os) == 0 {
		return nil
	}
	// One statement for the batch's fires, its outcomes as a JSON array
	// of [timer, planned, attempt, state, due, error, started, finished,
	// status]; a row in timer_attempts for each failed attempt recorded.
	b, err := json.Marshal(outcomeRows(os))
	if err != nil {
		return err
	}
	// (RETURNING names the updated table's columns unqualified: the
	// outcomes' are named apart.)
	rows, err := tx.QueryContext(ctx, `WITH o AS (SELECT value->>0 AS o_id, value->>1 AS o_p, value->>2 AS o_attempt, value->>3 AS o_state, value->>4 AS o_due,
			value->>5 AS o_err, value->>6 AS o_started, value->>7 AS o_finished, value->>8 AS o_code FROM json_each(?))
		UPDATE timer_fires SET state = o_state, due_at = CASE WHEN o_state = 'retry' THEN o_due ELSE due_at END,
			owner = '', lease_until = 0, last_error = o_err, started = o_started, finished = o_finished, status_code = o_code
		FROM o WHERE timer_id = o_id AND planned = o_p AND owner = ? AND attempt = o_attempt
		RETURNING timer_id, planned, attempt, state, started, finished, last_error, status_code`, string(b), owner)
	if err != nil {
		return err
	}
	// A failed attempt gets a row of its own, taken from the fire as
	// updated (a success is in the fire's row); a fire not updated was
	// deleted, or taken over after its lease ran out.
	var failed []store.Outcome
	for rows.Next() {
		var o store.Outcome
		if err := rows.Scan(&o.TimerID, &o.Planned, &o.Attempt, &o.State, &o.Started, &o.Finished, &o.Error, &o.StatusCode); err != nil {
			rows.Close()
			return err
		}
		if o.State != store.FireSucceeded {
			failed = append(failed, o)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(failed) == 0 {
		return err
	}
	att, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO timer_attempts (timer_id, planned, attempt, started, finished, error, status_code) VALUES (?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer att.Close()
	for _, o := range failed {
		if _, err := att.ExecContext(ctx, o.TimerID, o.Planned, o.Attempt, o.Started, o.Finished, o.Error, o.StatusCode); err != nil {
			return err
		}
	}
	return nil
}

// refsJSON is fire keys as a JSON array of [timer, planned].
func refsJSON(refs []store.FireRef) (string, error) {
	rows := make([][2]any, len(refs))
	for i, r := range refs {
		rows[i] = [2]any{r.TimerID, r.Planned}
	}
	b, err := json.Marshal(rows)
	return string(b), err
}

// outcomeRows are outcomes as the rows finishFires reads.
func outcomeRows(os []store.Outcome) [][9]any {
	rows := make([][9]any, len(os))
	for i, o := range os {
		rows[i] = [9]any{o.TimerID, o.Planned, o.Attempt, o.State, o.DueAt, o.Error, o.Started, o.Finished, o.StatusCode}
	}
	return rows
}

// ReleaseFires implements store.TimerStore.
func (s *Store) ReleaseFires(ctx context.Context, owner string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE timer_fires SET owner = '', lease_until = 0 WHERE owner = ? AND `+notBegun, owner)
		return err
	})
}

// RetryFire implements store.TimerStore.
func (s *Store) RetryFire(ctx context.Context, ref store.FireRef, now int64) (bool, error) {
	return s.execOne(ctx, `UPDATE timer_fires SET state = 'pending', base = attempt, due_at = ?, owner = '', lease_until = 0
		WHERE timer_id = ? AND planned = ? AND state = 'dead'`, now, ref.TimerID, ref.Planned)
}

// Fires implements store.TimerStore.
func (s *Store) Fires(ctx context.Context, timerID string, limit int) ([]store.FireRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT planned, state, attempt, due_at, owner, last_error, started, finished, status_code FROM timer_fires WHERE timer_id = ? ORDER BY planned DESC LIMIT ?`, timerID, limit)
	if err != nil {
		return nil, s.readErr(err)
	}
	var out []store.FireRecord
	for rows.Next() {
		f := store.FireRecord{FireRef: store.FireRef{TimerID: timerID}}
		if err := rows.Scan(&f.Planned, &f.State, &f.Attempt, &f.DueAt, &f.Owner, &f.LastError, &f.Last.Started, &f.Last.Finished, &f.Last.StatusCode); err != nil {
			rows.Close()
			return nil, s.readErr(err)
		}
		out = append(out, f)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(out) == 0 {
		store.CompleteAttempts(out)
		return out, err
	}
	arows, err := s.db.QueryContext(ctx, `SELECT planned, attempt, started, finished, error, status_code FROM timer_attempts
		WHERE timer_id = ? AND planned >= ? ORDER BY planned, attempt`, timerID, out[len(out)-1].Planned)
	if err != nil {
		return nil, s.readErr(err)
	}
	defer arows.Close()
	idx := map[int64]int{}
	for i, f := range out {
		idx[f.Planned] = i
	}
	for arows.Next() {
		var p int64
		var a store.Attempt
		if err := arows.Scan(&p, &a.Attempt, &a.Started, &a.Finished, &a.Error, &a.StatusCode); err != nil {
			return nil, s.readErr(err)
		}
		if i, ok := idx[p]; ok {
			out[i].Attempts = append(out[i].Attempts, a)
		}
	}
	store.CompleteAttempts(out)
	return out, arows.Err()
}

// CountFires implements store.TimerStore.
func (s *Store) CountFires(ctx context.Context, namespace string, now, soon int64) (store.FireCounts, error) {
	c := store.FireCounts{ByState: map[string]int64{}}
	rows, err := s.db.QueryContext(ctx, `SELECT state, count(*),
			sum(CASE WHEN state IN ('pending', 'retry') AND due_at < ? THEN 1 ELSE 0 END),
			sum(CASE WHEN state IN ('pending', 'retry') AND due_at >= ? AND due_at < ? THEN 1 ELSE 0 END)
		FROM timer_fires WHERE ? = '' OR namespace = ? GROUP BY state`, now, now, soon, namespace, namespace)
	if err != nil {
		return c, s.readErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var n, late, due int64
		if err := rows.Scan(&st, &n, &late, &due); err != nil {
			return c, s.readErr(err)
		}
		c.ByState[st] = n
		c.Late += late
		c.DueSoon += due
	}
	return c, rows.Err()
}

// PruneFires implements store.TimerStore.
func (s *Store) PruneFires(ctx context.Context, succeededBefore, deadBefore int64) (int64, error) {
	var n int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		const gone = `(state = 'succeeded' AND finished < ?) OR (state = 'dead' AND finished < ?)`
		if _, err := tx.ExecContext(ctx, `DELETE FROM timer_attempts WHERE (timer_id, planned) IN (SELECT timer_id, planned FROM timer_fires WHERE `+gone+`)`, succeededBefore, deadBefore); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM timer_fires WHERE `+gone, succeededBefore, deadBefore)
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return n, err
}
