package timer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fom-go/fom/internal/pgtest"
	"github.com/fom-go/fom/store"
	"github.com/fom-go/fom/store/postgres"
	"github.com/fom-go/fom/store/sqlite"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if childBin.path != "" {
		os.RemoveAll(filepath.Dir(childBin.path))
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// t0 is a Monday.
var t0 = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// got records deliveries.
type got struct {
	mu    sync.Mutex
	fires []Fire
	at    []time.Time
	ch    chan Fire
}

func newGot() *got { return &got{ch: make(chan Fire, 10000)} }

func (g *got) add(f Fire, at time.Time) {
	g.mu.Lock()
	g.fires = append(g.fires, f)
	g.at = append(g.at, at)
	g.mu.Unlock()
	g.ch <- f
}

func (g *got) wait(t *testing.T, what string) Fire {
	t.Helper()
	select {
	case f := <-g.ch:
		return f
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return Fire{}
	}
}

func (g *got) none(t *testing.T, what string) {
	t.Helper()
	select {
	case f := <-g.ch:
		t.Fatalf("%s: got %+v", what, f)
	case <-time.After(150 * time.Millisecond):
	}
}

// forEachStore runs a test on SQLite and on PostgreSQL (skipped, with how
// to run it, when no server answers; failed under CI=true).
func forEachStore(t *testing.T, test func(*testing.T, func(*testing.T) store.TimerStore)) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		test(t, func(t *testing.T) store.TimerStore { return sqliteStore(t) })
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		pool := pgtest.Pool(t)
		schema := pgtest.Schema(t, pool)
		test(t, func(t *testing.T) store.TimerStore {
			st, err := postgres.Open(context.Background(), pgtest.DSN(), postgres.WithSchema(schema))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		})
	})
}

// sqliteStore opens a store in a temp dir.
func sqliteStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// fakeService is a service on a fake clock and a SQLite store; advance
// moves the clock and lets the loop poll.
type fakeService struct {
	*Service
	clk *clockwork.FakeClock
	st  store.TimerStore
}

func newFake(t *testing.T, st store.TimerStore, opts ...func(*Options)) *fakeService {
	t.Helper()
	clk := clockwork.NewFakeClockAt(t0)
	o := Options{Store: st, Clock: clk, Instance: "test", Window: time.Second, Poll: 100 * time.Millisecond}
	for _, f := range opts {
		f(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return &fakeService{Service: s, clk: clk, st: st}
}

// step advances the fake clock by d in steps of the poll, letting the
// loop and the wheel act at each.
func (f *fakeService) step(d time.Duration) {
	for end := f.clk.Now().Add(d); f.clk.Now().Before(end); {
		f.clk.Advance(min(50*time.Millisecond, end.Sub(f.clk.Now())))
		f.poke()
		time.Sleep(2 * time.Millisecond)
	}
}

// stepSettled is step, but it lets no outcome wait across a step: an
// outcome rides with the next batch up to gather of real time, in which
// step would move the fake clock seconds on, and a retry's time (the
// outcome's, plus its backoff) would seem that much later.
func (f *fakeService) stepSettled(d time.Duration) {
	for end := f.clk.Now().Add(d); f.clk.Now().Before(end); {
		f.clk.Advance(min(50*time.Millisecond, end.Sub(f.clk.Now())))
		f.poke()
		time.Sleep(2 * time.Millisecond)
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			f.mu.Lock()
			n := len(f.finished)
			f.mu.Unlock()
			if n == 0 {
				break
			}
		}
	}
}

func (f *fakeService) handle(t *testing.T, kind string, g *got, fail func(Fire) error, opts ...HandleOption) {
	t.Helper()
	if err := f.Handle(kind, func(ctx context.Context, fi Fire) error {
		if fail != nil {
			if err := fail(fi); err != nil {
				return err
			}
		}
		g.add(fi, f.clk.Now())
		return nil
	}, opts...); err != nil {
		t.Fatal(err)
	}
}

func TestOneShotAndCronDeliveredOnTimeWithTheirKeys(t *testing.T) {
	forEachStore(t, oneShotAndCronDeliveredOnTimeWithTheirKeys)
}

func oneShotAndCronDeliveredOnTimeWithTheirKeys(t *testing.T, newStore func(*testing.T) store.TimerStore) {
	f := newFake(t, newStore(t))
	g := newGot()
	f.handle(t, "invoice.remind", g, nil)
	if err := f.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	due := t0.Add(1500 * time.Millisecond)
	id, err := f.Create(ctx, Spec{Namespace: "billing", Name: "inv-42", Kind: "invoice.remind", At: due, Payload: json.RawMessage(`{"invoice":42}`)})
	if err != nil {
		t.Fatal(err)
	}
	cid, err := f.Create(ctx, Spec{Namespace: "billing", Name: "every-2s", Kind: "invoice.remind", Cron: "*/2 * * * * *"})
	if err != nil {
		t.Fatal(err)
	}
	f.step(1400 * time.Millisecond)
	g.none(t, "nothing is due before 09:00:01.5 but the 09:00:02 cron")
	f.step(200 * time.Millisecond)
	fi := g.wait(t, "the one-shot")
	if fi.TimerID != id || fi.Key != id+":"+"1767603601500" || !fi.Planned.Equal(due) || fi.Attempt != 1 || string(fi.Payload) != `{"invoice":42}` || fi.Namespace != "billing" || fi.Name != "inv-42" {
		t.Fatalf("fire %+v", fi)
	}
	f.step(500 * time.Millisecond)
	c1 := g.wait(t, "the cron's 09:00:02")
	if c1.TimerID != cid || !c1.Planned.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("cron fire %+v", c1)
	}
	f.step(2 * time.Second)
	c2 := g.wait(t, "the cron's 09:00:04")
	if !c2.Planned.Equal(t0.Add(4 * time.Second)) {
		t.Fatalf("cron fire %+v", c2)
	}
	g.mu.Lock()
	for i, fi := range g.fires {
		if g.at[i].Before(fi.Planned) {
			t.Errorf("fire %s delivered at %s, before its time", fi.Key, g.at[i])
		}
	}
	g.mu.Unlock()
	tm, err := f.Get(ctx, id)
	if err != nil || tm.State != "done" {
		t.Fatalf("one-shot after its fire: %+v %v", tm, err)
	}
	fs, err := f.Fires(ctx, id, 10)
	if err != nil || len(fs) != 1 || fs[0].State != store.FireSucceeded || len(fs[0].Attempts) != 1 {
		t.Fatalf("history %+v %v", fs, err)
	}
}

func TestRetriesWithBackoffThenDeadThenRetryNow(t *testing.T) {
	forEachStore(t, retriesWithBackoffThenDeadThenRetryNow)
}

func retriesWithBackoffThenDeadThenRetryNow(t *testing.T, newStore func(*testing.T) store.TimerStore) {
	f := newFake(t, newStore(t))
	g := newGot()
	var mu sync.Mutex
	failing := true
	f.handle(t, "k", g, func(Fire) error {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			return errors.New("downstream 503")
		}
		return nil
	}, WithRetry(Retry{MaxAttempts: 3, MinBackoff: time.Second, MaxBackoff: 4 * time.Second}))
	f.Start(context.Background())
	ctx := context.Background()
	id, err := f.Create(ctx, Spec{Name: "r", Kind: "k", At: t0.Add(100 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	// Attempt 1 at 0.1s fails; 2 is due 0.5-1s after its end, 3 1-2s
	// after the end of 2 (equal jitter). Each due time is read from the
	// record between two attempts: it comes from the outcome's own clock
	// reading, where an attempt's start also carries however late its
	// goroutine ran while the fake clock moved on.
	attempts := func(n int) FireRecord {
		t.Helper()
		for range 400 { // 20 s of the fake clock
			fs, err := f.Fires(ctx, id, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(fs) == 1 && len(fs[0].Attempts) >= n && fs[0].State != store.FireRunning {
				return fs[0] // attempt n over
			}
			f.stepSettled(50 * time.Millisecond)
		}
		t.Fatalf("no attempt %d", n)
		return FireRecord{}
	}
	end := func(a AttemptRecord) time.Time { return a.At.Add(time.Duration(a.LatencyMS) * time.Millisecond) }
	r1 := attempts(1)
	if gap := r1.Due.Sub(end(r1.Attempts[0])); r1.State != store.FireRetry || gap < 500*time.Millisecond || gap > time.Second {
		t.Errorf("after the first failure: %s, due %s after it, want retry 0.5-1s after", r1.State, gap)
	}
	r2 := attempts(2)
	if r2.Attempts[1].At.Before(r1.Due) {
		t.Errorf("attempt 2 at %s, before its due time %s", r2.Attempts[1].At, r1.Due)
	}
	if gap := r2.Due.Sub(end(r2.Attempts[1])); r2.State != store.FireRetry || gap < time.Second || gap > 2*time.Second {
		t.Errorf("after the second failure: %s, due %s after it, want retry 1-2s after", r2.State, gap)
	}
	attempts(3)
	f.stepSettled(time.Second)
	fs, err := f.Fires(ctx, id, 10)
	if err != nil || len(fs) != 1 || fs[0].State != store.FireDead || fs[0].Attempt != 3 || len(fs[0].Attempts) != 3 {
		t.Fatalf("after three failures: %+v %v", fs, err)
	}
	a := fs[0].Attempts
	if a[2].At.Before(r2.Due) {
		t.Errorf("attempt 3 at %s, before its due time %s", a[2].At, r2.Due)
	}
	if a[0].Error != "downstream 503" {
		t.Errorf("attempt error %q", a[0].Error)
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	if err := f.RetryFire(ctx, id, fs[0].Planned); err != nil {
		t.Fatal(err)
	}
	if err := f.RetryFire(ctx, id, fs[0].Planned); !errors.Is(err, ErrNotDead) {
		t.Fatalf("a second retry-now: %v", err)
	}
	f.step(300 * time.Millisecond)
	fi := g.wait(t, "the retried fire")
	if fi.Attempt != 4 || fi.Key != KeyOf(id, t0.Add(100*time.Millisecond)) {
		t.Fatalf("retried fire %+v", fi)
	}
}

func TestPanicAndPermanentErrors(t *testing.T) { forEachStore(t, panicAndPermanentErrors) }

func panicAndPermanentErrors(t *testing.T, newStore func(*testing.T) store.TimerStore) {
	f := newFake(t, newStore(t))
	if err := f.Handle("boom", func(context.Context, Fire) error { panic("kaboom") }, WithRetry(Retry{MaxAttempts: 2, MinBackoff: 100 * time.Millisecond})); err != nil {
		t.Fatal(err)
	}
	if err := f.Handle("perm", func(context.Context, Fire) error { return Permanent(errors.New("400 bad request")) }); err != nil {
		t.Fatal(err)
	}
	f.Start(context.Background())
	ctx := context.Background()
	pid, _ := f.Create(ctx, Spec{Name: "p", Kind: "boom", At: t0.Add(100 * time.Millisecond)})
	qid, _ := f.Create(ctx, Spec{Name: "q", Kind: "perm", At: t0.Add(100 * time.Millisecond)})
	f.step(3 * time.Second)
	// Outcomes are recorded in the background: a slow machine (the race
	// detector, a panic's stack) may record the last one after the
	// clock has moved on.
	fs, _ := f.Fires(ctx, pid, 1)
	for deadline := time.Now().Add(5 * time.Second); (len(fs) != 1 || fs[0].State != store.FireDead) && time.Now().Before(deadline); {
		f.step(100 * time.Millisecond)
		fs, _ = f.Fires(ctx, pid, 1)
	}
	if len(fs) != 1 || fs[0].State != store.FireDead || len(fs[0].Attempts) != 2 || !strings.Contains(fs[0].Attempts[0].Error, "panic: kaboom") || !strings.Contains(fs[0].Attempts[0].Error, "goroutine") {
		t.Fatalf("a panicking handler: %+v", fs)
	}
	fs, _ = f.Fires(ctx, qid, 1)
	if len(fs) != 1 || fs[0].State != store.FireDead || len(fs[0].Attempts) != 1 {
		t.Fatalf("a permanent error: %+v", fs)
	}
}

func TestDisableUpdateDeleteTakeEffectBeforeTheFire(t *testing.T) {
	forEachStore(t, disableUpdateDeleteTakeEffectBeforeTheFire)
}

func disableUpdateDeleteTakeEffectBeforeTheFire(t *testing.T, newStore func(*testing.T) store.TimerStore) {
	f := newFake(t, newStore(t))
	g := newGot()
	f.handle(t, "k", g, nil)
	f.Start(context.Background())
	ctx := context.Background()
	due := t0.Add(500 * time.Millisecond)
	d, _ := f.Create(ctx, Spec{Name: "disabled", Kind: "k", At: due})
	x, _ := f.Create(ctx, Spec{Name: "deleted", Kind: "k", At: due})
	u, _ := f.Create(ctx, Spec{Name: "updated", Kind: "k", At: due, Payload: json.RawMessage(`1`)})
	f.step(200 * time.Millisecond) // claimed and armed by now
	if err := f.Disable(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := f.Delete(ctx, x); err != nil {
		t.Fatal(err)
	}
	if err := f.Update(ctx, u, Spec{Kind: "k", At: due.Add(time.Second), Payload: json.RawMessage(`2`)}); err != nil {
		t.Fatal(err)
	}
	f.step(time.Second)
	g.none(t, "no fire of a disabled, deleted or moved timer at the old time")
	f.step(600 * time.Millisecond)
	fi := g.wait(t, "the updated timer")
	if fi.TimerID != u || string(fi.Payload) != "2" || !fi.Planned.Equal(due.Add(time.Second)) {
		t.Fatalf("updated fire %+v", fi)
	}
	if _, err := f.Get(ctx, x); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted: %v", err)
	}
	if tm, _ := f.Get(ctx, d); tm.State != "disabled" {
		t.Fatalf("disabled: %+v", tm)
	}
	// Enabled again after its time: a one-shot whose fire was deleted by
	// the disable fires at once.
	if err := f.Enable(ctx, d); err != nil {
		t.Fatal(err)
	}
	f.step(300 * time.Millisecond)
	if fi := g.wait(t, "the re-enabled one-shot"); fi.TimerID != d {
		t.Fatalf("fire %+v", fi)
	}
}

func TestMisfirePolicies(t *testing.T) { forEachStore(t, misfirePolicies) }

func misfirePolicies(t *testing.T, newStore func(*testing.T) store.TimerStore) {
	st := newStore(t)
	ctx := context.Background()
	// Timers made by a process that then stopped for a minute.
	first := newFake(t, st)
	first.handle(t, "k", newGot(), nil)
	once, _ := first.Create(ctx, Spec{Name: "once", Kind: "k", Cron: "*/10 * * * * *"})
	skip, _ := first.Create(ctx, Spec{Name: "skip", Kind: "k", Cron: "*/10 * * * * *", Misfire: MisfireSkip})
	later := newFake(t, st)
	later.clk.Advance(time.Minute + 5*time.Second) // 09:01:05
	g := newGot()
	later.handle(t, "k", g, nil)
	later.Start(ctx)
	later.step(200 * time.Millisecond)
	fi := g.wait(t, "the missed fire, once")
	if fi.TimerID != once || !fi.Planned.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("catch-up %+v", fi)
	}
	g.none(t, "no other missed fire")
	later.step(5 * time.Second) // 09:01:10: both fire
	a, b := g.wait(t, "a fire at 09:01:10"), g.wait(t, "another at 09:01:10")
	for _, x := range []Fire{a, b} {
		if !x.Planned.Equal(t0.Add(70 * time.Second)) {
			t.Fatalf("fire %+v", x)
		}
	}
	if a.TimerID == b.TimerID || (a.TimerID != skip && b.TimerID != skip) {
		t.Fatalf("fires %+v %+v", a, b)
	}
}

func TestBadInputIsRefusedWithTheField(t *testing.T) { forEachStore(t, badInputIsRefusedWithTheField) }

func badInputIsRefusedWithTheField(t *testing.T, newStore func(*testing.T) store.TimerStore) {
	f := newFake(t, newStore(t))
	f.handle(t, "k", newGot(), nil)
	ctx := context.Background()
	at := t0.Add(time.Hour)
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Name: "a", Kind: "nope", At: at}, `no handler for the timer's kind: "nope"`},
		{Spec{Name: "a", Kind: "k", At: at, Payload: json.RawMessage(`{oops`)}, `field "payload" value "{oops": not JSON`},
		{Spec{Name: "a", Kind: "k", Cron: "0 0 0 30 2 *"}, `field "cron" value "0 0 0 30 2 *"`},
		{Spec{Name: "a", Kind: "k", At: t0.AddDate(200, 0, 0)}, `field "at"`},
		{Spec{Name: strings.Repeat("n", 300), Kind: "k", At: at}, `field "name"`},
		{Spec{Name: "a\x00b", Kind: "k", At: at}, `control characters`},
		{Spec{Name: "a", Kind: "k"}, `a timer needs a due time (at) or a cron spec (cron)`},
		{Spec{Name: "a", Kind: "k", At: at, Cron: "@hourly"}, `not both`},
		{Spec{Name: "a", Kind: "k", At: at, Misfire: "twice"}, `field "misfire"`},
	} {
		_, err := f.Create(ctx, c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.spec, err, c.want)
		}
	}
	if ts, _, _ := f.List(ctx, Filter{}); len(ts) != 0 {
		t.Fatalf("stored after refusals: %+v", ts)
	}
	if _, err := f.Create(ctx, Spec{Name: "dup", Kind: "k", At: at}); err != nil {
		t.Fatal(err)
	}
	_, err := f.Create(ctx, Spec{Name: "dup", Kind: "k", At: at})
	if !errors.Is(err, ErrDuplicate) || !strings.Contains(err.Error(), `name "dup"`) {
		t.Fatalf("duplicate: %v", err)
	}
	// A bulk create with one bad timer stores none.
	_, err = f.CreateMany(ctx, []Spec{{Name: "b1", Kind: "k", At: at}, {Name: "b2", Kind: "zzz", At: at}})
	if err == nil || !strings.Contains(err.Error(), "timer 2 of 2") {
		t.Fatalf("bulk: %v", err)
	}
	if ts, _, _ := f.List(ctx, Filter{}); len(ts) != 1 {
		t.Fatalf("%d stored after a refused bulk create", len(ts))
	}
}

func TestQuotaListPagingAndRetention(t *testing.T) { forEachStore(t, quotaListPagingAndRetention) }

func quotaListPagingAndRetention(t *testing.T, newStore func(*testing.T) store.TimerStore) {
	f := newFake(t, newStore(t), func(o *Options) { o.RetainSucceeded = time.Hour })
	g := newGot()
	f.handle(t, "k", g, nil)
	f.SetLimits("small", Limits{MaxTimers: 2})
	ctx := context.Background()
	for i := range 2 {
		if _, err := f.Create(ctx, Spec{Namespace: "small", Name: string(rune('a' + i)), Kind: "k", At: t0.Add(100 * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Create(ctx, Spec{Namespace: "small", Name: "c", Kind: "k", At: t0.Add(time.Hour)}); !errors.Is(err, ErrQuota) {
		t.Fatalf("over quota: %v", err)
	}
	for i := range 5 {
		f.Create(ctx, Spec{Namespace: "big", Name: string(rune('a' + i)), Kind: "k", At: t0.Add(time.Hour)})
	}
	var all []string
	cursor := ""
	for {
		ts, next, err := f.List(ctx, Filter{Namespace: "big", Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, tm := range ts {
			all = append(all, tm.Name)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if strings.Join(all, "") != "abcde" {
		t.Fatalf("paged listing %q", all)
	}
	f.Start(ctx)
	f.step(300 * time.Millisecond)
	g.wait(t, "a")
	g.wait(t, "b")
	waitFor(t, "both outcomes recorded", func() bool {
		c, _ := f.Counts(ctx, "small")
		return c.ByState[store.FireSucceeded] == 2
	})
	f.clk.Advance(time.Hour + 2*time.Minute) // past retention
	f.step(100 * time.Millisecond)           // and a prune
	waitFor(t, "succeeded fires pruned past their retention", func() bool {
		c, _ := f.Counts(ctx, "small")
		return c.ByState[store.FireSucceeded] == 0
	})
}

// waitFor polls cond until it holds, for what the finisher writes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what)
		}
	}
}

// backoff doubles from MinBackoff to MaxBackoff, each pause between half
// and all of it (equal jitter).
func TestBackoff(t *testing.T) {
	t.Parallel()
	r := Retry{MaxAttempts: 10, MinBackoff: time.Second, MaxBackoff: 10 * time.Second}
	for attempt, full := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 9: 10 * time.Second} {
		for range 200 {
			if d := backoff(r, attempt); d < full/2 || d > full {
				t.Fatalf("attempt %d: %s, want %s-%s", attempt, d, full/2, full)
			}
		}
	}
}

// pgStore opens a PostgreSQL store on a schema of its own.
func pgStore(t *testing.T) (*postgres.Store, string) {
	t.Helper()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	st, err := postgres.Open(context.Background(), pgtest.DSN(), postgres.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, schema
}

// A timer created in the caller's transaction exists only if it commits;
// SQLite refuses a caller's transaction with a clear error.
func TestCreateInTheCallersTransaction(t *testing.T) {
	t.Parallel()
	st, _ := pgStore(t)
	f := newFake(t, st)
	f.handle(t, "k", newGot(), nil)
	ctx := context.Background()
	for _, commit := range []bool{true, false} {
		tx, err := st.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		name := map[bool]string{true: "committed", false: "rolled-back"}[commit]
		id, err := f.CreateTx(ctx, tx, Spec{Name: name, Kind: "k", At: t0.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Get(ctx, id)
		if commit != (err == nil) {
			t.Fatalf("%s: get %v", name, err)
		}
	}
	lite := newFake(t, sqliteStore(t))
	lite.handle(t, "k", newGot(), nil)
	if _, err := lite.CreateTx(ctx, struct{}{}, Spec{Name: "x", Kind: "k", At: t0.Add(time.Hour)}); !errors.Is(err, store.ErrTxNotSupported) {
		t.Fatalf("sqlite: %v", err)
	}
}

// Two services on one PostgreSQL store, on the real clock: every fire is
// delivered once, by one of them, never before its time.
func TestTwoInstancesShareTheFires(t *testing.T) {
	t.Parallel()
	st, _ := pgStore(t)
	ctx := context.Background()
	g := newGot()
	var svcs []*Service
	for _, id := range []string{"i1", "i2"} {
		s, err := New(Options{Store: st, Instance: id, Window: 500 * time.Millisecond, Poll: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		s.Handle("k", func(ctx context.Context, f Fire) error { g.add(f, time.Now()); return nil })
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer s.Stop(ctx)
		svcs = append(svcs, s)
	}
	now := time.Now()
	var specs []Spec
	for i := range 200 {
		specs = append(specs, Spec{Name: "t" + strconv.Itoa(i), Kind: "k", At: now.Add(time.Duration(100+i*5) * time.Millisecond)})
	}
	if _, err := svcs[0].CreateMany(ctx, specs); err != nil {
		t.Fatal(err)
	}
	for range 200 {
		g.wait(t, "a fire")
	}
	g.none(t, "no fire twice")
	g.mu.Lock()
	defer g.mu.Unlock()
	seen := map[string]bool{}
	for i, f := range g.fires {
		if seen[f.Key] {
			t.Errorf("%s delivered twice", f.Key)
		}
		seen[f.Key] = true
		if g.at[i].Before(f.Planned) {
			t.Errorf("%s delivered %s early", f.Key, f.Planned.Sub(g.at[i]))
		}
	}
}

// A handler that never returns is timed out at its deadline (its context
// canceled), recorded as such and retried; Stop does not wait for it past
// its own context.
func TestHandlerThatNeverReturnsIsTimedOut(t *testing.T) {
	t.Parallel()
	f := newFake(t, sqliteStore(t))
	release := make(chan struct{})
	var calls sync.WaitGroup
	calls.Add(2)
	f.Handle("hang", func(ctx context.Context, fi Fire) error {
		defer calls.Done()
		<-release // ignores ctx
		return nil
	}, WithTimeout(100*time.Millisecond), WithRetry(Retry{MaxAttempts: 2, MinBackoff: 10 * time.Millisecond}))
	f.Start(context.Background())
	ctx := context.Background()
	id, _ := f.Create(ctx, Spec{Name: "h", Kind: "hang", At: t0.Add(100 * time.Millisecond)})
	f.step(200 * time.Millisecond)
	waitFor(t, "the first attempt timed out and a second began", func() bool {
		f.step(50 * time.Millisecond)
		fs, _ := f.Fires(ctx, id, 1)
		return len(fs) == 1 && len(fs[0].Attempts) >= 1 && strings.Contains(fs[0].Attempts[0].Error, "timed out after 100ms") && fs[0].Attempt == 2
	})
	close(release)
	calls.Wait()
}

// A namespace's concurrency bound holds its deliveries under way at
// once, and its rate spaces them out; another namespace is not held back.
func TestNamespaceConcurrencyAndRate(t *testing.T) {
	t.Parallel()
	s, err := New(Options{Store: sqliteStore(t), Instance: "lim", Window: time.Second, Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	defer s.Stop(ctx)
	var mu sync.Mutex
	running, most := map[string]int{}, map[string]int{}
	starts := map[string][]time.Time{}
	done := make(chan string, 100)
	s.Handle("k", func(ctx context.Context, f Fire) error {
		mu.Lock()
		running[f.Namespace]++
		most[f.Namespace] = max(most[f.Namespace], running[f.Namespace])
		starts[f.Namespace] = append(starts[f.Namespace], time.Now())
		mu.Unlock()
		time.Sleep(30 * time.Millisecond)
		mu.Lock()
		running[f.Namespace]--
		mu.Unlock()
		done <- f.Namespace
		return nil
	})
	s.SetLimits("narrow", Limits{Concurrency: 2})
	s.SetLimits("slow", Limits{Rate: 20, Burst: 1})
	s.Start(ctx)
	at := time.Now().Add(200 * time.Millisecond)
	var specs []Spec
	for i := range 10 {
		for _, ns := range []string{"narrow", "slow", "free"} {
			specs = append(specs, Spec{Namespace: ns, Name: "t" + strconv.Itoa(i), Kind: "k", At: at})
		}
	}
	if _, err := s.CreateMany(ctx, specs); err != nil {
		t.Fatal(err)
	}
	for range 30 {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("deliveries did not finish")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most["narrow"] > 2 {
		t.Errorf("%d deliveries of a namespace bound to 2 ran at once", most["narrow"])
	}
	if most["free"] < 3 {
		t.Errorf("an unbounded namespace ran at most %d at once", most["free"])
	}
	ss := starts["slow"]
	if span := ss[len(ss)-1].Sub(ss[0]); span < 400*time.Millisecond {
		t.Errorf("10 deliveries at 20 a second (burst 1) spanned %s, want at least 450ms", span)
	}
}

// failingStep is a store whose StepFires fails while fail is set, as a
// store error mid-claim would.
type failingStep struct {
	store.TimerStore
	mu   sync.Mutex
	fail int // calls left to fail
}

func (f *failingStep) StepFires(ctx context.Context, owner string, os []store.Outcome, refs []store.FireRef, now, defTimeout, grace int64) ([]store.Started, error) {
	f.mu.Lock()
	if f.fail > 0 {
		f.fail--
		f.mu.Unlock()
		return nil, errors.New("connection reset by peer")
	}
	f.mu.Unlock()
	return f.TimerStore.StepFires(ctx, owner, os, refs, now, defTimeout, grace)
}

// tiesLast is a store that reads the timers due at one instant largest
// id first (a store may read ties in any order).
type tiesLast struct{ store.TimerStore }

func (s tiesLast) DueTimers(ctx context.Context, before int64, limit int) ([]store.Timer, error) {
	ts, err := s.TimerStore.DueTimers(ctx, before, 1<<20)
	slices.SortStableFunc(ts, func(a, b store.Timer) int {
		return cmp.Or(cmp.Compare(a.NextAt, b.NextAt), strings.Compare(b.ID, a.ID))
	})
	return ts[:min(limit, len(ts))], err
}

// A poll claims in chunks, each going on from the key the one before it
// ended on; a chunk that made fires starts over, so that a fire it made
// before that key (timers due at one instant, read in any order) is
// claimed by the same poll, not the next.
func TestAPollClaimsTheFiresItMadeBeforeItsKey(t *testing.T) {
	forEachStore(t, aPollClaimsTheFiresItMadeBeforeItsKey)
}

func aPollClaimsTheFiresItMadeBeforeItsKey(t *testing.T, newStore func(*testing.T) store.TimerStore) {
	f := newFake(t, tiesLast{newStore(t)}, func(o *Options) { o.ClaimBatch = 2 })
	f.handle(t, "k", newGot(), nil)
	ctx := context.Background()
	var ids []string
	for i := range 4 { // due a minute on, past the window: made by a poll
		id, err := f.Create(ctx, Spec{Name: fmt.Sprintf("c%d", i), Kind: "k", Cron: "0 * * * * *"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	f.clk.Advance(59500 * time.Millisecond)
	// One poll (the service not started: no other): two chunks of two
	// timers, the second's ids before the first's.
	if err := f.poll(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if fs, err := f.st.Fires(ctx, id, 1); err != nil || len(fs) != 1 || fs[0].Owner != "test" {
			t.Errorf("timer %s: fires %+v (%v), want one, claimed by the poll", id, fs, err)
		}
	}
}

// A store error while a fire begins leaves it claimed and undelivered; it
// is delivered once its claim's lease ends and a poll claims it again,
// once, nothing half-written.
func TestStoreErrorWhileBeginning(t *testing.T) { forEachStore(t, storeErrorWhileBeginning) }

func storeErrorWhileBeginning(t *testing.T, newStore func(*testing.T) store.TimerStore) {
	st := &failingStep{TimerStore: newStore(t), fail: 1}
	f := newFake(t, st, func(o *Options) { o.Lease = 2 * time.Second })
	g := newGot()
	f.handle(t, "k", g, nil)
	f.Start(context.Background())
	ctx := context.Background()
	id, err := f.Create(ctx, Spec{Name: "e", Kind: "k", At: t0.Add(200 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	f.step(500 * time.Millisecond)
	g.none(t, "a fire whose beginning failed")
	f.step(3 * time.Second) // the claim's lease (due + 2 s) ends, and a poll claims it again
	fi := g.wait(t, "the fire, after its lease")
	if fi.TimerID != id || fi.Attempt != 1 {
		t.Fatalf("fire %+v", fi)
	}
	g.none(t, "delivered once")
}

// The service's log records carry the instance as fom_instance, so that an
// app whose logger has its own "instance" field gets no key twice.
func TestLogRecordsCarryTheInstanceOnce(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.InfoLevel)
	log := zap.New(core).With(zap.String("instance", "web-1"))
	f := newFake(t, sqliteStore(t), func(o *Options) { o.Logger = log })
	g := newGot()
	f.handle(t, "k", g, func(Fire) error { return Permanent(errors.New("no")) })
	if err := f.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Create(context.Background(), Spec{Namespace: "n", Name: "a", Kind: "k", At: t0}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); logs.FilterMessage("timer fire failed").Len() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no failure logged")
		}
		f.step(100 * time.Millisecond)
	}
	e := logs.FilterMessage("timer fire failed").All()[0]
	keys := map[string]int{}
	for _, fl := range e.Context {
		keys[fl.Key]++
	}
	if keys["instance"] != 1 || keys["fom_instance"] != 1 || e.ContextMap()["fom_instance"] != "test" {
		t.Fatalf("fields %v", e.Context)
	}
}
