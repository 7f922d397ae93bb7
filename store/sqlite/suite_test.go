package sqlite

import (
	"context"
	"fmt"
	"testing"

	"github.com/fom-go/fom/store"
	"github.com/fom-go/fom/store/storetest"
)

// TestStoreSuite runs the store suite with the statistics log as an app
// has it, with a log of one flush (every flush pushes the one before out
// to the tables) and with none (every flush writes the tables).
func TestStoreSuite(t *testing.T) {
	t.Parallel()
	for _, keep := range []int{logKeep, 1, 0} {
		t.Run(fmt.Sprintf("log%d", keep), func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, func(t *testing.T) store.Store {
				s, err := Open(context.Background(), t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				s.log.keep = keep
				return s
			})
		})
	}
}
