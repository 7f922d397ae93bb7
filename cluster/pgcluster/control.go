package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"go.uber.org/zap"
)

// Control from any instance. Start and stop are desired states in the
// database that every instance follows (and that outlive a restart of
// every instance); an exec-now asked of an instance that does not own the
// schedule is forwarded to the owner, whose state machine answers.
//
// Notifications on the shared channel carry "desired:<schedule>",
// "request:<id>:<schedule>", "answer:<id>" and "leases:free"; other
// payloads go to Options.Notified.

// Notification prefixes of the control messages.
const (
	notifyDesired = "desired:"
	notifyRequest = "request:"
	notifyAnswer  = "answer:"
	notifyFree    = "leases:free"      // leases were given back: take your share now
	notifyHanded  = "leases:handed:"   // "<id>": leases were handed to that instance: take them now
	notifyExpired = "leases:expired:"  // "<id>": that instance took its share of a dead one's leases: take yours now
	notifyJoined  = "instances:joined" // ":<id>": an instance listens: give it its share now
)

// SetDesired stores whether schedule should run, for every instance, and
// tells them.
func (c *Coordinator) SetDesired(ctx context.Context, schedule string, running bool) error {
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO "+c.t("desired")+` (schedule, running, updated_at, by_instance) VALUES ($1, $2, now(), $3)
			ON CONFLICT (schedule) DO UPDATE SET running = excluded.running, updated_at = now(), by_instance = excluded.by_instance`, schedule, running, c.o.InstanceID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", c.o.Channel, notifyDesired+schedule)
		return err
	})
	if err != nil {
		return fmt.Errorf("fom: cluster: save the desired state of schedule %q: %w", schedule, err)
	}
	return nil
}

// Desired returns the desired states stored for schedules (a schedule
// without one is missing from the map).
func (c *Coordinator) Desired(ctx context.Context, schedules []string) (map[string]bool, error) {
	rows, err := c.pool.Query(ctx, "SELECT schedule, running FROM "+c.t("desired")+" WHERE schedule = ANY($1)", schedules)
	if err != nil {
		return nil, fmt.Errorf("fom: cluster: load desired states: %w", err)
	}
	out := map[string]bool{}
	var s string
	var r bool
	_, err = pgx.ForEachRow(rows, []any{&s, &r}, func() error { out[s] = r; return nil })
	if err != nil {
		return nil, fmt.Errorf("fom: cluster: load desired states: %w", err)
	}
	return out, nil
}

// Forward asks the owner of schedule to carry out action on behalf of by
// (who asked, "" when unknown) and returns its answer: nil when it was
// accepted, an error with the owner's reason when refused, ErrNoOwner when
// no owner answered before ctx ended (or within the lease TTL).
func (c *Coordinator) Forward(ctx context.Context, schedule, action, by string) error {
	ctx, cancel := context.WithTimeout(ctx, c.o.LeaseTTL)
	defer cancel()
	answer := make(chan string, 1)
	var id int64
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "INSERT INTO "+c.t("requests")+" (schedule, action, requester, principal) VALUES ($1, $2, $3, $4) RETURNING id", schedule, action, c.o.InstanceID, by).Scan(&id); err != nil {
			return err
		}
		c.mu.Lock()
		c.pending[id] = answer // before the commit sends the request
		c.mu.Unlock()
		_, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", c.o.Channel, notifyRequest+strconv.FormatInt(id, 10)+":"+schedule)
		return err
	})
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	if err != nil {
		return fmt.Errorf("fom: cluster: forward %s of schedule %q: %w", action, schedule, err)
	}
	select {
	case a := <-answer:
		if a == "" {
			return nil
		}
		return errors.New(a)
	case <-ctx.Done():
		return fmt.Errorf("%w: %s of schedule %q (waited %s)", ErrNoOwner, action, schedule, c.o.LeaseTTL)
	}
}

// control handles a control notification; false for other payloads.
func (c *Coordinator) control(payload string) bool {
	switch {
	case strings.HasPrefix(payload, notifyDesired):
		if c.o.DesiredChanged != nil {
			c.o.DesiredChanged(strings.TrimPrefix(payload, notifyDesired))
		}
	case strings.HasPrefix(payload, notifyRequest):
		idText, schedule, _ := strings.Cut(strings.TrimPrefix(payload, notifyRequest), ":")
		id, err := strconv.ParseInt(idText, 10, 64)
		if err == nil && c.Owner(schedule) && c.o.Execute != nil {
			go c.serve(id)
		}
	case payload == notifyFree:
		c.freed()
	case strings.HasPrefix(payload, notifyExpired):
		if strings.TrimPrefix(payload, notifyExpired) != c.o.InstanceID {
			c.Kick()
		}
	case strings.HasPrefix(payload, notifyHanded):
		if strings.TrimPrefix(payload, notifyHanded) == c.o.InstanceID {
			c.handedOver()
		}
	case payload == notifyJoined: // from an earlier release
		c.Kick()
	case strings.HasPrefix(payload, notifyJoined+":"):
		if strings.TrimPrefix(payload, notifyJoined+":") != c.o.InstanceID {
			c.Kick()
		}
	case strings.HasPrefix(payload, notifyAnswer):
		id, err := strconv.ParseInt(strings.TrimPrefix(payload, notifyAnswer), 10, 64)
		c.mu.Lock()
		ch := c.pending[id]
		c.mu.Unlock()
		if err == nil && ch != nil {
			go c.deliver(id, ch)
		}
	default:
		return false
	}
	return true
}

// serve carries out a forwarded request on the owner and answers it once.
func (c *Coordinator) serve(id int64) {
	ctx, cancel := context.WithTimeout(context.Background(), c.o.LeaseTTL)
	defer cancel()
	var schedule, action, by string
	err := c.pool.QueryRow(ctx, "SELECT schedule, action, principal FROM "+c.t("requests")+" WHERE id = $1 AND answered_at IS NULL", id).Scan(&schedule, &action, &by)
	if err != nil {
		return // answered already, or gone
	}
	answer := ""
	if err := c.o.Execute(schedule, action, by); err != nil {
		answer = err.Error()
	}
	err = pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "UPDATE "+c.t("requests")+" SET answer = $2, answered_at = now(), answered_by = $3 WHERE id = $1 AND answered_at IS NULL", id, answer, c.o.InstanceID)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, $2)", c.o.Channel, notifyAnswer+strconv.FormatInt(id, 10))
		return err
	})
	if err != nil {
		c.log.Warn("answering a forwarded request failed", zap.Int64("request", id), zap.Error(err))
	}
}

func (c *Coordinator) deliver(id int64, ch chan string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var answer string
	if err := c.pool.QueryRow(ctx, "SELECT answer FROM "+c.t("requests")+" WHERE id = $1", id).Scan(&answer); err != nil {
		answer = "reading the owner's answer failed: " + err.Error()
	}
	select {
	case ch <- answer:
	default:
	}
}

// Instances lists the instances that heartbeat within the last hour, live
// ones first.
func (c *Coordinator) Instances(ctx context.Context) ([]Instance, error) {
	rows, err := c.pool.Query(ctx, `SELECT i.id, i.host, i.version, i.started_at, i.heartbeat_at,
			NOT i.stopped AND i.leases_until > now(), NOT i.stopped AND i.heartbeat_at > now() - $1::interval, i.stopped,
			CASE WHEN i.leases_until > now() THEN (SELECT count(*) FROM `+c.t("leases")+` l WHERE l.owner = i.id) ELSE 0 END, i.schedules
		FROM `+c.t("instances")+` i WHERE i.heartbeat_at > now() - interval '1 hour'
		ORDER BY 6 DESC, i.id`, 2*c.o.RenewEvery)
	if err != nil {
		return nil, fmt.Errorf("fom: cluster: list instances: %w", err)
	}
	var out []Instance
	var in Instance
	_, err = pgx.ForEachRow(rows, []any{&in.ID, &in.Host, &in.Version, &in.Started, &in.Heartbeat, &in.Live, &in.Answering, &in.Stopped, &in.Owned, &in.Schedules}, func() error {
		out = append(out, in)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fom: cluster: list instances: %w", err)
	}
	return out, nil
}

// Owners returns the instance holding an unexpired lease on each schedule
// that has one.
func (c *Coordinator) Owners(ctx context.Context, schedules []string) (map[string]string, error) {
	rows, err := c.pool.Query(ctx, "SELECT l.schedule, l.owner FROM "+c.t("leases")+" l JOIN "+c.t("instances")+" i ON i.id = l.owner WHERE l.schedule = ANY($1) AND i.leases_until > now()", schedules)
	if err != nil {
		return nil, fmt.Errorf("fom: cluster: list owners: %w", err)
	}
	out := map[string]string{}
	var s, o string
	_, err = pgx.ForEachRow(rows, []any{&s, &o}, func() error { out[s] = o; return nil })
	if err != nil {
		return nil, fmt.Errorf("fom: cluster: list owners: %w", err)
	}
	return out, nil
}

// Leases returns the lease of each of schedules that has a row, in one
// statement.
func (c *Coordinator) Leases(ctx context.Context, schedules []string) (map[string]Lease, error) {
	// The last fire: the lease's, or a later one recorded since the
	// owner's last renewal (its batches not compacted yet, the renewal
	// interval's at most, read once for all the schedules; names matched
	// hashed, as lastFires does).
	rows, err := c.pool.Query(ctx, `WITH recent AS (
			SELECT u.s, max(u.p) AS p FROM `+c.t("fire_batches")+` b, unnest(b.schedules, b.planned) AS u(s, p)
			WHERE NOT b.compacted AND u.s IN (SELECT unnest($1::text[])) GROUP BY u.s)
		SELECT l.schedule, CASE WHEN i.leases_until > now() THEN l.owner ELSE '' END, coalesce(i.leases_until, '-infinity'),
			coalesce(i.heartbeat_at, '-infinity'), coalesce(NOT i.stopped AND i.heartbeat_at > now() - $2::interval, false),
			greatest(l.last_fire, r.p)
		FROM `+c.t("leases")+` l LEFT JOIN `+c.t("instances")+` i ON i.id = l.owner LEFT JOIN recent r ON r.s = l.schedule
		WHERE l.schedule = ANY($1)`, schedules, 2*c.o.RenewEvery)
	if err != nil {
		return nil, fmt.Errorf("fom: cluster: read leases: %w", err)
	}
	out := map[string]Lease{}
	var s string
	var l Lease
	var expires, heartbeat, last pgtype.Timestamptz
	_, err = pgx.ForEachRow(rows, []any{&s, &l.Owner, &expires, &heartbeat, &l.Answering, &last}, func() error {
		v := Lease{Owner: l.Owner, Answering: l.Answering}
		if v.Owner != "" {
			v.Expires, v.Heartbeat = finite(expires), finite(heartbeat)
			v.TakeoverBy = v.Expires.Add(c.o.RenewEvery)
		} else {
			v.Answering = false
		}
		v.LastFire = finite(last)
		out[s] = v
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fom: cluster: read leases: %w", err)
	}
	return out, nil
}

func finite(t pgtype.Timestamptz) time.Time {
	if !t.Valid || t.InfinityModifier != pgtype.Finite {
		return time.Time{}
	}
	return t.Time
}

// AllSchedules lists every schedule any instance ever registered (every
// lease row), sorted.
func (c *Coordinator) AllSchedules(ctx context.Context) ([]string, error) {
	rows, err := c.pool.Query(ctx, "SELECT schedule FROM "+c.t("leases")+" ORDER BY schedule")
	if err != nil {
		return nil, fmt.Errorf("fom: cluster: list schedules: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("fom: cluster: list schedules: %w", err)
	}
	return names, nil
}

// Claim implements schedule.Claims: the task id is claimed for this
// instance unless another live instance holds it. A claim that cannot be
// decided (the database unreachable) is refused.
func (c *Coordinator) Claim(id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), c.o.RenewEvery)
	defer cancel()
	tag, err := c.pool.Exec(ctx, "INSERT INTO "+c.t("task_claims")+` (task_id, instance, expires_at) VALUES ($1, $2, now() + $3::interval)
		ON CONFLICT (task_id) DO UPDATE SET instance = excluded.instance, expires_at = excluded.expires_at
		WHERE task_claims.expires_at < now()`, id, c.o.InstanceID, c.o.LeaseTTL)
	if err != nil {
		c.log.Warn("claiming a task id failed; counted as a conflict", zap.String("task", id), zap.Error(err))
		return false
	}
	return tag.RowsAffected() == 1
}

// Unclaim implements schedule.Claims.
func (c *Coordinator) Unclaim(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), c.o.RenewEvery)
	defer cancel()
	if _, err := c.pool.Exec(ctx, "DELETE FROM "+c.t("task_claims")+" WHERE task_id = $1 AND instance = $2", id, c.o.InstanceID); err != nil {
		c.log.Warn("giving a task id back failed; it expires instead", zap.String("task", id), zap.Error(err))
	}
}
