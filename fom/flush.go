package fom

// Statistics persistence: the flush loop and what one flush writes.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/fom-go/fom/internal/clockx"
	"github.com/fom-go/fom/statistics"
	"github.com/fom-go/fom/store"
)

// Statistics persistence. A flush takes every schedule's changes (bounded:
// changed days plus at most the last `failures` failures of each) and
// writes them in transactions of at most flushRows rows, each with its
// own deadline, so a backlog is written in pieces and one slow piece does
// not starve the rest. Retention by age is applied for every schedule in
// one transaction at most once per pruneInterval; a schedule that wrote
// failures has them cut to its count in the same flush, so a failure storm
// cannot grow the table between two prunes.
const (
	flushInterval = 5 * time.Second // how often statistics are written
	flushRows     = 20000           // rows per transaction
	pruneInterval = time.Hour
)

// A flush gives way to rounds: while rounds wait for a runner (schedules
// due together, more than the runners run at once), it pauses between
// schedules, up to flushYield in all. A flush of ten thousand schedules
// is tens of milliseconds of one core, and, landing on their whole-second
// burst, it took that core from the burst: the burst's p99 lateness
// doubled, or not, by the phase of the flush against the second. The
// pause is in real time: it shares the processor, it does not time
// anything the clock drives.
const (
	flushYield     = time.Second
	flushYieldStep = 200 * time.Microsecond
	yieldEvery     = 64 // schedules taken between two looks at the runners
)

// flushEvery is how often statistics are written.
func (a *App) flushEvery() time.Duration {
	if a.o.flushEvery > 0 {
		return a.o.flushEvery
	}
	return flushInterval
}

// flushLoop writes statistics at first, then every flush interval after
// it, until stop is closed. Each flush falls between two whole seconds
// (clockx.OffBeat): with thousands of schedules a flush takes the CPUs
// for tens of milliseconds, which an aligned burst of cron fires would
// share.
func (a *App) flushLoop(first time.Time, stop, done chan struct{}) {
	defer close(done)
	next := first
	for {
		t := clockx.TimerAt(a.o.clock, next)
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.Chan():
			if err := a.flush(context.Background(), a.flushEvery()); err != nil {
				a.log.Warn("statistics flush failed; will retry", zap.Error(err))
			}
			// From the instant it was due, not from the end of the
			// flush: the period does not drift.
			next = clockx.OffBeat(next, a.flushEvery())
			if now := a.o.clock.Now(); next.Before(now) {
				next = clockx.OffBeat(now, a.flushEvery())
			}
		}
	}
}

// FlushStats writes every schedule's statistics to the store now, as the
// app does every 5 s and at Stop.
func (a *App) FlushStats(ctx context.Context) error {
	return a.flush(ctx, flushInterval)
}

// flush writes every schedule's pending statistics, each transaction
// within per; what fails to be written is kept for the next flush.
func (a *App) flush(ctx context.Context, per time.Duration) error {
	a.flushMu.Lock()
	defer a.flushMu.Unlock()
	a.mu.Lock()
	st := a.st
	scs := append([]*ScheduleContext(nil), a.schedules...)
	a.mu.Unlock()
	if st == nil {
		return nil
	}
	var errs []error
	chunk, batch := a.flushChunk[:0], a.flushBatch
	a.flushes++
	batch.Flush = a.flushes
	slots := &a.flushSlots
	defer slots.done()
	var byCount []store.Retention // schedules that wrote failures
	yieldUntil := time.Now().Add(flushYield)
	write := func() {
		if len(chunk) == 0 {
			return
		}
		a.yieldToRounds(yieldUntil)
		wctx, cancel := context.WithTimeout(ctx, per)
		err := st.SaveStats(wctx, batch)
		cancel()
		for _, ch := range chunk {
			if err != nil {
				ch.Failed()
			} else {
				ch.Done()
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("save statistics of %d schedules: %w", len(chunk), err))
		}
		// Emptied, not dropped, for the next chunk and flush; cleared, so
		// that they hold no data until then.
		clear(chunk)
		clear(batch.Days)
		clear(batch.Failures)
		clear(batch.Rounds)
		chunk = chunk[:0]
		slots.free()
		batch = store.StatsBatch{Days: batch.Days[:0], Failures: batch.Failures[:0], Rounds: batch.Rounds[:0], Flush: batch.Flush}
	}
	for i, sc := range scs {
		if i%yieldEvery == 0 {
			a.yieldToRounds(yieldUntil)
		}
		ch := slots.next()
		sc.Stats().TakeInto(ch)
		if ch.Empty() {
			continue // its slot takes the next schedule's
		}
		slots.keep()
		chunk = append(chunk, ch)
		if len(ch.Failures) > 0 {
			r := sc.Stats().Retention()
			r.Before, r.KeepRounds = time.Time{}, 0 // rounds are bounded by their slots
			byCount = append(byCount, r)
		}
		batch.Days = append(batch.Days, ch.Days...)
		batch.Failures = append(batch.Failures, ch.Failures...)
		batch.Rounds = append(batch.Rounds, ch.Rounds...)
		if len(batch.Days)+len(batch.Failures)+len(batch.Rounds) >= a.flushRows {
			write()
		}
	}
	write()
	a.flushChunk, a.flushBatch = chunk, batch
	rules := byCount
	now := a.o.clock.Now()
	byAge := a.lastPrune.IsZero() || now.Sub(a.lastPrune) >= pruneInterval
	if byAge {
		rules = make([]store.Retention, len(scs))
		for i, sc := range scs {
			rules[i] = sc.Stats().Retention()
		}
		if sh, ok := st.(sharedPruner); ok {
			// One instance of those sharing the store prunes by age for
			// the others; the failures this flush wrote are cut here
			// either way.
			pctx, cancel := context.WithTimeout(ctx, per)
			pruned, err := sh.PruneShared(pctx, rules, pruneInterval)
			cancel()
			if err != nil {
				errs = append(errs, fmt.Errorf("apply statistics retention: %w", err))
			} else {
				a.lastPrune = now
			}
			byAge, rules = false, byCount
			if pruned { // the rules of every schedule, failures' counts too
				rules = nil
			}
		}
	}
	if len(rules) > 0 {
		pctx, cancel := context.WithTimeout(ctx, per)
		err := st.Prune(pctx, rules)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("apply statistics retention: %w", err))
		} else if byAge {
			a.lastPrune = now
		}
	}
	return errors.Join(errs...)
}

// yieldToRounds pauses a flush while rounds wait for a runner, until
// until at the latest.
func (a *App) yieldToRounds(until time.Time) { yieldWhile(a.roundsQueued, until, a.yielding) }

// yieldWhile sleeps a step at a time while busy holds, until until at the
// latest, calling yielding (if set) before each step.
func yieldWhile(busy func() bool, until time.Time, yielding func()) {
	for busy() && time.Now().Before(until) {
		if yielding != nil {
			yielding()
		}
		time.Sleep(flushYieldStep)
	}
}

// roundsQueued reports whether rounds wait for a runner.
func (a *App) roundsQueued() bool {
	for _, rs := range a.runners {
		if rs.Queued() > 0 {
			return true
		}
	}
	return false
}

// changeSlots is where a flush takes the schedules' changes: a slot for
// each schedule with changes in the transaction being built, not one for
// every schedule (on a cluster instance most schedules run elsewhere and
// have none). The slots are kept for the next flush, in blocks, so that a
// slot's address holds while the transaction is built; blocks past what
// this flush used are dropped. (Kept behind a weak pointer instead, the
// slots were collected between nearly every two flushes of a busy App, and
// allocated again: hundreds of bytes a schedule, at every flush.)
type changeSlots struct {
	blocks [][]statistics.Changes
	used   int // slots holding changes not yet written
	most   int // the most slots used at once in this flush
}

// changeBlock is how many slots a block holds.
const changeBlock = 256

// next is the first free slot.
func (s *changeSlots) next() *statistics.Changes {
	b := s.used / changeBlock
	if b == len(s.blocks) {
		s.blocks = append(s.blocks, make([]statistics.Changes, changeBlock))
	}
	return &s.blocks[b][s.used%changeBlock]
}

// keep keeps the slot next returned: its changes are to be written.
func (s *changeSlots) keep() {
	s.used++
	s.most = max(s.most, s.used)
}

// free empties the slots used, once their changes were written (or put
// back), and the one after them, which next may have returned for a
// schedule with none: what they held goes, their encodings' room stays.
func (s *changeSlots) free() {
	for i := 0; i <= s.used && i < len(s.blocks)*changeBlock; i++ {
		s.blocks[i/changeBlock][i%changeBlock].Reset()
	}
	s.used = 0
}

// done ends a flush: the slots are emptied, and the blocks it did not use
// dropped.
func (s *changeSlots) done() {
	s.free()
	n := (s.most + changeBlock - 1) / changeBlock
	clear(s.blocks[n:])
	s.blocks, s.most = s.blocks[:n], 0
}

// sharedPruner is a store that instances share (PostgreSQL): one of them
// applies retention by age for all (postgres.Store.PruneShared).
type sharedPruner interface {
	PruneShared(ctx context.Context, rules []store.Retention, every time.Duration) (bool, error)
}
