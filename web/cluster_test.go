package web

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/internal/pgtest"
	"github.com/fom-go/fom/store/postgres"
)

type lonely struct {
	fom.Schedule `name:"lonely" cron:"0 0 * * * *"`
}

func (*lonely) Run(context.Context) (any, error) { return nil, nil }

// alphaV2 is alpha as a newer release declares it.
type alphaV2 struct {
	fom.Schedule `name:"alpha" fixedRate:"2h" remark:"<script>alert('remark')</script>"`
	Size         fom.Value[int] `fom:"size" default:"20"`
}

func (*alphaV2) Run(context.Context) (any, error) { return "ok", nil }

// TestClusterPageAndAPI: the page and API show the instances, who owns
// each schedule, and a schedule no live instance can run.
func TestClusterPageAndAPI(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	newApp := func(id string, jobs ...any) *fom.App { return clusterApp(t, schema, id, jobs...) }
	gone := newApp("gone", &lonely{})
	if err := gone.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	a := newApp("web-1", &alpha{}, &beta{})
	b := newApp("web-2", &alpha{}, &beta{})
	c := newApp("web-3", &alphaV2{}, &beta{}) // a rolling deploy: the newest code declares alpha differently
	defer a.Stop(ctx)
	defer b.Stop(ctx)
	defer c.Stop(ctx)
	h, err := NewHandler(a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, app: a, h: h}
	var v fom.ClusterView
	f.do("GET", "/fom/api/cluster", "").expect(t, 200, "ok").data(t, &v)
	live := 0
	for _, in := range v.Instances {
		if in.Live {
			live++
		}
	}
	if v.Instance != "web-1" || live != 3 || v.Owners["alpha"] == "" || len(v.Orphaned) != 1 || v.Orphaned[0] != "lonely" {
		t.Fatalf("cluster view %+v", v)
	}
	if len(v.Disagreements) != 1 || v.Disagreements[0].Schedule != "alpha" || strings.Join(v.Disagreements[0].Keys, ",") != "fixedRate,size" {
		t.Fatalf("disagreements %+v", v.Disagreements)
	}
	const said = `schedule alpha is declared differently: 1 instance on the newest declaration (web-3: fixedRate &#34;2h&#34;, size &#34;20&#34;); 2 instances on an older declaration (web-1, web-2: fixedRate &#34;1h&#34;, size &#34;10&#34;)`
	page := f.do("GET", "/fom/", "").body
	if !strings.Contains(page, said) {
		t.Errorf("the cluster card does not say how the instances disagree:\n%s", page)
	}
	for _, want := range []string{`data-testid="cluster"`, `data-testid="instance-web-1"`, `data-testid="instance-web-2"`, `data-testid="orphaned"`, "lonely", `data-testid="owner"> on web-`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if sp := f.do("GET", "/fom/schedules/alpha", "").body; !strings.Contains(sp, `data-testid="stats-scope"`) || !strings.Contains(sp, "every instance") {
		t.Error("the schedule page does not say its statistics are the cluster's")
	}
	f.do("GET", "/fom/api/schedules/alpha/stats?scope=cluster", "").expect(t, 200, "ok")
	// A single-process app has no cluster.
	single := newFixture(t, Options{})
	single.do("GET", "/fom/api/cluster", "").expect(t, 404, "this app is not one of a cluster: its store is not shared (PostgreSQL)")
	if strings.Contains(single.do("GET", "/fom/", "").body, `data-testid="cluster"`) {
		t.Fatal("a single-process page shows a cluster")
	}
}

type everySecond struct {
	fom.Schedule `name:"tick" cron:"* * * * * *"`
}

func (*everySecond) Run(context.Context) (any, error) { return nil, nil }

type everySecondToo struct {
	fom.Schedule `name:"tock" cron:"* * * * * *"`
}

func (*everySecondToo) Run(context.Context) (any, error) { return nil, nil }

// TestClusterPageTellsTheClustersTruth: every instance's page shows the
// cluster's figures, not its own: a non-owner's table counts the rounds
// every instance ran and shows the cluster's last fire; history rows name
// their instance; an owner that stopped heartbeating is shown as not
// answering, with when another instance takes over; and with more
// instances than schedules no instance holds two leases.
func TestClusterPageTellsTheClustersTruth(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	var apps []*fom.App
	for _, id := range []string{"t-1", "t-2", "t-3"} {
		apps = append(apps, clusterApp(t, schema, id, &everySecond{}, &everySecondToo{}))
	}
	// Leases spread: two schedules, three instances, none holds both.
	owners := func() map[string]string {
		v, _, err := apps[0].Cluster(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return v.Owners
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		o := owners()
		if o["tick"] != "" && o["tock"] != "" && o["tick"] != o["tock"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leases not spread: %v", o)
		}
	}
	owner := owners()["tick"]
	var bystander *fom.App
	for _, a := range apps {
		if a.InstanceID() != owner && a.InstanceID() != owners()["tock"] {
			bystander = a
		}
	}
	time.Sleep(2200 * time.Millisecond) // a few fires
	for _, a := range apps {
		if err := a.FlushStats(ctx); err != nil {
			t.Fatal(err)
		}
	}
	h, err := NewHandler(bystander, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, app: bystander, h: h}
	if own := bystander.Schedule("tick").Info().Rounds; own != 0 {
		t.Fatalf("the bystander ran %d rounds itself", own)
	}
	page := f.do("GET", "/fom/", "").body
	row := page[strings.Index(page, `data-testid="row-tick"`):]
	row = row[:strings.Index(row, "</tr>")]
	if strings.Contains(row, `data-testid="rounds" title="rounds every instance ran, over the statistics&#39; retention days">0<`) || !strings.Contains(row, "rounds every instance ran") {
		t.Fatalf("the bystander's table does not count the cluster's rounds:\n%s", row)
	}
	if strings.Contains(row, `data-testid="last" title="">—`) {
		t.Fatalf("the bystander's table shows no last fire:\n%s", row)
	}
	sp := f.do("GET", "/fom/schedules/tick", "").body
	if !strings.Contains(sp, owner+" #1") {
		t.Errorf("the history does not name rounds by instance (%s #1)", owner)
	}
	// An owner that stops heartbeating (as a killed process would) is
	// shown as not answering, and its schedule with when it is taken over.
	if _, err := pool.Exec(ctx, "INSERT INTO "+schema+".instances (id, host, version, started_at, heartbeat_at, leases_until) VALUES ('ghost', 'h', '', now() - interval '1 minute', now() - interval '3 seconds', now() + interval '30 seconds')"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE "+schema+".leases SET owner = 'ghost', term = term + 1 WHERE schedule = 'tock'"); err != nil {
		t.Fatal(err)
	}
	page = f.do("GET", "/fom/", "").body
	for _, want := range []string{`data-testid="instance-state">not answering since`, "owner ghost not answering since", "another instance takes over by"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// clusterApp starts an App of the cluster on schema with jobs, its leases
// lasting 1.5 s; it stops with the test.
func clusterApp(t *testing.T, schema, id string, jobs ...any) *fom.App {
	t.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, pgtest.DSN(), postgres.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	app, err := fom.New(fom.WithStore(st), fom.WithInstanceID(id), fom.WithLeaseTTL(1500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if _, err := app.Register(j); err != nil {
			t.Fatal(err)
		}
	}
	if err := app.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Stop(context.Background()) })
	return app
}
