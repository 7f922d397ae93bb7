package pgcluster_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fom-go/fom/cluster/pgcluster"
	"github.com/fom-go/fom/internal/pgtest"
)

// TestResyncOnlyWhenANotificationMayBeLost: the full re-read of what
// others changed runs at the first tick after the listening connection is
// established, not at every tick while it is heard, and again at the first
// tick after that connection is lost and re-established.
func TestResyncOnlyWhenANotificationMayBeLost(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	var resyncs atomic.Int64
	c := coordinator(t, schema, "e1", nil, pgcluster.Options{
		Channel: "fom_resync_" + schema, Notified: func(string) {},
		RenewEvery: 100 * time.Millisecond, LeaseTTL: time.Second,
		Resync: func(context.Context) { resyncs.Add(1) },
	}, "s")
	start(t, c)
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 10s (%d resyncs)", what, resyncs.Load())
			}
		}
	}
	waitFor("listening and a resync", func() bool { return c.Listening() && resyncs.Load() >= 1 })
	// Past the tick that may have run before the connection listened.
	time.Sleep(300 * time.Millisecond)
	base := resyncs.Load()
	time.Sleep(time.Second) // ten ticks
	if n := resyncs.Load() - base; n != 0 {
		t.Fatalf("%d resyncs in ten ticks while notifications were heard", n)
	}
	// The listening connection is cut: what changed meanwhile may be lost.
	if _, err := pool.Exec(context.Background(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN %' AND query LIKE '%fom_resync_"+schema+"%'"); err != nil {
		t.Fatal(err)
	}
	waitFor("a resync after the listening connection was cut", func() bool { return resyncs.Load() > base })
	waitFor("listening again", c.Listening)
}
