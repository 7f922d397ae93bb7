package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fom-go/fom/internal/pgbulk"
	"github.com/fom-go/fom/internal/pgtest"
	"github.com/fom-go/fom/store"
)

// TestFireBatchesLookFiresUpByKey: statistics taken while every fire was
// unclaimed, then every fire claimed by one owner (a burst): the
// statement that records a batch's outcomes and begins the next, sent as
// the fire path sends it, looks each fire up by its key rather than
// scanning the table for each (which took 40 s a batch at 100 000 fires
// under a custom plan).
func TestFireBatchesLookFiresUpByKey(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	s, err := Open(ctx, pgtest.DSN(), WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n, due = 5000, int64(1_000_000)
	var ts []store.Timer
	for i := range n {
		ts = append(ts, store.Timer{ID: fmt.Sprintf("t%05d", i), Namespace: "b", Name: fmt.Sprintf("n%d", i), Kind: "k", At: due, Payload: []byte("null"), Enabled: true, Version: 1, First: due})
	}
	if err := s.InsertTimers(ctx, ts); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "ANALYZE "+s.t("timers")+", "+s.t("timer_fires")); err != nil {
		t.Fatal(err)
	}
	var claimed []store.Claimed
	var key store.FireKey
	for {
		cs, next, err := s.ClaimFires(ctx, "me", key, due, due-1000, 30000, 1000)
		if err != nil {
			t.Fatal(err)
		}
		key = next
		claimed = append(claimed, cs...)
		if len(cs) < 1000 {
			break
		}
	}
	if len(claimed) != n {
		t.Fatalf("claimed %d of %d", len(claimed), n)
	}
	// The fire path's statements run under generic plans.
	var mode string
	if err := s.fireBatch(ctx, "SELECT current_setting('plan_cache_mode')", nil, func(rows pgx.Rows) error {
		for rows.Next() {
			if err := rows.Scan(&mode); err != nil {
				return err
			}
		}
		return rows.Err()
	}); err != nil || mode != "force_generic_plan" {
		t.Fatalf("a fire batch runs with plan_cache_mode %q (%v)", mode, err)
	}
	// The statement's generic plan.
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// Two outcomes differing in every field: each is sent as an array
	// ($1 to $9), as a batch's are.
	var b pgbulk.Batch
	o := outcomeCols(&b, []store.Outcome{{FireRef: store.FireRef{TimerID: "a", Planned: 1}, Attempt: 1, State: "succeeded"},
		{FireRef: store.FireRef{TimerID: "b", Planned: 2}, Attempt: 2, State: "retry", DueAt: 3, Started: 4, Finished: 5, Error: "x", StatusCode: 500}})
	own := b.Arg("me")
	sql := `WITH ` + s.finishCTE(o, own) + `, s AS (` + s.startUpdate(b.Arg(nil), b.Arg(nil), b.Arg(nil), b.Arg(nil), own, b.Arg(nil)) + `) SELECT * FROM s`
	if len(b.Args) != 15 || own != "$10" {
		t.Fatalf("the statement has %d parameters, its owner %s; the plan below reads 15, the owner $10", len(b.Args), own)
	}
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "PREPARE step AS "+sql); err != nil {
		t.Fatal(err)
	}
	// A generic plan does not depend on the values.
	rows, err := tx.Query(ctx, `EXPLAIN EXECUTE step(ARRAY['t00001'], ARRAY[1000000::bigint], ARRAY['succeeded'], ARRAY[1], ARRAY[0::bigint], ARRAY[''],
		ARRAY[0::bigint], ARRAY[0::bigint], ARRAY[0], 'me', ARRAY['t00002'], ARRAY[1000000::bigint], 1000000, 30000, 30000)`)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var l string
		rows.Scan(&l)
		plan = append(plan, l)
	}
	rows.Close()
	text := strings.Join(plan, "\n")
	if strings.Contains(text, "Seq Scan on timer_fires") || !strings.Contains(text, "timer_fires_pkey") {
		t.Fatalf("a batch's fires are not looked up by key:\n%s", text)
	}
}
