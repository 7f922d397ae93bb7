package statistics

import (
	"context"
	"testing"
	"time"

	"github.com/fom-go/fom/store"
	"github.com/fom-go/fom/store/sqlite"
)

// openStore opens the SQLite store in dir for a test.
func openStore(t *testing.T, dir string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func storeBatch(schedule string, d time.Time, data []byte) store.StatsBatch {
	return store.StatsBatch{Days: []store.Day{{Schedule: schedule, Day: d, Data: data}}}
}
