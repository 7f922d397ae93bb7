package web

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/statistics"
	"github.com/fom-go/fom/store"
)

// stuckJob's task ignores its context and its timeout.
type stuckJob struct {
	fom.Schedule `name:"stuck" execOnLoad:"true" fixedRate:"1h" taskOverTime:"20ms"`
	release      chan struct{}
}

func (j *stuckJob) Run(context.Context) (any, error) { <-j.release; return nil, nil }

func TestStalledScheduleIsShownAsStalled(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	job := &stuckJob{release: make(chan struct{})}
	defer close(job.release)
	if _, err := f.app.Register(job); err != nil {
		t.Fatal(err)
	}
	var v scheduleView
	deadline := time.Now().Add(5 * time.Second)
	for !v.Stalled {
		if time.Now().After(deadline) {
			t.Fatalf("never stalled: %+v", v)
		}
		time.Sleep(5 * time.Millisecond)
		f.do("GET", "/fom/api/schedules/stuck", "").expect(t, 200, "ok").data(t, &v)
	}
	if v.Abandoned != 1 || v.Counts["timeout"] != 1 {
		t.Fatalf("view %+v", v)
	}
	table := f.do("GET", "/fom/fragments/schedules", "").body
	row := table[strings.Index(table, `data-testid="row-stuck"`):]
	row = row[:strings.Index(row, "</tr>")]
	if !strings.Contains(row, `data-testid="stalled"`) || !strings.Contains(row, "held by tasks past their timeout") {
		t.Fatalf("row does not show the stall: %s", row)
	}
	if page := f.do("GET", "/fom/schedules/stuck", "").body; !strings.Contains(page, `data-testid="stall-reason"`) {
		t.Fatal("schedule page does not say why")
	}
	if alpha := f.do("GET", "/fom/fragments/schedules", "").body; strings.Count(alpha, `data-testid="stalled"`) != 1 {
		t.Fatal("only the stuck schedule is stalled")
	}
}

// TestUnsavedFailuresAreShown: failures dropped before a flush are counted
// on the schedule page and in the statistics API.
func TestUnsavedFailuresAreShown(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	st := f.app.Schedule("beta").Stats()
	for range 150 {
		st.Record(statistics.Sample{TaskID: "beta", Status: statistics.Failed})
	}
	page := f.do("GET", "/fom/schedules/beta", "").body
	if !strings.Contains(page, "50 failures since the start were not saved") {
		t.Fatal("the page does not show the unsaved failures")
	}
	var body struct {
		Unsaved int64 `json:"unsavedFailures"`
	}
	f.do("GET", "/fom/api/schedules/beta/stats", "").expect(t, 200, "ok").data(t, &body)
	if body.Unsaved != 50 {
		t.Fatalf("API unsaved %d", body.Unsaved)
	}
}

// TestEditAfterTheStoreFileWasRemoved is refused, not acknowledged and
// lost; Stop reports the statistics it could not save.
func TestEditAfterTheStoreFileWasRemoved(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	app, err := fom.New(fom.WithDataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := app.Register(&alpha{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHandler(app, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, app: app, h: h, dir: dir}
	if err := os.Remove(filepath.Join(dir, "fom.db")); err != nil {
		t.Fatal(err)
	}
	r := f.do("PATCH", "/fom/api/schedules/alpha/config", `{"remark":"lost?"}`)
	if r.status != 503 || !strings.Contains(r.env.Msg, "removed or replaced") || !strings.Contains(r.env.Msg, "fom.db") {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if got := sc.Config().Get("remark"); got == "lost?" {
		t.Fatal("the refused edit is in force")
	}
	sc.Stats().Record(statistics.Sample{TaskID: "alpha", Status: statistics.Failed})
	if err := app.Stop(context.Background()); !errors.Is(err, store.ErrGone) {
		t.Fatalf("stop: %v", err)
	}
}
