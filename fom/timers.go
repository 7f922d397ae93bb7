package fom

import (
	"context"
	"fmt"
	"os"

	"go.uber.org/zap"

	"github.com/fom-go/fom/store"
	"github.com/fom-go/fom/timer"
)

// Timers returns the App's durable timer service, on the App's store (the
// embedded SQLite one, or PostgreSQL where the instances share the work).
// It runs while the App does: started by Start (or at once, when the App
// runs already), stopped by Stop before the store is closed.
func (a *App) Timers() *timer.Service {
	a.mu.Lock()
	if a.timers != nil {
		s := a.timers
		a.mu.Unlock()
		return s
	}
	id := a.o.instanceID
	if a.coord != nil {
		id = a.coord.ID()
	}
	if id == "" {
		h, _ := os.Hostname()
		id = fmt.Sprintf("%s-%d", h, os.Getpid())
	}
	to := a.o.timers
	to.Store, to.Clock, to.Logger, to.Instance = timerStore{a}, a.o.clock, a.o.logger, id
	s, err := timer.New(to)
	if err != nil { // only a store or a bound can be wrong, and both are the App's
		panic(err)
	}
	a.timers = s
	running := a.running
	a.mu.Unlock()
	if running {
		if err := s.Start(context.Background()); err != nil {
			a.log.Warn("starting the timer service failed", zap.Error(err))
		}
	}
	return s
}

// timerStore is the App's store as a timer store, opened on first use (as
// the App opens it) and followed when reopened after a Stop.
type timerStore struct{ a *App }

func (t timerStore) get(ctx context.Context) (store.TimerStore, error) {
	s, err := t.a.store(ctx)
	if err != nil {
		return nil, err
	}
	ts, ok := s.(store.TimerStore)
	if !ok {
		return nil, fmt.Errorf("fom: the App's store (%T) keeps no durable timers", s)
	}
	return ts, nil
}

func (t timerStore) InsertTimers(ctx context.Context, ts []store.Timer) error {
	s, err := t.get(ctx)
	if err != nil {
		return err
	}
	return s.InsertTimers(ctx, ts)
}

func (t timerStore) InsertTimersTx(ctx context.Context, tx any, ts []store.Timer) error {
	s, err := t.get(ctx)
	if err != nil {
		return err
	}
	return s.InsertTimersTx(ctx, tx, ts)
}

func (t timerStore) GetTimer(ctx context.Context, id string) (store.Timer, bool, error) {
	s, err := t.get(ctx)
	if err != nil {
		return store.Timer{}, false, err
	}
	return s.GetTimer(ctx, id)
}

func (t timerStore) ListTimers(ctx context.Context, f store.TimerFilter) ([]store.Timer, error) {
	s, err := t.get(ctx)
	if err != nil {
		return nil, err
	}
	return s.ListTimers(ctx, f)
}

func (t timerStore) CountTimers(ctx context.Context, namespace string) (int64, error) {
	s, err := t.get(ctx)
	if err != nil {
		return 0, err
	}
	return s.CountTimers(ctx, namespace)
}

func (t timerStore) UpdateTimer(ctx context.Context, tm store.Timer) (bool, error) {
	s, err := t.get(ctx)
	if err != nil {
		return false, err
	}
	return s.UpdateTimer(ctx, tm)
}

func (t timerStore) SetEnabled(ctx context.Context, id string, enabled bool, nextAt int64, now int64) (bool, error) {
	s, err := t.get(ctx)
	if err != nil {
		return false, err
	}
	return s.SetEnabled(ctx, id, enabled, nextAt, now)
}

func (t timerStore) DeleteTimer(ctx context.Context, id string) (bool, error) {
	s, err := t.get(ctx)
	if err != nil {
		return false, err
	}
	return s.DeleteTimer(ctx, id)
}

func (t timerStore) DueTimers(ctx context.Context, before int64, limit int) ([]store.Timer, error) {
	s, err := t.get(ctx)
	if err != nil {
		return nil, err
	}
	return s.DueTimers(ctx, before, limit)
}

func (t timerStore) AdvanceTimers(ctx context.Context, as []store.Advance) error {
	s, err := t.get(ctx)
	if err != nil {
		return err
	}
	return s.AdvanceTimers(ctx, as)
}

func (t timerStore) ClaimFires(ctx context.Context, owner string, after store.FireKey, before, now, lease int64, limit int) ([]store.Claimed, store.FireKey, error) {
	s, err := t.get(ctx)
	if err != nil {
		return nil, after, err
	}
	return s.ClaimFires(ctx, owner, after, before, now, lease, limit)
}

func (t timerStore) StartFires(ctx context.Context, owner string, refs []store.FireRef, now, defTimeout, grace int64) ([]store.Started, error) {
	s, err := t.get(ctx)
	if err != nil {
		return nil, err
	}
	return s.StartFires(ctx, owner, refs, now, defTimeout, grace)
}

func (t timerStore) FinishFires(ctx context.Context, owner string, os []store.Outcome) error {
	s, err := t.get(ctx)
	if err != nil {
		return err
	}
	return s.FinishFires(ctx, owner, os)
}

func (t timerStore) ReleaseFires(ctx context.Context, owner string) error {
	s, err := t.get(ctx)
	if err != nil {
		return err
	}
	return s.ReleaseFires(ctx, owner)
}

func (t timerStore) RetryFire(ctx context.Context, ref store.FireRef, now int64) (bool, error) {
	s, err := t.get(ctx)
	if err != nil {
		return false, err
	}
	return s.RetryFire(ctx, ref, now)
}

func (t timerStore) Fires(ctx context.Context, timerID string, limit int) ([]store.FireRecord, error) {
	s, err := t.get(ctx)
	if err != nil {
		return nil, err
	}
	return s.Fires(ctx, timerID, limit)
}

func (t timerStore) CountFires(ctx context.Context, namespace string, now int64, soon int64) (store.FireCounts, error) {
	s, err := t.get(ctx)
	if err != nil {
		return store.FireCounts{}, err
	}
	return s.CountFires(ctx, namespace, now, soon)
}

func (t timerStore) PruneFires(ctx context.Context, succeededBefore int64, deadBefore int64) (int64, error) {
	s, err := t.get(ctx)
	if err != nil {
		return 0, err
	}
	return s.PruneFires(ctx, succeededBefore, deadBefore)
}

var _ store.TimerStore = timerStore{}

func (t timerStore) StepFires(ctx context.Context, owner string, os []store.Outcome, refs []store.FireRef, now, defTimeout, grace int64) ([]store.Started, error) {
	s, err := t.get(ctx)
	if err != nil {
		return nil, err
	}
	return s.StepFires(ctx, owner, os, refs, now, defTimeout, grace)
}

// TimersInUse returns the timer service if the App's code asked for it
// (Timers), else nil: the admin page shows timers only then.
func (a *App) TimersInUse() *timer.Service {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.timers
}
