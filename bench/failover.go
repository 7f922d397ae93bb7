package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/store/postgres"
)

// The failover scenario: three instances share N every-second schedules
// on PostgreSQL, one of them a child process, which is killed with
// SIGKILL once the leases are spread. For each schedule the child held,
// the takeover is the time from the kill to the first fire a survivor
// runs; it is bounded by the lease TTL (the child's leases expire) and a
// renewal interval (a survivor's next renewal takes them). Measured for
// the default TTL and for a shorter one, with the lease and heartbeat
// statements each costs.

// failoverJob runs every second and notes, after the kill, each
// schedule's first round.
type failoverJob struct {
	fom.Schedule `cron:"* * * * * *"`
	rec          *takeovers
}

func (*failoverJob) Run(context.Context) (any, error) { return nil, nil }

func (j *failoverJob) OnComplete(ctx context.Context, r fom.Round) {
	if len(r.Results) == 1 {
		j.rec.note(fom.FromContext(ctx).Name(), r.Results[0].Started)
	}
}

// takeovers keeps each schedule's first round after the kill.
type takeovers struct {
	mu     sync.Mutex
	killed time.Time
	first  map[string]time.Time
}

func (t *takeovers) note(name string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.killed.IsZero() && at.After(t.killed) {
		if _, ok := t.first[name]; !ok {
			t.first[name] = at
		}
	}
}

// failoverChild runs the instance that is killed: it prints "started"
// once its App runs and waits to be killed.
func failoverChild(spec string, n int) error {
	schema, ttlText, _ := strings.Cut(spec, ":")
	ttl, err := time.ParseDuration(ttlText)
	if err != nil {
		return err
	}
	st, err := postgres.Open(context.Background(), databaseURL(), postgres.WithSchema(schema))
	if err != nil {
		return err
	}
	app, err := fom.New(fom.WithStore(st), fom.WithInstanceID("victim"), fom.WithLeaseTTL(ttl))
	if err != nil {
		return err
	}
	rec := &takeovers{first: map[string]time.Time{}}
	for i := range n {
		if _, err := app.Register(&failoverJob{rec: rec}, fom.Named(fmt.Sprintf("job-%d", i))); err != nil {
			return err
		}
	}
	if err := app.Start(context.Background()); err != nil {
		return err
	}
	fmt.Println("started")
	select {}
}

type failoverRun struct {
	ttl                time.Duration
	n, orphaned, taken int
	p50, p99, max      time.Duration
	bound              time.Duration
	leaseStmtsPerS     float64 // per instance
	err                string
}

func failoverOnce(dsn string, n int, ttl time.Duration, log func(string)) (r failoverRun) {
	r.ttl, r.n, r.bound = ttl, n, ttl+ttl/3
	ctx := context.Background()
	schema := randomSchema("fombench_")
	defer dropSchema(dsn, schema)
	admin, err := pgxpool.New(ctx, dsn)
	if err != nil {
		r.err = err.Error()
		return r
	}
	defer admin.Close()
	// The victim first, so that it holds every lease and gives the
	// survivors their share as they join.
	child := exec.Command(os.Args[0], "-failover-child", schema+":"+ttl.String(), "-failover-n", strconv.Itoa(n))
	child.Env = os.Environ()
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err == nil {
		err = child.Start()
	}
	if err != nil {
		r.err = err.Error()
		return r
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	if sc := bufio.NewScanner(out); !sc.Scan() || sc.Text() != "started" {
		r.err = "the victim did not start"
		return r
	}
	rec := &takeovers{first: map[string]time.Time{}}
	var survivors []*fom.App
	for i := range 2 {
		st, err := postgres.Open(ctx, dsn, postgres.WithSchema(schema))
		if err != nil {
			r.err = err.Error()
			return r
		}
		defer st.Close()
		app, err := fom.New(fom.WithStore(st), fom.WithInstanceID(fmt.Sprintf("survivor-%d", i+1)), fom.WithLeaseTTL(ttl))
		if err == nil {
			for j := 0; j < n && err == nil; j++ {
				_, err = app.Register(&failoverJob{rec: rec}, fom.Named(fmt.Sprintf("job-%d", j)))
			}
		}
		if err == nil {
			err = app.Start(ctx)
		}
		if err != nil {
			r.err = err.Error()
			return r
		}
		defer app.Stop(context.Background())
		survivors = append(survivors, app)
	}
	// Spread: the victim gives leases back at its renewals.
	var victimHeld []string
	for deadline := time.Now().Add(4 * ttl); ; {
		victimHeld = victimHeld[:0]
		rows, err := admin.Query(ctx, "SELECT l.schedule FROM "+schema+".leases l JOIN "+schema+".instances i ON i.id = l.owner WHERE l.owner = 'victim' AND i.leases_until > now()")
		if err == nil {
			for rows.Next() {
				var s string
				rows.Scan(&s)
				victimHeld = append(victimHeld, s)
			}
			rows.Close()
		}
		if len(victimHeld) > 0 && len(victimHeld) <= (n+2)/3 {
			break
		}
		if time.Now().After(deadline) {
			r.err = fmt.Sprintf("leases not spread: the victim holds %d of %d", len(victimHeld), n)
			return r
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The survivors' lease and heartbeat statements, over two renewals.
	t0, c0 := time.Now(), counters(survivors)
	time.Sleep(2 * ttl / 3)
	r.leaseStmtsPerS = float64(counters(survivors)[0]-c0[0]) / time.Since(t0).Seconds() / 2
	// Half-way between two fires.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1500 * time.Millisecond)))
	rec.mu.Lock()
	rec.killed = time.Now()
	rec.mu.Unlock()
	child.Process.Signal(syscall.SIGKILL)
	r.orphaned = len(victimHeld)
	deadline := time.Now().Add(2*ttl + 5*time.Second)
	var delays []time.Duration
	for {
		delays = delays[:0]
		rec.mu.Lock()
		for _, s := range victimHeld {
			if at, ok := rec.first[s]; ok {
				delays = append(delays, at.Sub(rec.killed))
			}
		}
		rec.mu.Unlock()
		if len(delays) == len(victimHeld) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.taken = len(delays)
	slices.Sort(delays)
	if len(delays) > 0 {
		r.p50, r.p99, r.max = percentile(delays, 0.5), percentile(delays, 0.99), delays[len(delays)-1]
	}
	log(fmt.Sprintf("  failover TTL %s N=%d: %d of %d taken over, p50 %s p99 %s max %s (bound %s), %.2f lease statements/s an instance",
		ttl, n, r.taken, r.orphaned, ms(r.p50), ms(r.p99), ms(r.max), r.bound, r.leaseStmtsPerS))
	return r
}

// failoverScenario measures takeovers at each TTL.
func failoverScenario(dsn string, n int, ttls []time.Duration, log func(string)) string {
	var out strings.Builder
	fmt.Fprintf(&out, "### Failover: the owner of a third of %d every-second schedules killed with SIGKILL\n\n", n)
	out.WriteString("| lease TTL | schedules orphaned | taken over | first fire after the kill: p50 | p99 | max | bound (TTL + a renewal) | lease and heartbeat statements/s an instance |\n|---|---|---|---|---|---|---|---|\n")
	for _, ttl := range ttls {
		r := failoverOnce(dsn, n, ttl, log)
		if r.err != "" {
			fmt.Fprintf(&out, "| %s | failed: %s | | | | | | |\n", ttl, r.err)
			continue
		}
		fmt.Fprintf(&out, "| %s | %d | %d | %s | %s | %s | %s | %.2f |\n", ttl, r.orphaned, r.taken, ms(r.p50), ms(r.p99), ms(r.max), r.bound, r.leaseStmtsPerS)
	}
	out.WriteString("\nA takeover waits for the victim's leases to expire (the TTL after its last renewal) and for a survivor's next renewal (a third of the TTL); the missed fire then runs at once.\n\n")
	return out.String()
}
