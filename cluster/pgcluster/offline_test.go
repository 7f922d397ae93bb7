package pgcluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// offline is a started coordinator that holds the leases of names in
// term 1 and never reaches a database: its slots are not armed (holding),
// so a test records them itself.
func offline(tb testing.TB, names ...string) *Coordinator {
	tb.Helper()
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/none") // never connected
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	c, err := New(pool, "offline", Options{InstanceID: "a"})
	if err != nil {
		tb.Fatal(err)
	}
	for _, s := range names {
		c.owned[s] = 1
	}
	c.stop = make(chan struct{})
	c.holding = true
	c.trustUntil = time.Now().Add(time.Hour)
	return c
}

// TestAHeraldAnAdmitWaitsForIsNotRewritten: an Admit waiting for a fire
// announced and not yet recorded holds its herald; the schedule's next
// announcement drops that fire (Admit records it when due) and must leave
// the new fire's herald alone, rather than rewrite the one the waiter
// holds, which the waiter would then find unrecorded and delete.
func TestAHeraldAnAdmitWaitsForIsNotRewritten(t *testing.T) {
	c := offline(t, "s")
	first := time.Now().Truncate(time.Second).Add(time.Hour)
	c.Announce("s", first)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	waiting := make(chan error, 1)
	go func() {
		_, err := c.Admit(ctx, "s", first) // waits, then is sent to the (absent) record loop
		waiting <- err
	}()
	for {
		c.mu.Lock()
		w := c.heralds["s"].waiters
		c.mu.Unlock()
		if w == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	c.Announce("s", first.Add(time.Second))
	select {
	case a := <-c.admits: // the dropped fire, to be recorded when due
		if !a.planned.Equal(first) {
			t.Errorf("recorded when due: %s, want %s", a.planned, first)
		}
		a.reply <- verdict{ok: true}
	case <-ctx.Done():
		t.Fatal("the dropped fire was not sent to be recorded")
	}
	if err := <-waiting; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.heralds["s"]
	if h == nil || !h.planned.Equal(first.Add(time.Second)) || h.state != announced {
		t.Fatalf("the next fire's herald: %+v, want announced for %s", h, first.Add(time.Second))
	}
}
