package pgfx_test

import (
	"context"
	"testing"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"

	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/internal/pgtest"
	"github.com/fom-go/fom/store/postgres"
	"github.com/fom-go/fom/store/postgres/pgfx"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type runJob struct {
	fom.Schedule `fixedRate:"1m"`
}

func (*runJob) Run(context.Context) (any, error) { return nil, nil }

// fom.Config{DatabaseURL} with pgfx.Module puts the fx app on PostgreSQL,
// and the store is closed after the App stopped.
func TestModuleSelectsPostgresByDatabaseURL(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	var app *fom.App
	fxApp := fxtest.New(t, fx.NopLogger, fom.Module, pgfx.Module,
		fx.Supply(fom.Config{DatabaseURL: pgtest.DSN(), DatabaseSchema: schema}),
		fom.Job(func() *runJob { return &runJob{} }), fx.Populate(&app))
	fxApp.RequireStart()
	st, err := app.Store()
	if err != nil {
		t.Fatal(err)
	}
	if pg, ok := st.(*postgres.Store); !ok || pg.Schema() != schema {
		t.Fatalf("store %T", st)
	}
	if _, ok, _ := app.Leases(context.Background(), []string{"runJob"}); !ok {
		t.Fatal("the App on PostgreSQL is not one of a cluster")
	}
	fxApp.RequireStop()
}

// Without a DatabaseURL the module provides no store: the embedded one.
func TestModuleWithoutADatabaseURLLeavesTheEmbeddedStore(t *testing.T) {
	var app *fom.App
	fxApp := fxtest.New(t, fx.NopLogger, fom.Module, pgfx.Module,
		fx.Supply(fom.Config{DataDir: t.TempDir()}), fx.Populate(&app))
	fxApp.RequireStart()
	if st, _ := app.Store(); st == nil {
		t.Fatal("no store")
	} else if _, ok := st.(*postgres.Store); ok {
		t.Fatal("on PostgreSQL without a DatabaseURL")
	}
	fxApp.RequireStop()
}
