package sqlite

import (
	"context"
	"testing"

	"github.com/fom-go/fom/store"
	"github.com/fom-go/fom/store/storetest"
)

func TestStoreSuite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Open(context.Background(), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
