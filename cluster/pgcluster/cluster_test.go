package pgcluster_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fom-go/fom/cluster/pgcluster"
	"github.com/fom-go/fom/internal/pgtest"
	"github.com/fom-go/fom/store/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// coordinator makes an instance for names on the tables of schema (made
// by the postgres store). Its connections trace their statements to
// tracer, when not nil.
func coordinator(t *testing.T, schema, id string, tracer pgx.QueryTracer, o pgcluster.Options, names ...string) *pgcluster.Coordinator {
	t.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, pgtest.DSN(), postgres.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	cfg, err := pgxpool.ParseConfig(pgtest.DSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	o.InstanceID = id
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 1500 * time.Millisecond
	}
	c, err := pgcluster.New(pool, schema, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Add(ctx, names...); err != nil {
		t.Fatal(err)
	}
	return c
}

// slowReads holds back, by a pause, each statement that reads the last
// recorded fire: as if the goroutine sending it were descheduled.
type slowReads time.Duration

func (d slowReads) TraceQueryStart(ctx context.Context, _ *pgx.Conn, q pgx.TraceQueryStartData) context.Context {
	if strings.Contains(q.SQL, "max(") {
		time.Sleep(time.Duration(d))
	}
	return ctx
}

func (slowReads) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func start(t *testing.T, c *pgcluster.Coordinator) {
	t.Helper()
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) })
}

// TestTheLastFireIsReadWithTheLease: the instance that takes a lease over
// is told the previous owner's last fire, never one it admitted itself
// under its new term (its plan would then resume past the fires missed
// during the failover, and nobody would run them).
func TestTheLastFireIsReadWithTheLease(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	names := make([]string, 8)
	for i := range names {
		names[i] = fmt.Sprintf("s%d", i)
	}
	a := coordinator(t, schema, "a", nil, pgcluster.Options{}, names...)
	start(t, a)
	if a.Owned() != len(names) {
		t.Fatalf("the only instance owns %d of %d", a.Owned(), len(names))
	}
	last := time.Now().Truncate(time.Second).Add(-time.Minute).UTC()
	for _, n := range names {
		if ok, err := a.Admit(ctx, n, last); !ok || err != nil {
			t.Fatalf("%s: admitted %v, %v", n, ok, err)
		}
	}

	var mu sync.Mutex
	told := map[string]time.Time{}
	// b's read of the last fires is held back 200 ms.
	b := coordinator(t, schema, "b", slowReads(200*time.Millisecond), pgcluster.Options{Acquired: func(s string, at time.Time) {
		mu.Lock()
		told[s] = at
		mu.Unlock()
	}}, names...)
	start(t, b)
	if b.Owned() != 0 {
		t.Fatalf("b took %d leases a holds", b.Owned())
	}
	// b asks for a later fire of each schedule, over and over, while it
	// takes the leases over.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var admitted atomic.Int64
	later := last.Add(30 * time.Second)
	for _, n := range names {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if ok, _ := b.Admit(ctx, n, later); ok {
					admitted.Add(1)
					return
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	a.Abandon()
	if _, err := pool.Exec(ctx, "UPDATE "+schema+".instances SET stopped = true WHERE id = 'a'"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE "+schema+".instances SET leases_until = now() WHERE id = 'a'"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); admitted.Load() < int64(len(names)); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			break
		}
	}
	close(stop)
	wg.Wait()
	if n := admitted.Load(); n != int64(len(names)) {
		t.Fatalf("b admitted %d of %d later fires", n, len(names))
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(told)
		mu.Unlock()
		if n == len(names) || time.Now().After(deadline) {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, n := range names {
		if at := told[n]; !at.Equal(last) {
			t.Errorf("%s: told the last fire was %s, want %s (a's)", n, at.Format(time.TimeOnly), last.Format(time.TimeOnly))
		}
	}
}

// TestALostAnswerIsAskedAgain: a fire record whose answer was lost after
// its commit is admitted when asked again, so it runs; asked again, a fire
// an earlier batch admitted is not; a database that never answers refuses
// the fire by the end of the renewal interval.
func TestALostAnswerIsAskedAgain(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	c := coordinator(t, schema, "a", nil, pgcluster.Options{}, "s")
	var lose atomic.Int64
	lost := errors.New("conn closed")
	c.SetLostAnswer(func() error {
		if lose.Add(-1) >= 0 {
			return lost
		}
		return nil
	})
	start(t, c)
	fire := time.Now().Truncate(time.Second).UTC()
	count := func() (n int) {
		t.Helper()
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".fire_records WHERE schedule = 's' AND planned = $1", fire).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	lose.Store(1)
	if ok, err := c.Admit(ctx, "s", fire); !ok || err != nil {
		t.Fatalf("a fire whose record's answer was lost: admitted %v, %v", ok, err)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d records of the fire", n)
	}

	lose.Store(1)
	if ok, err := c.Admit(ctx, "s", fire); ok || err != nil {
		t.Fatalf("the same fire asked for again, its answer lost: admitted %v, %v; want refused", ok, err)
	}

	lose.Store(1 << 30)
	began := time.Now()
	ok, err := c.Admit(ctx, "s", fire.Add(time.Second))
	if ok || !errors.Is(err, lost) {
		t.Fatalf("every answer lost: admitted %v, %v", ok, err)
	}
	if d := time.Since(began); d > 2*c.RenewEvery() {
		t.Fatalf("refused after %s, renewal interval %s", d, c.RenewEvery())
	}
}

// admitTogether asks c at once to admit the fires of names planned at
// fire (one batch), and returns its answers.
func admitTogether(c *pgcluster.Coordinator, fire time.Time, names ...string) (map[string]bool, map[string]error) {
	var wg sync.WaitGroup
	admitted, errs := map[string]bool{}, map[string]error{}
	var mu sync.Mutex
	for _, name := range names {
		wg.Go(func() {
			ok, err := c.Admit(context.Background(), name, fire)
			mu.Lock()
			admitted[name], errs[name] = ok, err
			mu.Unlock()
		})
	}
	wg.Wait()
	return admitted, errs
}

// TestAFireNotAfterItsLeasesLastIsRefusedAndItsBatchmatesAdmitted: a
// fire at or before its lease's last recorded fire (recorded by an owner
// whose term ended as this one's began, which the taker read into the
// lease) is refused, not errored, and the batch's others are admitted.
func TestAFireNotAfterItsLeasesLastIsRefusedAndItsBatchmatesAdmitted(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	c := coordinator(t, schema, "a", nil, pgcluster.Options{}, "s", "u")
	fire := time.Now().Truncate(time.Second).Add(time.Second).UTC()
	if _, err := pool.Exec(ctx, "INSERT INTO "+schema+".leases (schedule, owner, term, last_fire) VALUES ('s', '', 1, $1)", fire); err != nil {
		t.Fatal(err)
	}
	start(t, c)
	admitted, got := admitTogether(c, fire, "s", "u")
	if got["s"] != nil || admitted["s"] {
		t.Errorf("the fire recorded already: admitted %v, %v; want refused", admitted["s"], got["s"])
	}
	if got["u"] != nil || !admitted["u"] {
		t.Errorf("its batchmate: admitted %v, %v; want admitted", admitted["u"], got["u"])
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".fire_records WHERE schedule = 's'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d records of the refused fire (%v)", n, err)
	}
	if ok, err := c.Admit(ctx, "s", fire.Add(time.Second)); !ok || err != nil {
		t.Fatalf("the fire after the lease's last: admitted %v, %v", ok, err)
	}
}

// TestAFireWhoseLeaseWasLostIsRefusedAndItsBatchmatesAdmitted: a batch's
// insert writes the fires whose leases hold and skips one whose lease
// another instance took; the count of fires written falls short, and the
// batch's row is read back: the lost one is refused, not errored, its
// batchmate admitted.
func TestAFireWhoseLeaseWasLostIsRefusedAndItsBatchmatesAdmitted(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	c := coordinator(t, schema, "a", nil, pgcluster.Options{LeaseTTL: time.Minute}, "s", "u")
	start(t, c)
	// c still believes it holds u: its lease moved behind its back, by a
	// transaction that bumps c's epoch, as each that moves a lease away.
	for _, q := range []string{"UPDATE " + schema + ".leases SET owner = 'other', term = term + 1 WHERE schedule = 'u'", "UPDATE " + schema + ".instances SET epoch = epoch + 1 WHERE id = 'a'"} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	fire := time.Now().Truncate(time.Second).Add(time.Second).UTC()
	admitted, got := admitTogether(c, fire, "s", "u")
	if got["u"] != nil || admitted["u"] {
		t.Errorf("the fire whose lease was lost: admitted %v, %v; want refused", admitted["u"], got["u"])
	}
	if got["s"] != nil || !admitted["s"] {
		t.Errorf("its batchmate: admitted %v, %v; want admitted", admitted["s"], got["s"])
	}
	var recorded []string
	rows, err := pool.Query(ctx, "SELECT schedule FROM "+schema+".fire_records WHERE planned = $1 ORDER BY 1", fire)
	if err != nil {
		t.Fatal(err)
	}
	var n string
	if _, err := pgx.ForEachRow(rows, []any{&n}, func() error { recorded = append(recorded, n); return nil }); err != nil || len(recorded) != 1 || recorded[0] != "s" {
		t.Fatalf("recorded %v (%v), want s alone", recorded, err)
	}
}

// TestStopEndsTheRetries: a coordinator asking again for a fire whose
// answers are lost stops asking when it is stopped, rather than at the end
// of its renewal interval.
func TestStopEndsTheRetries(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	c := coordinator(t, schema, "a", nil, pgcluster.Options{LeaseTTL: time.Minute}, "s")
	asked := make(chan struct{}, 1)
	c.SetLostAnswer(func() error {
		select {
		case asked <- struct{}{}:
		default:
		}
		return errors.New("conn closed")
	})
	start(t, c)
	admitted := make(chan error, 1)
	go func() {
		_, err := c.Admit(ctx, "s", time.Now().Truncate(time.Second).UTC())
		admitted <- err
	}()
	<-asked // the first answer is lost: it asks again every recordRetry
	began := time.Now()
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-admitted; err == nil {
		t.Fatal("a fire whose every answer was lost was admitted")
	}
	if d := time.Since(began); d > c.RenewEvery()/2 {
		t.Fatalf("stopped after %s (renewal interval %s)", d, c.RenewEvery())
	}
}

// TestPruneFiresDeletesTheBatchesNoOneReads: an instance deletes the
// fire batches older than ten minutes that are compacted (their fires in
// the leases' last_fire) or whose owner holds no lease any more; recent
// ones stay, and so do old ones a taker of their owner's leases would
// still read.
func TestPruneFiresDeletesTheBatchesNoOneReads(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	c := coordinator(t, schema, "p1", nil, pgcluster.Options{}, "a", "b")
	start(t, c)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "INSERT INTO "+schema+".leases (schedule, owner, term) VALUES ('z', 'p2', 1)"); err != nil {
		t.Fatal(err)
	}
	batch := int64(0)
	ins := func(owner, age string, compacted bool) {
		t.Helper()
		batch++
		if _, err := pool.Exec(ctx, "INSERT INTO "+schema+".fire_batches (owner, batch, recorded_at, compacted, schedules, planned) VALUES ($1, $2, now() - $3::interval, $4, '{a}', ARRAY[now()])", owner, batch, age, compacted); err != nil {
			t.Fatal(err)
		}
	}
	ins("p1", "20 minutes", true)  // 1: compacted, old: deleted
	ins("p1", "5 minutes", true)   // 2: recent: kept
	ins("p1", "20 minutes", false) // 3: p1 holds leases, and its renewal compacts it: kept
	ins("p2", "20 minutes", false) // 4: p2 holds z, expired: its taker reads it: kept
	ins("p3", "20 minutes", false) // 5: p3 holds nothing: deleted
	ins("p3", "5 minutes", false)  // 6: recent: kept
	c.PruneFires(ctx)
	rows, err := pool.Query(ctx, "SELECT batch FROM "+schema+".fire_batches ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{2, 3, 4, 6}; !slices.Equal(got, want) {
		t.Fatalf("batches left: %v, want %v", got, want)
	}
}

// TestDeclarationsAreComparedByTheirDigestFirst: instances that declare
// the same share a digest and disagree on nothing; one that declares a
// schedule differently is found, whether the others' digests are known or
// not (an instance that has written none yet).
func TestDeclarationsAreComparedByTheirDigestFirst(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	a := coordinator(t, schema, "a", nil, pgcluster.Options{LeaseTTL: time.Minute}, "s", "u")
	b := coordinator(t, schema, "b", nil, pgcluster.Options{LeaseTTL: time.Minute}, "s", "u")
	start(t, a)
	start(t, b)
	same := map[string]map[string]string{"s": {"cron": "* * * * * *"}, "u": {"size": "10"}}
	other := map[string]map[string]string{"s": {"cron": "*/2 * * * * *"}, "u": {"size": "10"}}
	declare := func(c *pgcluster.Coordinator, d map[string]map[string]string) {
		t.Helper()
		if err := c.Declare(ctx, d, true); err != nil {
			t.Fatal(err)
		}
	}
	differ := func(want string) {
		t.Helper()
		ds, err := a.Disagreements(ctx)
		var got []string
		for _, d := range ds {
			got = append(got, d.Schedule+":"+strings.Join(d.Keys, ","))
		}
		if err != nil || strings.Join(got, " ") != want {
			t.Fatalf("disagreements %v (%v), want %q", got, err, want)
		}
	}
	digests := func() (string, string) {
		t.Helper()
		var x, y string
		if err := pool.QueryRow(ctx, "SELECT (SELECT decl_digest FROM "+schema+".instances WHERE id = 'a'), (SELECT decl_digest FROM "+schema+".instances WHERE id = 'b')").Scan(&x, &y); err != nil {
			t.Fatal(err)
		}
		return x, y
	}
	declare(a, same)
	declare(b, same)
	if x, y := digests(); x == "" || x != y {
		t.Fatalf("digests %q and %q: want one, known", x, y)
	}
	differ("")
	declare(b, other)
	if x, y := digests(); x == y {
		t.Fatalf("different declarations share the digest %q", x)
	}
	differ("s:cron")
	// a's digest unknown: the declarations are compared one by one.
	if _, err := pool.Exec(ctx, "UPDATE "+schema+".instances SET decl_digest = '' WHERE id = 'a'"); err != nil {
		t.Fatal(err)
	}
	differ("s:cron")
	declare(b, same)
	differ("")
}

// TestRenewalsFallBetweenWholeSeconds: with a renewal interval of a second
// or more, the next renewal is brought forward to a half-second (cron
// fires are on whole seconds), by less than a second and never past the
// interval; under a second, it is the interval.
func TestRenewalsFallBetweenWholeSeconds(t *testing.T) {
	for _, ttl := range []time.Duration{15 * time.Second, 3 * time.Second, 1500 * time.Millisecond} {
		c, err := pgcluster.New(&pgxpool.Pool{}, "s", pgcluster.Options{InstanceID: "a", LeaseTTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		every := c.RenewEvery()
		base := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
		for _, off := range []time.Duration{0, time.Millisecond, 499 * time.Millisecond, 500 * time.Millisecond, 501 * time.Millisecond, 999 * time.Millisecond} {
			now := base.Add(off)
			d := c.RenewalAfter(now)
			if every < time.Second {
				if d != every {
					t.Errorf("TTL %s, at %s: next in %s, want %s", ttl, now.Format("05.000"), d, every)
				}
				continue
			}
			at := now.Add(d)
			if d > every || d <= every-time.Second || at.Nanosecond() != int(500*time.Millisecond) {
				t.Errorf("TTL %s (every %s), at %s: next at %s, in %s; want a half-second in (%s, %s]", ttl, every, now.Format("05.000"), at.Format("05.000"), d, every-time.Second, every)
			}
		}
	}
}

// pauseOn holds back each statement whose text holds substr until release
// closes, once started is sent on.
type pauseOn struct {
	substr  string
	started chan struct{}
	release chan struct{}
}

func (p *pauseOn) TraceQueryStart(ctx context.Context, _ *pgx.Conn, q pgx.TraceQueryStartData) context.Context {
	if strings.Contains(q.SQL, p.substr) {
		p.started <- struct{}{}
		<-p.release
	}
	return ctx
}

func (*pauseOn) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestDeclaringDoesNotHoldTheFiresBack: an instance's fires are recorded,
// and its heartbeat written, while it writes its declarations (seconds at
// 10 000 schedules under load): the declaration does not lock the
// instance's row for its length.
func TestDeclaringDoesNotHoldTheFiresBack(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	pause := &pauseOn{substr: "INSERT INTO " + pgx.Identifier{schema}.Sanitize() + ".declarations", started: make(chan struct{}), release: make(chan struct{})}
	a := coordinator(t, schema, "a", pause, pgcluster.Options{LeaseTTL: 30 * time.Second}, "x")
	start(t, a)
	declared := make(chan error, 1)
	go func() { declared <- a.Declare(ctx, map[string]map[string]string{"x": {"cron": "* * * * * *"}}, true) }()
	<-pause.started // the declaration's transaction is open, its lock taken
	admitted := make(chan error, 1)
	go func() {
		ok, err := a.Admit(ctx, "x", time.Now().Truncate(time.Second).UTC())
		if err == nil && !ok {
			err = errors.New("refused")
		}
		admitted <- err
	}()
	var heartbeat error
	hctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, heartbeat = pool.Exec(hctx, "UPDATE "+pgx.Identifier{schema}.Sanitize()+".instances SET heartbeat_at = now() WHERE id = 'a'")
	cancel()
	var fire error
	select {
	case fire = <-admitted:
	case <-time.After(3 * time.Second):
		fire = errors.New("not recorded after 3s")
		defer func() { <-admitted }()
	}
	close(pause.release)
	if err := <-declared; err != nil {
		t.Fatal(err)
	}
	if fire != nil || heartbeat != nil {
		t.Fatalf("while the instance declared: its fire %v, its heartbeat %v", fire, heartbeat)
	}
}

// TestATakerOfADeadInstancesLeasesTellsTheOthers: an instance that takes
// its share of a dead instance's leases tells the others
// (leases:expired:<id>), which take theirs at once rather than at their
// own renewals, up to a renewal interval apart.
func TestATakerOfADeadInstancesLeasesTellsTheOthers(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	channel := "fom_dead_" + schema
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.Background(), "UNLISTEN *")
	names := numbered(20)
	o := pgcluster.Options{Channel: channel, Notified: func(string) {}}
	a := coordinator(t, schema, "a", nil, o, names...)
	start(t, a)
	b := coordinator(t, schema, "b", nil, o, names...)
	start(t, b)
	waitOwned(t, map[string]*pgcluster.Coordinator{"a": a, "b": b}, map[string]int{"a": 10, "b": 10})
	a.Abandon()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		n, err := conn.Conn().WaitForNotification(wctx)
		if err != nil {
			t.Fatalf("no %q heard after a died: %v", "leases:expired:b", err)
		}
		if n.Payload == "leases:expired:b" {
			break
		}
	}
	waitOwned(t, map[string]*pgcluster.Coordinator{"b": b}, map[string]int{"b": len(names)})
}

// TestAnInstanceWhoseLeasesEndedIsNotLiveThoughItHeartbeats: an
// instance that heartbeats but whose leases ended (an earlier release,
// which cannot renew them since migration 18, or one whose renewals fail)
// is not counted among the live: a starting instance takes every lease,
// its share of one live instance, not a half it would leave to run
// nowhere.
func TestAnInstanceWhoseLeasesEndedIsNotLiveThoughItHeartbeats(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	names := numbered(10)
	a := coordinator(t, schema, "a", nil, pgcluster.Options{}, names...)
	for _, q := range []string{
		"INSERT INTO " + schema + ".instances (id, host, version, started_at, heartbeat_at) VALUES ('old', 'h', '0', now(), now())",
		"INSERT INTO " + schema + ".leases (schedule, owner, term) SELECT n, 'old', 1 FROM unnest($1::text[]) AS n",
	} {
		args := []any{}
		if strings.Contains(q, "$1") {
			args = append(args, names)
		}
		if _, err := pool.Exec(ctx, q, args...); err != nil {
			t.Fatal(err)
		}
	}
	start(t, a)
	if n := a.Owned(); n != len(names) {
		t.Fatalf("a holds %d leases, want all %d: the instance whose leases ended was counted live", n, len(names))
	}
}
