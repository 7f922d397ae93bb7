package timer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/fom-go/fom/internal/slots"
	"github.com/fom-go/fom/schedule"
	"github.com/fom-go/fom/schedule/wheel"
	"github.com/fom-go/fom/store"
)

// How a fire runs. The loop polls the store every Poll: it makes the
// fires of the timers due within the window (materialize) and claims the
// fires due within it (a lease in the store), arming them in the timing
// wheel by slot: the fires due within the same Ahead share a slot, which
// comes a lead before them (Ahead, more while the store is slow: see
// lead). When a slot comes, the dispatcher begins the attempts of its
// fires in one statement (StepFires: a fire whose timer was disabled,
// updated or deleted meanwhile is not begun), with the outcomes recorded
// since the last batch; one goroutine then sleeps through the begun
// fires' due times and delivers each when it comes, within its
// namespace's rate and concurrency (on that goroutine when its kind's
// handler has been quick, while the fires due at a wake-up take under a
// millisecond; otherwise on a goroutine of its own: see deliverAt). It
// wakes at
// most once per Coalesce (5 ms): a fire alone is delivered on its
// millisecond, and fires due closer together than that share wake-ups,
// which cost the process more than their own work. A fire is
// thus on time however long the statement takes, up to the lead, and a
// burst costs a statement per slot, not one per fire. A process that
// dies leaves claims and running attempts whose leases run out: any
// instance takes them over (at least once, with the same key).

// gather is how long an outcome waits for a batch to ride with (real
// time: it only batches writes; no fire waits on it).
const gather = 100 * time.Millisecond

// Start starts the service: the loop and the dispatchers.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return nil
	}
	w, err := wheel.New(wheel.WithClock(s.clk), wheel.WithDispatchers(1))
	if err != nil {
		s.mu.Unlock()
		return err
	}
	s.wheel, s.running, s.stop, s.quit = w, true, make(chan struct{}), make(chan struct{})
	s.mu.Unlock()
	s.wg.Add(1 + dispatchers)
	go s.loop()
	for range dispatchers {
		go s.dispatch()
	}
	s.poke()
	return nil
}

// Stop stops claiming, gives back the fires claimed and not begun, and
// waits until ctx ends for the fires begun (delivered at their due time,
// at most a lead and a slot from now) and the deliveries under way (their outcomes
// are recorded; one still running then is left to its lease, and so is
// a begun fire not yet due). Safe twice and before Start.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	if !s.running {
		s.mu.Unlock()
		return nil
	}
	s.running = false
	close(s.stop)
	w := s.wheel
	s.slots.Each(func(_ int64, sl *slots.Slot[store.FireRef, *wheel.Timer]) { sl.Armed.Stop() })
	s.slots.Clear()
	clear(s.armed)
	s.due = nil
	s.mu.Unlock()
	// The loop and the dispatchers end first (a batch being written arms
	// its begun fires, at the due times live keeps), so no delivery is
	// added while it is waited for.
	s.wg.Wait()
	s.mu.Lock()
	clear(s.live)
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.inflight.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("fom: timer service stop: deliveries still running: %w", ctx.Err())
		close(s.quit)
	}
	w.Stop()
	s.flushOutcomes() // those that ended before Stop gave up
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if rerr := s.st.ReleaseFires(rctx, s.o.Instance); rerr != nil {
		err = errors.Join(err, fmt.Errorf("fom: timer service stop: give back claims: %w", rerr))
	}
	return err
}

func (s *Service) signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// loop polls until Stop.
func (s *Service) loop() {
	defer s.wg.Done()
	t := s.clk.NewTicker(s.o.Poll)
	defer t.Stop()
	var lastPrune time.Time
	for {
		select {
		case <-s.stop:
			return
		case <-t.Chan():
		case <-s.kick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(s.o.Window, 5*time.Second))
		if err := s.poll(ctx); err != nil {
			s.log.Warn("polling for due fires failed; will retry", zap.Error(err))
		}
		if now := s.clk.Now(); now.Sub(lastPrune) >= time.Minute {
			lastPrune = now
			if n, err := s.st.PruneFires(ctx, ms(now.Add(-s.o.RetainSucceeded)), ms(now.Add(-s.o.RetainDead))); err != nil {
				s.log.Warn("pruning finished fires failed", zap.Error(err))
			} else if n > 0 {
				s.log.Debug("finished fires pruned", zap.Int64("count", n))
			}
		}
		cancel()
	}
}

// poll makes the fires due within the window and claims them.
func (s *Service) poll(ctx context.Context) error {
	now := s.clk.Now()
	horizon := now.Add(s.o.Window)
	// A chunk of timers made, then a chunk of fires claimed and armed,
	// soonest first: the first fires are armed before the later ones are
	// made, however many are due within the window. Each chunk's claim
	// goes on from where the one before it ended, unless the chunk made
	// fires: one of them may come before that (timers due at one instant
	// are read in any order), and the claim starts over.
	var from store.FireKey
	for {
		ts, err := s.st.DueTimers(ctx, ms(horizon), s.o.ClaimBatch)
		if err != nil {
			return fmt.Errorf("read due timers: %w", err)
		}
		if len(ts) > 0 {
			as := make([]store.Advance, 0, len(ts))
			for _, t := range ts {
				as = append(as, advance(t, now, horizon))
			}
			if err := s.st.AdvanceTimers(ctx, as); err != nil {
				return fmt.Errorf("make fires: %w", err)
			}
			from = store.FireKey{}
		}
		cs, next, err := s.st.ClaimFires(ctx, s.o.Instance, from, ms(horizon), ms(now), s.o.Lease.Milliseconds(), s.o.ClaimBatch)
		from = next
		if err != nil {
			return fmt.Errorf("claim fires: %w", err)
		}
		s.arm(cs)
		if len(ts) < s.o.ClaimBatch && len(cs) < s.o.ClaimBatch {
			return nil
		}
	}
}

// advance makes a timer's fires up to horizon: a one-shot's one fire; a
// cron timer's fires from its NextAt on, of which, after downtime, only
// the first missed is kept (MisfireOnce) or none (MisfireSkip).
func advance(t store.Timer, now, horizon time.Time) store.Advance {
	a := store.Advance{TimerID: t.ID, From: t.NextAt}
	if t.Cron == "" {
		a.Fires = []int64{t.NextAt}
		return a
	}
	p, err := schedule.CronPlan(t.Cron)
	if err != nil { // validated at create: cannot happen
		return a
	}
	next := fromMS(t.NextAt)
	if next.Before(now.Add(-time.Second)) { // missed while nothing ran
		if t.Misfire != MisfireSkip {
			a.Fires = append(a.Fires, t.NextAt)
		}
		n, ok := p.Next(schedule.Round{Start: now})
		if !ok {
			return a
		}
		next = n
	}
	for !next.After(horizon) {
		a.Fires = append(a.Fires, ms(next))
		n, ok := p.Next(schedule.Round{Start: next})
		if !ok {
			return a
		}
		next = n
	}
	a.Next = ms(next)
	return a
}

// arm puts claimed fires in the wheel by slot: the slot of the fires due
// in [k*Ahead, (k+1)*Ahead) comes lead before k*Ahead (see lead).
func (s *Service) arm(cs []store.Claimed) {
	if len(cs) == 0 {
		return
	}
	now := s.clk.Now()
	lead := s.lead()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return
	}
	for _, c := range cs {
		// A fire this instance still works on is not armed again: its
		// claim ran out while it waited (a backlog) and a poll claimed it
		// anew, which only extended the lease.
		if _, ok := s.live[c.FireRef]; ok {
			continue
		}
		k, sl, opened := s.slots.Add(c.DueAt, c.FireRef)
		if opened {
			if sl.Armed = s.wheel.AfterFuncInline(fromMS(k-lead).Sub(now), func() { s.fired(k) }); sl.Armed == nil {
				s.slots.Take(k) // the wheel stopped
				continue
			}
		}
		s.armed[c.FireRef] = k
		s.live[c.FireRef] = c.DueAt
	}
	s.metrics.claimed.Add(int64(len(cs)))
}

// lead is how long before a slot's first fire its attempts begin, in ms:
// Ahead, or twice the longest recent batch statement when that is more
// (a store slowed by a burst of creates, or a shared writer), up to a
// quarter of the window; so the statement ends before the fires are due.
func (s *Service) lead() int64 {
	l := max(s.o.Ahead, 2*time.Duration(s.stepMax.Load()))
	return min(l, s.o.Window/4).Milliseconds()
}

// noteStep keeps the longest recent batch statement, decaying by an
// eighth a batch.
func (s *Service) noteStep(d time.Duration) {
	for {
		old := s.stepMax.Load()
		n := max(int64(d), old-old/8)
		if s.stepMax.CompareAndSwap(old, n) {
			return
		}
	}
}

// fired hands the fires of a slot whose time came to the dispatcher (on
// the wheel's goroutine: it only queues).
func (s *Service) fired(at int64) {
	s.mu.Lock()
	sl := s.slots.Take(at)
	if sl == nil || !s.running {
		s.mu.Unlock()
		return
	}
	n := 0
	for _, d := range sl.Items {
		if a, ok := s.armed[d]; ok && a == at { // not unarmed since
			delete(s.armed, d)
			s.due = append(s.due, d)
			n++
		}
	}
	s.mu.Unlock()
	if n > 0 {
		s.signal(s.dueSig)
	}
}

// dispatch records the outcomes of attempts that ended and begins the
// attempts of fires whose slot came, both in one statement a batch
// (StepFires): whatever queued while the last batch was written goes in
// the next. An outcome waits up to gather for a slot's batch.
func (s *Service) dispatch() {
	defer s.wg.Done()
	wait := time.NewTimer(time.Hour)
	wait.Stop()
	defer wait.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.dueSig:
		case <-s.finSig:
			wait.Reset(gather)
			select {
			case <-s.stop:
				return
			case <-s.dueSig:
			case <-wait.C:
			}
			wait.Stop()
		}
		for s.step() {
		}
	}
}

// dispatchers write batches at once: one is written while the next
// gathers, so the store's round trip is not all of a batch's time.
const dispatchers = 2

// maxStep bounds the fires one batch begins or finishes.
const maxStep = 2000

// step writes one batch; it reports whether more is queued.
func (s *Service) step() bool {
	s.mu.Lock()
	due := s.due[:min(len(s.due), maxStep)]
	s.due = s.due[len(due):]
	fin := s.finished[:min(len(s.finished), maxStep)]
	s.finished = s.finished[len(fin):]
	more := len(s.due) > 0 || len(s.finished) > 0
	s.mu.Unlock()
	if len(due) == 0 && len(fin) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	now := s.clk.Now()
	// A running attempt's lease lasts its timeout (a timer without one:
	// the longest of the kinds', which it may be of) from its due time,
	// at most a lead and a slot from now, and Lease past it.
	began := time.Now() // real time: the statement's own duration, for lead
	started, err := s.st.StepFires(ctx, s.o.Instance, fin, due, ms(now), s.defaultTimeout().Milliseconds(), (s.o.Lease + s.o.Window/4 + s.o.Ahead).Milliseconds())
	if len(due) > 0 {
		s.noteStep(time.Since(began))
	}
	if err != nil {
		// The fires stay claimed: their leases run out and a poll claims
		// them again. The outcomes are asked again, a few times.
		s.log.Warn("recording outcomes and beginning attempts failed", zap.Int("due", len(due)), zap.Int("outcomes", len(fin)), zap.Error(err))
		s.mu.Lock()
		for _, d := range due {
			delete(s.live, d)
		}
		s.mu.Unlock()
		s.requeue(fin)
		return more
	}
	s.over(fin, due, started)
	if len(started) > 0 {
		s.await(started)
	}
	return more
}

// over forgets the fires a batch ended here: those whose outcome it
// recorded, and those due that it did not begin (disabled, updated,
// deleted or claimed elsewhere since).
func (s *Service) over(fin []store.Outcome, due []store.FireRef, started []store.Started) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range fin {
		delete(s.live, o.FireRef)
	}
	if len(started) == len(due) {
		return
	}
	begun := make(map[store.FireRef]bool, len(started))
	for _, st := range started {
		begun[st.FireRef] = true
	}
	for _, d := range due {
		if !begun[d] {
			delete(s.live, d)
		}
	}
}

// await delivers begun fires at their due times, on one goroutine a
// batch (see deliverAt).
func (s *Service) await(started []store.Started) {
	fs := make([]timedFire, len(started))
	s.mu.Lock()
	for i, st := range started {
		fs[i] = timedFire{s.live[st.FireRef], st}
	}
	s.mu.Unlock()
	slices.SortFunc(fs, func(a, b timedFire) int { return cmp.Compare(a.due, b.due) })
	s.inflight.Add(len(fs))
	go s.deliverAt(fs)
}

// timedFire is a begun fire and its due time.
type timedFire struct {
	due int64
	st  store.Started
}

// deliverAt sleeps through the due times of fs (in due order) and
// delivers each fire when it comes, waking at most once per Coalesce.
// A fire whose kind's handler has been quick (inlineable) is delivered
// on this goroutine, one after the other with the others due at the same
// wake-up, while that takes less than inlineBudget: it then costs no
// goroutine and no wake-up of another thread, which at a few thousand
// fires a second cost more than the fires' own work. Any other (a handler
// that waits on the network, a namespace with limits) starts on a
// goroutine of its own, so that the waits overlap. Past the budget (a
// handler slower than its kind's record) the fires left each start on a
// goroutine of their own and the batch's later fires go on to a new
// deliverAt, so a slow handler delays no other fire by more than the
// budget. When Stop gives up, the fires left are left to their leases.
func (s *Service) deliverAt(fs []timedFire) {
	gap := max(s.o.Coalesce.Milliseconds(), 0)
	t := s.clk.NewTimer(fromMS(fs[0].due).Sub(s.clk.Now()))
	defer t.Stop()
	for i := 0; i < len(fs); {
		select {
		case <-t.Chan():
		case <-s.quit:
		}
		if s.gaveUp() { // the rest is left to its leases
			s.inflight.Add(-(len(fs) - i))
			return
		}
		now := ms(s.clk.Now())
		n := 0
		for i+n < len(fs) && fs[i+n].due <= now {
			n++
		}
		if !s.deliverDue(fs[i:], n) {
			return // the rest was handed over
		}
		i += n
		if i < len(fs) {
			t.Reset(fromMS(max(fs[i].due, now+gap)).Sub(s.clk.Now()))
		}
	}
}

// gaveUp reports whether Stop gave up waiting for deliveries.
func (s *Service) gaveUp() bool {
	select {
	case <-s.quit:
		return true
	default:
		return false
	}
}

// inlineMax is the recent run time under which a kind's handler is
// called on its batch's goroutine: well under what handing a delivery
// to a goroutine of its own costs the process.
const inlineMax = 50 * time.Microsecond

// inlineable reports whether a fire of kind k in namespace ns may be
// delivered on its batch's goroutine: the kind's handler has been quick,
// and the namespace has no rate or concurrency limit for it to wait on.
func inlineable(k *kind, ns *namespace) bool {
	return k != nil && k.took.Load() < int64(inlineMax) && (ns == nil || (ns.lim == nil && ns.sem == nil))
}

// inlineBudget is how long the fires due at one wake-up may take on
// their batch's goroutine before the rest are handed to goroutines of
// their own (real time: it bounds handlers' run time).
const inlineBudget = time.Millisecond

// deliverDue delivers fs[:n], which are due, on this goroutine, and
// reports whether it did. When that takes longer than inlineBudget, a
// watchdog hands the fires not yet begun to goroutines of their own, and
// fs[n:] to a new deliverAt: deliverDue then returns false after the
// delivery under way, and the caller leaves fs alone. Each fire is
// begun exactly once: a fire is taken by advancing next from its index,
// and the watchdog takes the rest by setting it to handedOver, unless
// the owner closed it first (done).
func (s *Service) deliverDue(fs []timedFire, n int) bool {
	if n == 0 {
		return true
	}
	const done, handedOver = -1, -2
	var next atomic.Int64
	watch := time.AfterFunc(inlineBudget, func() {
		for {
			k := next.Load()
			if k < 0 {
				return
			}
			if next.CompareAndSwap(k, handedOver) {
				for j := int(k); j < n; j++ {
					go s.deliver(&fs[j].st)
				}
				if n < len(fs) {
					go s.deliverAt(fs[n:])
				}
				return
			}
		}
	})
	for j := range n {
		if !next.CompareAndSwap(int64(j), int64(j+1)) {
			return false
		}
		st := &fs[j].st
		if k, ns := s.handlerOf(&st.Timer); inlineable(k, ns) {
			s.deliverWith(st, k, ns)
		} else {
			go s.deliverWith(st, k, ns)
		}
	}
	if !next.CompareAndSwap(int64(n), done) {
		return false
	}
	watch.Stop()
	return true
}

// requeue puts outcomes not recorded back, up to three tries each; past
// that the attempt's lease runs out and the fire is delivered again (at
// least once).
func (s *Service) requeue(fin []store.Outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range fin {
		if o.Tries < 2 {
			o.Tries++
			s.finished = append(s.finished, o)
		} else {
			delete(s.live, o.FireRef) // left to its lease
		}
	}
}

// defaultTimeout is the longest timeout of the kinds handled here.
func (s *Service) defaultTimeout() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := time.Duration(0)
	for _, k := range s.kinds {
		d = max(d, k.timeout)
	}
	if d == 0 {
		d = DefaultTimeout
	}
	return d
}

// deliver runs one attempt within its namespace's limits.
func (s *Service) deliver(st *store.Started) {
	k, ns := s.handlerOf(&st.Timer)
	s.deliverWith(st, k, ns)
}

// handlerOf is the kind (nil: none here) and namespace (nil: no limits)
// of a timer.
func (s *Service) handlerOf(t *store.Timer) (*kind, *namespace) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kinds[t.Kind], s.spaces[t.Namespace]
}

// deliverWith runs one attempt of a fire of kind k in namespace ns.
func (s *Service) deliverWith(st *store.Started, k *kind, ns *namespace) {
	defer s.inflight.Done()
	t := &st.Timer
	planned := fromMS(st.Planned)
	f := Fire{TimerID: t.ID, Namespace: t.Namespace, Name: t.Name, Kind: t.Kind, Payload: t.Payload, Planned: planned, Attempt: st.Attempt, Key: KeyOf(t.ID, planned)}
	retry, timeout := DefaultRetry(), DefaultTimeout
	if k != nil {
		retry, timeout = k.retry, k.timeout
	}
	retry = mergeRetry(Retry{MaxAttempts: t.MaxAttempts, MinBackoff: time.Duration(t.MinBackoff) * time.Millisecond, MaxBackoff: time.Duration(t.MaxBackoff) * time.Millisecond}, retry)
	if t.Timeout > 0 {
		timeout = time.Duration(t.Timeout) * time.Millisecond
	}
	if ns != nil && ns.sem != nil {
		select {
		case ns.sem <- struct{}{}:
			defer func() { <-ns.sem }()
		case <-s.stop:
			s.outcome(st, store.Outcome{State: store.FireRetry, DueAt: ms(s.clk.Now()), Error: "stopped before delivery"}, 0)
			return
		}
	}
	if ns != nil && ns.lim != nil {
		now := s.clk.Now()
		if d := ns.lim.ReserveN(now, 1).DelayFrom(now); d > 0 {
			select {
			case <-s.clk.After(d):
			case <-s.stop:
				s.outcome(st, store.Outcome{State: store.FireRetry, DueAt: ms(s.clk.Now()), Error: "stopped before delivery"}, 0)
				return
			}
		}
	}
	start := s.clk.Now()
	s.metrics.late.observe(start.Sub(planned))
	a := &attempt{}
	result := func(err error) {
		end := s.clk.Now()
		o := store.Outcome{State: store.FireSucceeded, Started: ms(start), Finished: ms(end)}
		if err != nil {
			o.Error = err.Error()
			var pe *schedule.PanicError
			if errors.As(err, &pe) {
				o.Error += "\n" + pe.StackTrace()
			}
			o.State = store.FireRetry
			switch {
			case IsPermanent(err), st.Attempt >= retry.MaxAttempts:
				o.State = store.FireDead
			default:
				d := backoff(retry, st.Attempt)
				if after, ok := RetryAfterOf(err); ok && after > d {
					d = after
				}
				o.DueAt = ms(end.Add(d))
			}
			s.log.Info("timer fire failed", zap.String("timer", t.ID), zap.String("key", f.Key), zap.Int("attempt", st.Attempt), zap.String("outcome", o.State), zap.Error(err))
		}
		code := statusOf(err)
		if code == 0 {
			code = int(a.status.Load())
		}
		s.outcome(st, o, code)
	}
	if k == nil {
		result(fmt.Errorf("%w: %q: no handler on instance %s", ErrUnknownKind, t.Kind, s.o.Instance))
		return
	}
	began := time.Now() // real time: the handler's own
	s.call(a, k.h, f, timeout, result)
	k.note(time.Since(began))
}

func (s *Service) outcome(st *store.Started, o store.Outcome, code int) {
	o.FireRef, o.Attempt, o.StatusCode = st.FireRef, st.Attempt, code
	if o.Started == 0 {
		now := ms(s.clk.Now())
		o.Started, o.Finished = now, now
	}
	s.mu.Lock()
	s.metrics.outcomeLocked(st.Timer.Kind, o.State)
	s.finished = append(s.finished, o)
	s.mu.Unlock()
	s.signal(s.finSig)
}

// attempt is a delivery under way: the status its handler reported
// (ReportStatus finds it as its context's value) and whether its end was
// reported.
type attempt struct {
	status atomic.Int32
	over   atomic.Bool
}

// finish reports the attempt's end once: when the handler returns, or
// when it overran its deadline, whichever comes first.
func (a *attempt) finish(done func(error), err error) {
	if a.over.CompareAndSwap(false, true) {
		done(err)
	}
}

// timeoutGrace is how long a handler past its deadline has to return (it
// may be returning as it sees the deadline) before the attempt counts as
// timed out without it; in real time, as the context's deadline is.
const timeoutGrace = 100 * time.Millisecond

// call runs h with the attempt's deadline, on the delivering goroutine,
// recovering a panic into an error with its stack. A handler that ignores
// its context past the deadline is left to return on its own: the attempt
// counts as timed out a grace after the deadline (done reports it then),
// and what it returns later is dropped.
func (s *Service) call(a *attempt, h Handler, f Fire, timeout time.Duration, done func(error)) {
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), statusKey{}, a), timeout)
	defer cancel()
	overrun := time.AfterFunc(timeout+timeoutGrace, func() {
		a.finish(done, fmt.Errorf("timed out after %s (the handler did not return)", timeout))
	})
	defer overrun.Stop()
	defer func() {
		if p := recover(); p != nil {
			a.finish(done, &schedule.PanicError{Value: p, Stack: debug.Stack()})
		}
	}()
	a.finish(done, h(ctx, f))
}

// backoff is the pause before the attempt after attempt: exponential,
// with equal jitter (half fixed, half random), within the policy's bounds.
func backoff(r Retry, attempt int) time.Duration {
	d := r.MinBackoff
	for i := 1; i < attempt && d < r.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, r.MaxBackoff)
	if d <= 0 {
		return 0
	}
	return d/2 + rand.N(d/2+1)
}

// StatusError is an error with an HTTP status, for the fire's history.
type StatusError interface {
	error
	StatusCode() int
}

type statusKey struct{}

// ReportStatus records the HTTP status an attempt's handler got, for the
// fire's history when the attempt succeeds (a failed attempt's status
// comes from its error, a StatusError). Outside a handler it does nothing.
func ReportStatus(ctx context.Context, code int) {
	if a, ok := ctx.Value(statusKey{}).(*attempt); ok {
		a.status.Store(int32(code))
	}
}

func statusOf(err error) int {
	var se StatusError
	if errors.As(err, &se) {
		return se.StatusCode()
	}
	return 0
}

// flushOutcomes records what is queued, at Stop.
func (s *Service) flushOutcomes() {
	for s.step() {
	}
}
