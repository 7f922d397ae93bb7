package fom

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"

	"github.com/fom-go/fom/internal/pgtest"
	"github.com/fom-go/fom/store"
	"github.com/fom-go/fom/store/postgres"
)

// TestAppOnPostgres: an App on the PostgreSQL store keeps config edits,
// log levels and statistics across a restart, as on SQLite.
func TestAppOnPostgres(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	run := func(check func(app *App, sc *ScheduleContext)) {
		st, err := postgres.Open(ctx, pgtest.DSN(), postgres.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		app, err := New(WithStore(st))
		if err != nil {
			t.Fatal(err)
		}
		sc, err := app.Register(&runJob{})
		if err != nil {
			t.Fatal(err)
		}
		check(app, sc)
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := app.Stop(sctx); err != nil {
			t.Fatal(err)
		}
	}
	run(func(_ *App, sc *ScheduleContext) {
		if err := sc.Config().Apply(map[string]string{"threadMax": "3", "remark": "on postgres"}); err != nil {
			t.Fatal(err)
		}
		b, err := sc.Submit(ctx, TaskFunc("t", func(context.Context) (any, error) { return nil, nil }))
		if err != nil {
			t.Fatal(err)
		}
		b.Wait(ctx)
	})
	run(func(app *App, sc *ScheduleContext) {
		if sc.Config().Get("threadMax") != "3" || sc.Config().Get("remark") != "on postgres" {
			t.Fatalf("edits lost: %v", sc.Config().Values())
		}
		// A restarted process is a new instance (its id is new): the
		// history is the cluster's, which the page and API show.
		days, err := app.ClusterDays(ctx, sc.Name())
		if err != nil {
			t.Fatal(err)
		}
		if n := days[len(days)-1].Count; n != 1 {
			t.Fatalf("today's outcomes after restart: %d, want 1", n)
		}
	})
}

// TestModuleNeedsPgfxForADatabaseURL: fom.Config{DatabaseURL} without a
// store in the graph is refused, naming the module that opens it (package
// fom links no PostgreSQL; store/postgres/pgfx's test runs the module).
func TestModuleNeedsPgfxForADatabaseURL(t *testing.T) {
	t.Parallel()
	err := fx.New(fx.NopLogger, Module, fx.Supply(Config{DatabaseURL: "postgres://x@127.0.0.1:1/none"}), fx.Invoke(func(*App) {})).Err()
	if err == nil || !strings.Contains(err.Error(), "add pgfx.Module") {
		t.Fatalf("got %v", err)
	}
}

// TestAppsSharingAStorePruneByAgeOnce: of two Apps with the same
// schedules on one PostgreSQL schema, the first flush prunes by age for
// both; the other's first flush leaves it, and does not ask again at its
// next.
func TestAppsSharingAStorePruneByAgeOnce(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	newApp := func() (*App, *postgres.Store) {
		st, err := postgres.Open(ctx, pgtest.DSN(), postgres.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		app, err := New(WithStore(st), WithFlushInterval(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := app.Register(&runJob{}, Named("shared")); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			app.Stop(ctx)
			st.Close()
		})
		return app, st
	}
	a, st := newApp()
	b, _ := newApp()
	old := time.Now().UTC().Truncate(24*time.Hour).AddDate(-1, 0, 0)
	plant := func() {
		t.Helper()
		if err := st.SaveStats(ctx, store.StatsBatch{Days: []store.Day{{Schedule: "shared", Day: old, Data: []byte{1}}}}); err != nil {
			t.Fatal(err)
		}
	}
	left := func() bool {
		t.Helper()
		days, err := st.LoadDays(ctx, "shared", old)
		if err != nil {
			t.Fatal(err)
		}
		return len(days) > 0 && days[0].Day.Equal(old)
	}
	plant()
	if err := a.FlushStats(ctx); err != nil || left() {
		t.Fatalf("the first App's flush: %v; a year-old day left: %v", err, left())
	}
	plant()
	if err := b.FlushStats(ctx); err != nil || !left() {
		t.Fatalf("the second App's flush: %v; it pruned again: %v", err, !left())
	}
	// Its next flush within the hour does not ask.
	if _, err := pool.Exec(ctx, "UPDATE "+schema+".meta SET value = '0' WHERE key LIKE 'retention pruned %'"); err != nil {
		t.Fatal(err)
	}
	if err := b.FlushStats(ctx); err != nil || !left() {
		t.Fatalf("the second App's next flush: %v; it pruned: %v", err, !left())
	}
}
