// Package pgfx puts an fx application's fom.App on PostgreSQL: with
// Module in the graph, fom.Config's DatabaseURL and DatabaseSchema open
// the PostgreSQL store, closed after the App stops. It is apart from
// package fom so that an App on the embedded store links no PostgreSQL.
package pgfx

import (
	"context"

	"go.uber.org/fx"

	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/internal/fxconfig"
	"github.com/fom-go/fom/store"
	"github.com/fom-go/fom/store/postgres"
)

// Module provides the store fom.Module's App runs on: PostgreSQL when
// fom.Config has a DatabaseURL, else none (the embedded store).
var Module = fx.Module("fom-postgres", fx.Provide(newStore))

type params struct {
	fx.In
	Lifecycle   fx.Lifecycle
	Config      *fom.Config `optional:"true"`
	ConfigValue fom.Config  `optional:"true"`
}

func newStore(p params) (store.Store, error) {
	cfg, err := fxconfig.One(p.Config, p.ConfigValue)
	if err != nil || cfg.DatabaseURL == "" {
		return nil, err
	}
	var opts []postgres.Option
	if cfg.DatabaseSchema != "" {
		opts = append(opts, postgres.WithSchema(cfg.DatabaseSchema))
	}
	st, err := postgres.Open(context.Background(), cfg.DatabaseURL, opts...)
	if err != nil {
		return nil, err
	}
	// Appended before the App's hooks (the App needs the store), so run
	// after the App stopped.
	p.Lifecycle.Append(fx.Hook{OnStop: func(context.Context) error { return st.Close() }})
	return st, nil
}
