package pgcluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fom-go/fom/cluster/pgcluster"
	"github.com/fom-go/fom/internal/pgtest"
)

// TestADeclarationUnchangedIsNotWrittenAgain: an instance that declares
// again (a restart under its id) rewrites only the declarations that
// changed.
func TestADeclarationUnchangedIsNotWrittenAgain(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	a := coordinator(t, schema, "a", nil, pgcluster.Options{LeaseTTL: time.Minute}, "s", "u")
	versions := func() map[string]string {
		t.Helper()
		rows, err := pool.Query(ctx, "SELECT schedule, xmin::text FROM "+pgx.Identifier{schema}.Sanitize()+".declarations WHERE instance = 'a'")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		var s, x string
		if _, err := pgx.ForEachRow(rows, []any{&s, &x}, func() error { out[s] = x; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if err := a.Declare(ctx, map[string]map[string]string{"s": {"cron": "* * * * * *"}, "u": {"size": "10"}}, true); err != nil {
		t.Fatal(err)
	}
	before := versions()
	if err := a.Declare(ctx, map[string]map[string]string{"s": {"cron": "* * * * * *"}, "u": {"size": "20"}}, true); err != nil {
		t.Fatal(err)
	}
	after := versions()
	if after["s"] != before["s"] {
		t.Errorf("s, declared the same, was written again (xmin %s, then %s)", before["s"], after["s"])
	}
	if after["u"] == before["u"] {
		t.Errorf("u, declared anew, was not written (xmin %s)", after["u"])
	}
}
