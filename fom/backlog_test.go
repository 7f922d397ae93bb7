package fom

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fom-go/fom/statistics"
	"github.com/fom-go/fom/store"
	"github.com/fom-go/fom/store/sqlite"
)

// TestSecondAppOnOneDataDirIsRefused: two processes (here two Apps) on one
// data directory would both run every job; the second gets a clear error
// naming the directory and the holder, and starts once the first stopped.
func TestSecondAppOnOneDataDirIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := newTestApp(t, WithDataDir(dir))
	if _, err := first.Register(&runJob{}); err != nil {
		t.Fatal(err)
	}
	// Said once, by New: not as the failure of the first Register.
	_, err := New(WithDataDir(dir))
	if !errors.Is(err, store.ErrInUse) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "pid ") || strings.Contains(err.Error(), "register") {
		t.Fatalf("second app: %v", err)
	}
	if err := first.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	second, err := New(WithDataDir(dir))
	if err != nil {
		t.Fatalf("after the first stopped: %v", err)
	}
	if _, err := second.Register(&runJob{}); err != nil {
		t.Fatalf("after the first stopped: %v", err)
	}
	second.Stop(context.Background())
}

// floodJob submits far more tasks in one round than its queue holds.
type floodJob struct {
	Schedule `name:"flood" execOnLoad:"true" fixedRate:"1h" queueSize:"256"`
	n        int
	done     chan Round
}

func (j *floodJob) Tasks(context.Context) ([]Task, error) {
	t := TaskFunc("flood.t", func(context.Context) (any, error) { return nil, nil })
	ts := make([]Task, j.n)
	for i := range ts {
		ts[i] = t
	}
	return ts, nil
}

func (j *floodJob) OnComplete(_ context.Context, r Round) {
	j.done <- Round{Number: r.Number, Results: r.Results[:1]}
}

// TestARoundOfAMillionRejectionsIsSaved: a round whose queue rejects nearly
// every task completes, Stop succeeds, and the statistics are in the store:
// exact counts, and the failures the store keeps.
func TestARoundOfAMillionRejectionsIsSaved(t *testing.T) {
	t.Parallel()
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	dir := t.TempDir()
	app, err := New(WithDataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	job := &floodJob{n: n, done: make(chan Round, 1)}
	sc, err := app.Register(job)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-job.done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the round did not complete")
	}
	counts := sc.Stats().Counts()
	if counts["success"]+counts["rejected"] != int64(n) || counts["rejected"] < int64(n)-300 {
		t.Fatalf("counts %v", counts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	days, _ := st.LoadDays(context.Background(), "flood", time.Now().AddDate(0, 0, -1))
	fs, _ := st.LoadFailures(context.Background(), "flood", 1000)
	if len(days) != 1 || len(fs) != 100 {
		t.Fatalf("stored %d days and %d failures, want 1 and the last 100", len(days), len(fs))
	}
	// Each flush during the round saved the last 100 of its failures; the
	// others are counted as unsaved, never kept in memory.
	if u := sc.Stats().Unsaved(); u <= 0 || u > counts["rejected"]-100 {
		t.Fatalf("unsaved %d of %d rejections", u, counts["rejected"])
	}
}

type expiredJob struct {
	Schedule `name:"expired" fixedRate:"1h" deadTime:"2020-01-01T00:00:00Z"`
}

func (*expiredJob) Run(context.Context) (any, error) { return nil, nil }

// A deadTime already past is not a failed start: the App starts, the
// schedule stays STOPPED with the reason, and an explicit start is
// refused with an error naming the schedule and the time.
func TestDeadTimeAlreadyPastLeavesTheScheduleStopped(t *testing.T) {
	t.Parallel()
	app := newTestApp(t)
	sc, err := app.Register(&expiredJob{})
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	i := sc.Info()
	if i.State != Stopped || i.StopReason != "deadTime 2020-01-01T00:00:00Z passed" {
		t.Fatalf("state %s, reason %q", i.State, i.StopReason)
	}
	err = sc.Startup()
	if !errors.Is(err, ErrPastDeadTime) || !strings.Contains(err.Error(), "schedule expired is past its deadTime 2020-01-01T00:00:00Z") {
		t.Fatalf("startup: %v", err)
	}
	// Registered into a running app: the same, and the app goes on.
	sc2, err := app.Register(&expiredCronJob{})
	if err != nil || sc2.State() != Stopped {
		t.Fatalf("register while running: %v, state %v", err, sc2.State())
	}
}

type expiredCronJob struct {
	Schedule `name:"expired2" cron:"@hourly" deadTime:"2021-01-01T00:00:00Z"`
}

func (*expiredCronJob) Run(context.Context) (any, error) { return nil, nil }

// flushRecorder is a store that notes the flush number of every batch.
type flushRecorder struct {
	store.Store
	mu      sync.Mutex
	flushes []uint64
}

func (r *flushRecorder) SaveStats(ctx context.Context, b store.StatsBatch) error {
	r.mu.Lock()
	r.flushes = append(r.flushes, b.Flush)
	r.mu.Unlock()
	return r.Store.SaveStats(ctx, b)
}

// TestAFlushInBatchesNumbersThemAsOne: a flush too large for one
// transaction is written in several batches, which carry the same flush
// number, and the next flush's another, so that the SQLite store's log
// keeps a lap of flushes whatever their size.
func TestAFlushInBatchesNumbersThemAsOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec := &flushRecorder{Store: st}
	app := newTestApp(t, WithStore(rec))
	app.flushRows = 2 // a day row each: five schedules in three batches
	var scs []*ScheduleContext
	for i := range 5 {
		sc, err := app.Register(&runJob{}, Named(fmt.Sprintf("batched-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		scs = append(scs, sc)
	}
	for range 2 {
		for _, sc := range scs {
			sc.Stats().Record(statistics.Sample{TaskID: "t", Status: statistics.Success})
		}
		if err := app.FlushStats(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.flushes) != 6 || rec.flushes[0] == 0 || rec.flushes[0] != rec.flushes[2] || rec.flushes[3] != rec.flushes[5] || rec.flushes[3] == rec.flushes[0] {
		t.Fatalf("batches' flush numbers %v, want three of one flush, then three of the next", rec.flushes)
	}
}

// gateJob fires at start and runs until its gate opens.
type gateJob struct {
	Schedule `execOnLoad:"true" fixedRate:"1h"`
	gate     chan struct{}
}

func (j *gateJob) Run(ctx context.Context) (any, error) {
	select {
	case <-j.gate:
	case <-ctx.Done():
	}
	return nil, nil
}

// TestAFlushGivesWayToWaitingRounds: while rounds wait for a runner, a
// flush pauses before taking the schedules' statistics, and goes on once
// they ran; with rounds waiting longer than its bound, it goes on anyway.
func TestAFlushGivesWayToWaitingRounds(t *testing.T) {
	t.Parallel()
	clk := clockwork.NewFakeClockAt(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	app := newTestApp(t, WithClock(clk), WithFlushInterval(time.Hour))
	gate := make(chan struct{})
	// More schedules than the runners run at once: the rest queue.
	for i := range 6 * len(app.runners) {
		if _, err := app.Register(&gateJob{gate: gate}, Named(fmt.Sprintf("gate-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "rounds queued behind the running ones", app.roundsQueued)

	yielding := make(chan struct{}, 1)
	app.yielding = func() {
		select {
		case yielding <- struct{}{}:
		default:
		}
	}
	done := make(chan error, 1)
	go func() { done <- app.FlushStats(context.Background()) }()
	select {
	case <-yielding:
	case err := <-done:
		t.Fatalf("the flush did not give way to waiting rounds (%v)", err)
	}
	select {
	case err := <-done:
		t.Fatalf("the flush went on while rounds waited (%v)", err)
	default:
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if app.roundsQueued() {
		t.Fatal("the flush ended before the waiting rounds ran")
	}
}

// TestAFlushGivesWayForAWhileOnly: rounds that keep waiting hold a flush
// up to its bound, no longer.
func TestAFlushGivesWayForAWhileOnly(t *testing.T) {
	t.Parallel()
	steps := 0
	start := time.Now()
	yieldWhile(func() bool { return true }, start.Add(20*time.Millisecond), func() { steps++ })
	if waited := time.Since(start); waited < 20*time.Millisecond || steps == 0 {
		t.Fatalf("gave way %v in %d steps, want 20ms", waited, steps)
	}
	steps = 0
	yieldWhile(func() bool { return false }, time.Now().Add(time.Hour), func() { steps++ })
	if steps != 0 {
		t.Fatalf("gave way %d steps to nothing", steps)
	}
}

// waitFor waits, in real time, until cond holds, failing after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no %s after 10 s", what)
		}
	}
}

// TestAFlushTakesIntoSlotsForTheSchedulesWithChanges: a flush takes the
// schedules' changes into slots kept from the last flush, a slot for each
// schedule with changes in the transaction being built (not one for every
// schedule); a flush using fewer drops the blocks it did not use, and the
// slots keep no data between flushes.
func TestAFlushTakesIntoSlotsForTheSchedulesWithChanges(t *testing.T) {
	t.Parallel()
	clk := clockwork.NewFakeClockAt(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	app := newTestApp(t, WithClock(clk), WithFlushInterval(time.Hour))
	n := changeBlock + changeBlock/2
	var scs []*ScheduleContext
	for i := range n {
		sc, err := app.Register(&runJob{}, Named(fmt.Sprintf("run-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		scs = append(scs, sc)
	}
	ctx := context.Background()
	record := func(scs ...*ScheduleContext) {
		for _, sc := range scs {
			sc.Stats().Record(statistics.Sample{At: clk.Now(), TaskID: "t", Status: statistics.Success})
		}
	}
	flush := func(wantBlocks int) {
		t.Helper()
		if err := app.FlushStats(ctx); err != nil {
			t.Fatal(err)
		}
		app.flushMu.Lock()
		defer app.flushMu.Unlock()
		s := &app.flushSlots
		if len(s.blocks) != wantBlocks || s.used != 0 {
			t.Fatalf("after the flush: %d blocks of slots, %d used; want %d, 0", len(s.blocks), s.used, wantBlocks)
		}
		for _, b := range s.blocks {
			for i := range b {
				if !b[i].Empty() || b[i].Days != nil || b[i].Failures != nil || b[i].Rounds != nil {
					t.Fatalf("slot %d holds changes after the flush: %+v", i, b[i])
				}
			}
		}
	}
	data := map[string][]byte{} // each schedule's day, as last stored
	stored := func(scs ...*ScheduleContext) {
		t.Helper()
		for _, sc := range scs {
			days, err := app.st.LoadDays(ctx, sc.Name(), clk.Now())
			if err != nil || len(days) != 1 || bytes.Equal(days[0].Data, data[sc.Name()]) {
				t.Fatalf("%s's day after the flush: %+v %v; it was %x", sc.Name(), days, err, data[sc.Name()])
			}
			data[sc.Name()] = days[0].Data
		}
	}
	flush(0) // nothing changed: no slot
	record(scs[3], scs[n-1])
	flush(1)
	stored(scs[3], scs[n-1])
	app.flushMu.Lock()
	first := &app.flushSlots.blocks[0][0]
	app.flushMu.Unlock()
	record(scs...)
	flush(2)
	stored(scs...)
	app.flushMu.Lock()
	again := &app.flushSlots.blocks[0][0]
	app.flushMu.Unlock()
	if again != first {
		t.Fatal("the flush did not take into the slots the last one left")
	}
	record(scs[7])
	flush(1) // the second block, unused, dropped
	// Transactions of two rows: the slots of each are taken again by the
	// next, so a block is enough for every schedule.
	app.flushMu.Lock()
	app.flushRows = 2
	app.flushMu.Unlock()
	record(scs...)
	flush(1)
	stored(scs...)
}

// TestAClusteredAppsBulkWritesWaitForACalmPart: a clustered App's bulk
// write (its declarations at start, its last flush at stop), due near a
// whole second or too long to end before the next, waits for the calm
// part of a second; due where it fits, or once the caller's context
// ends, it waits no more.
func TestAClusteredAppsBulkWritesWaitForACalmPart(t *testing.T) {
	t.Parallel()
	clk := clockwork.NewFakeClockAt(time.Date(2026, 3, 2, 10, 0, 0, 900_000_000, time.UTC))
	app := newTestApp(t, WithClock(clk))
	done := make(chan struct{})
	go func() {
		app.awaitCalm(context.Background(), 10*bulkPerSchedule)
		close(done)
	}()
	if err := clk.BlockUntilContext(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(199 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("a write due at 10:00:00.9 went before the calm part of the next second")
	case <-time.After(20 * time.Millisecond):
	}
	clk.Advance(time.Millisecond)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the write still waits at 10:00:01.1")
	}

	// Where it fits: at once.
	clk.Advance(time.Millisecond) // 10:00:01.101
	app.awaitCalm(context.Background(), 10_000*bulkPerSchedule)

	// Where 10 000 schedules' write would run into the next burst, its
	// context ended: at once.
	clk.Advance(400 * time.Millisecond) // 10:00:01.501
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	app.awaitCalm(ctx, 10_000*bulkPerSchedule)
}
