package statistics

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fom-go/fom/store"
	"github.com/fom-go/fom/store/sqlite"
)

// TestEveryOutcomeOfADayIsSaved records, flushes, records more and flushes
// again within one day: the store holds every outcome, not only the ones
// before the day's first flush.
func TestEveryOutcomeOfADayIsSaved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	clk := clockwork.NewFakeClockAt(day1)
	s, _ := New("job", clk, DefaultSettings())
	total := 0
	for flush := range 4 {
		for i := range 10 + flush {
			status := Success
			if i%3 == 0 {
				status = Failed
			}
			s.Record(Sample{TaskID: "t", Status: status, Cost: time.Millisecond, Err: errorIf(status == Failed)})
			total++
		}
		s.RecordLateness(time.Time{}, time.Millisecond)
		if err := s.Flush(ctx, st); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Minute)
	}
	st.Close()

	st, err = sqlite.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	again, _ := New("job", clk, DefaultSettings())
	if _, err := again.Load(ctx, st); err != nil {
		t.Fatal(err)
	}
	d := again.Day(day1)
	if d.Count != int64(total) || d.Rounds != 4 {
		t.Fatalf("after reopen: %d outcomes and %d rounds of the day, want %d and 4", d.Count, d.Rounds, total)
	}
	if fs := again.Failures(); len(fs) != int(d.ByStatus["failed"]) {
		t.Fatalf("%d failures reloaded, %d recorded", len(fs), d.ByStatus["failed"])
	}
}

func errorIf(b bool) error {
	if b {
		return errors.New("boom")
	}
	return nil
}

// failingStore fails every write until healed.
type failingStore struct {
	store.Store
	broken bool
}

func (f *failingStore) SaveStats(ctx context.Context, b store.StatsBatch) error {
	if f.broken {
		return errors.New("disk full")
	}
	return f.Store.SaveStats(ctx, b)
}

// TestAFailureBacklogIsBounded records a million rejections while the store
// fails: counts and aggregates stay exact, the failures waiting to be
// written stay at the last `failures`, the rest are counted as unsaved, and
// once the store heals one flush saves them.
func TestAFailureBacklogIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	real, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	st := &failingStore{Store: real, broken: true}
	clk := clockwork.NewFakeClockAt(day1)
	s, _ := New("job", clk, DefaultSettings())
	const n = 1_000_000
	rejected := errors.New("queue full")
	for i := range n {
		s.Record(Sample{At: day1, TaskID: fmt.Sprint(i % 10), Status: Rejected, Err: rejected})
		if i%250_000 == 0 {
			if err := s.Flush(ctx, st); err == nil {
				t.Fatal("flush to a failing store succeeded")
			}
		}
	}
	s.mu.Lock()
	pending := len(s.pending.buf)
	s.mu.Unlock()
	if pending != 100 {
		t.Fatalf("%d failures wait to be written, want the last 100", pending)
	}
	if u := s.Unsaved(); u != n-100 {
		t.Fatalf("unsaved %d, want %d", u, n-100)
	}
	if c := s.Counts()["rejected"]; c != n {
		t.Fatalf("rejected count %d, want %d", c, n)
	}
	st.broken = false
	if err := s.Flush(ctx, st); err != nil {
		t.Fatal(err)
	}
	fs, _ := real.LoadFailures(ctx, "job", 1000)
	days, _ := real.LoadDays(ctx, "job", day1)
	if len(fs) != 100 || len(days) != 1 {
		t.Fatalf("saved %d failures and %d days", len(fs), len(days))
	}
	back, _ := decodeDay(days[0].Data)
	if back.count != n || back.byStatus[Rejected] != n {
		t.Fatalf("saved day counts %d", back.count)
	}
}

// TestFailedFlushKeepsOrderAndNewerOutcomes: a flush that fails puts its
// data back ahead of what was recorded meanwhile.
func TestFailedFlushKeepsOrderAndNewerOutcomes(t *testing.T) {
	t.Parallel()
	clk := clockwork.NewFakeClockAt(day1)
	s, _ := New("job", clk, DefaultSettings())
	s.Record(Sample{TaskID: "first", Status: Failed})
	ch, err := s.Take()
	if err != nil || len(ch.Failures) != 1 || len(ch.Days) != 1 {
		t.Fatalf("take %+v %v", ch, err)
	}
	s.Record(Sample{TaskID: "second", Status: Failed})
	ch.Failed()
	again, _ := s.Take()
	if len(again.Failures) != 2 || again.Failures[0].TaskID != "first" || again.Failures[1].TaskID != "second" || len(again.Days) != 1 {
		t.Fatalf("after a failed write: %+v", again)
	}
	if empty, _ := s.Take(); !empty.Empty() {
		t.Fatalf("a third take found %+v", empty)
	}
}
