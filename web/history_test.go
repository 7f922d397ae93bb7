package web

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/fom-go/fom/statistics"
)

// TestRunHistory: an exec-now by a signed-in operator shows as a round of
// the history, "exec by ops@…", on the page and in the API, before and
// after the statistics flush; the round opens to its task; a missing or
// malformed round says why.
func TestRunHistory(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{BasicAuthUser: "ops", BasicAuthPassword: "s3cret"})
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:s3cret"))
	sc := f.app.Schedule("alpha")
	f.do("POST", "/fom/api/schedules/alpha/exec", "", "Authorization", auth).expect(t, 200, "ok")
	deadline := time.Now().Add(10 * time.Second)
	for sc.Info().Rounds < 1 || len(sc.Stats().RecentRounds()) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the exec-now round did not complete")
		}
		time.Sleep(5 * time.Millisecond)
	}
	check := func(when string) statistics.RoundRecord {
		var rounds []statistics.RoundRecord
		f.do("GET", "/fom/api/schedules/alpha/rounds", "", "Authorization", auth).expect(t, 200, "ok").data(t, &rounds)
		if len(rounds) != 1 {
			t.Fatalf("%s: %d rounds listed", when, len(rounds))
		}
		r := rounds[0]
		if r.Cause != "exec" || !strings.HasPrefix(r.By, "ops@") || r.Outcome != "success" || r.Counts["success"] != 1 || r.Number != 1 || r.Seq != 1 || r.Tasks != nil {
			t.Fatalf("%s: %+v", when, r)
		}
		page := f.do("GET", "/fom/schedules/alpha", "", "Authorization", auth).body
		if strings.Count(page, `data-testid="round"`) != 1 || !strings.Contains(page, "exec by ops@") {
			t.Fatalf("%s: the page does not list the round: %s", when, page[strings.Index(page, "Recent rounds"):][:3000])
		}
		return r
	}
	check("in memory")
	if err := f.app.FlushStats(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(sc.Stats().RecentRounds()); n != 0 {
		t.Fatalf("%d rounds still in memory after a flush", n)
	}
	check("stored")

	var one statistics.RoundRecord
	f.do("GET", "/fom/api/schedules/alpha/rounds/1", "", "Authorization", auth).expect(t, 200, "ok").data(t, &one)
	if len(one.Tasks) != 1 || one.Tasks[0].ID != "alpha" || one.Tasks[0].Status != "success" || one.Tasks[0].Started.IsZero() {
		t.Fatalf("round 1's tasks: %+v", one.Tasks)
	}
	frag := f.do("GET", "/fom/schedules/alpha/rounds/1", "", "Authorization", auth, "HX-Request", "true")
	if frag.status != 200 || strings.Count(frag.body, `data-testid="round-task"`) != 1 || !strings.Contains(frag.body, "<td>alpha</td>") {
		t.Fatalf("fragment: %d %s", frag.status, frag.body)
	}
	f.do("GET", "/fom/api/schedules/alpha/rounds/7", "", "Authorization", auth).expect(t, 404, "schedule alpha: round 7 is not in the history (it keeps the last 50)")
	f.do("GET", "/fom/api/schedules/alpha/rounds/x", "", "Authorization", auth).expect(t, 400, `round "x": a sequence number from 1, as the history lists it`)
	f.do("GET", "/fom/api/schedules/alpha/rounds?limit=5000", "", "Authorization", auth).expect(t, 400, `limit "5000": a number from 1 to 1000`)
	if r := f.do("GET", "/fom/schedules/alpha/rounds/7", "", "Authorization", auth, "HX-Request", "true"); r.status != 200 || !strings.Contains(r.body, "round 7 is not in the history") {
		t.Fatalf("missing round in place: %d %s", r.status, r.body)
	}
}
