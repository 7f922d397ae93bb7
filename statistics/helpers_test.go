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

// restart flushes s to st, closes st and opens dir's store again, as a
// process that stops and another that starts on the same data directory.
func restart(t *testing.T, s *Stats, st *sqlite.Store, dir string) *sqlite.Store {
	t.Helper()
	if err := s.Flush(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	st.Close()
	return openStore(t, dir)
}

func storeBatch(schedule string, d time.Time, data []byte) store.StatsBatch {
	return store.StatsBatch{Days: []store.Day{{Schedule: schedule, Day: d, Data: data}}}
}
