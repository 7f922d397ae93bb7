package pgcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Declarations: several instances of one app may declare one schedule
// differently (a rolling deploy is the normal case: some run the old
// code, some the new). The lease holder runs the schedule with its own
// declaration, under the operator's edits saved in the database, which
// override every instance's; the others' code is not consulted. So each
// instance records its declaration, and the differences between live
// instances are reported rather than followed silently.

// Declare records this instance's code declaration of each schedule (key
// -> code default); with replace, what it recorded of other schedules
// goes (at start), else it is kept (a schedule registered later).
func (c *Coordinator) Declare(ctx context.Context, decls map[string]map[string]string, replace bool) error {
	names := slices.Sorted(maps.Keys(decls))
	docs := make([]string, len(names))
	var buf []byte
	for i, n := range names {
		buf = appendObject(buf[:0], decls[n])
		docs[i] = string(buf)
	}
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		// Declarations of one instance are written one transaction at a
		// time, so that each digest reads what the ones before it wrote.
		// By an advisory lock, not the instance's row: at 10 000 schedules
		// the insert takes seconds under load, and the row locked that long
		// would hold back the instance's heartbeats and fire records (their
		// KEY SHARE lock waits on FOR UPDATE). The row is written last, for
		// the length of one statement and the commit.
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", "fom declarations "+c.t("instances")+" "+c.o.InstanceID); err != nil {
			return err
		}
		if replace {
			if _, err := tx.Exec(ctx, "DELETE FROM "+c.t("declarations")+" WHERE instance = $1 AND NOT (schedule = ANY($2))", c.o.InstanceID, names); err != nil {
				return err
			}
		}
		// A declaration unchanged is not written again: an instance that
		// restarts under its id (a StatefulSet's pod) rewrites none of its
		// thousands of rows.
		_, err := tx.Exec(ctx, "INSERT INTO "+c.t("declarations")+` (instance, schedule, decl)
			SELECT $1, n, d::jsonb FROM unnest($2::text[], $3::text[]) AS x(n, d)
			ON CONFLICT (instance, schedule) DO UPDATE SET decl = excluded.decl
			WHERE `+c.t("declarations")+`.decl IS DISTINCT FROM excluded.decl`, c.o.InstanceID, names, docs)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "UPDATE "+c.t("instances")+` SET decl_digest = (
				SELECT 'sha256:' || encode(sha256(convert_to(coalesce(string_agg(schedule || E'\t' || decl::text, E'\n' ORDER BY schedule), ''), 'UTF8')), 'hex')
				FROM `+c.t("declarations")+` WHERE instance = $1)
			WHERE id = $1`, c.o.InstanceID)
		return err
	})
	if err != nil {
		return fmt.Errorf("fom: cluster: record the declarations of instance %s: %w", c.o.InstanceID, err)
	}
	return nil
}

// Disagreements lists the schedules live instances declare differently.
// Every instance asks at each resync: when the live instances share one
// digest of their declarations (written by Declare), none differ and no
// declaration is read; otherwise the database picks the schedules (the
// declarations of one schedule compared as jsonb values).
func (c *Coordinator) Disagreements(ctx context.Context) ([]Disagreement, error) {
	// Live instances that share one known digest declare the same.
	var digests int
	var unknown bool
	if err := c.pool.QueryRow(ctx, `SELECT count(DISTINCT decl_digest), coalesce(bool_or(decl_digest = ''), false) FROM `+c.t("instances")+`
		WHERE NOT stopped AND heartbeat_at > now() - $1::interval`, c.o.LeaseTTL).Scan(&digests, &unknown); err != nil {
		return nil, fmt.Errorf("fom: cluster: read declarations: %w", err)
	}
	if digests <= 1 && !unknown {
		return nil, nil
	}
	rows, err := c.pool.Query(ctx, `WITH live AS (
			SELECT d.schedule, d.instance, d.decl, i.started_at
			FROM `+c.t("declarations")+` d JOIN `+c.t("instances")+` i ON i.id = d.instance
			WHERE NOT i.stopped AND i.heartbeat_at > now() - $1::interval),
		differ AS (SELECT schedule FROM live GROUP BY schedule HAVING count(DISTINCT decl) > 1)
		SELECT l.schedule, l.instance, l.decl::text, l.started_at FROM live l JOIN differ USING (schedule)
		ORDER BY l.schedule, l.instance`, c.o.LeaseTTL)
	if err != nil {
		return nil, fmt.Errorf("fom: cluster: read declarations: %w", err)
	}
	type decl struct {
		instance string
		values   map[string]string
		started  time.Time
	}
	by := map[string][]decl{}
	var sched, inst, doc string
	var started time.Time
	_, err = pgx.ForEachRow(rows, []any{&sched, &inst, &doc, &started}, func() error {
		d := decl{instance: inst, started: started}
		if err := json.Unmarshal([]byte(doc), &d.values); err != nil {
			return fmt.Errorf("declaration of %s by %s: %w", sched, inst, err)
		}
		by[sched] = append(by[sched], d)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fom: cluster: read declarations: %w", err)
	}
	var out []Disagreement
	for _, s := range slices.Sorted(maps.Keys(by)) {
		ds := by[s]
		keys := map[string]bool{}
		for _, d := range ds[1:] {
			for k := range mergedKeys(ds[0].values, d.values) {
				if ds[0].values[k] != d.values[k] {
					keys[k] = true
				}
			}
		}
		if len(keys) == 0 {
			continue
		}
		dis := Disagreement{Schedule: s, Keys: slices.Sorted(maps.Keys(keys))}
		var newest time.Time
		for _, d := range ds {
			if d.started.After(newest) {
				newest = d.started
			}
		}
		for _, d := range ds {
			vals := map[string]string{}
			for _, k := range dis.Keys {
				vals[k] = d.values[k]
			}
			i := slices.IndexFunc(dis.Variants, func(v Variant) bool { return maps.Equal(v.Values, vals) })
			if i < 0 {
				dis.Variants = append(dis.Variants, Variant{Values: vals})
				i = len(dis.Variants) - 1
			}
			dis.Variants[i].Instances = append(dis.Variants[i].Instances, d.instance)
			dis.Variants[i].Newest = dis.Variants[i].Newest || d.started.Equal(newest)
		}
		slices.SortStableFunc(dis.Variants, func(a, b Variant) int {
			switch {
			case a.Newest && !b.Newest:
				return -1
			case b.Newest && !a.Newest:
				return 1
			}
			return 0
		})
		out = append(out, dis)
	}
	return out, nil
}

func mergedKeys(a, b map[string]string) map[string]bool {
	out := make(map[string]bool, len(a))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// appendObject appends m as a JSON object. Declarations are written by
// every instance at its start, one a schedule: encoding/json took 110 ms
// of a 10 000-schedule instance's start, on the CPUs its peers' fires
// share. The database stores them as jsonb, which orders the keys itself
// and keeps no escapes, so neither the keys' order here nor how a string
// is escaped matters, only that it is valid JSON.
func appendObject(dst []byte, m map[string]string) []byte {
	dst = append(dst, '{')
	first := true
	for k, v := range m {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendString(dst, k)
		dst = append(dst, ':')
		dst = appendString(dst, v)
	}
	return append(dst, '}')
}

// appendString appends s as a JSON string: as it is when it is printable
// ASCII without a quote or a backslash, else as encoding/json writes it.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			b, _ := json.Marshal(s) // a string always encodes
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
