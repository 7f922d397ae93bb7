package statistics

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/fom-go/fom/store/sqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var day1 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func TestHistogramQuantilesWithinSixPercent(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	var all []time.Duration
	for range 20000 {
		d := time.Duration(math.Exp(r.NormFloat64()*2+10)) * time.Microsecond // log-normal around 22ms
		h.Add(d)
		all = append(all, d)
	}
	slices.Sort(all)
	for _, q := range []float64{0.5, 0.95, 0.99} {
		exact := all[int(q*float64(len(all)))-1]
		got := h.Quantile(q)
		if rel := math.Abs(float64(got-exact)) / float64(exact); rel > 0.07 {
			t.Errorf("p%v: got %v, exact %v (%.1f%% off)", q*100, got, exact, rel*100)
		}
	}
	var a, b Histogram
	for i, d := range all {
		if i%2 == 0 {
			a.Add(d)
		} else {
			b.Add(d)
		}
	}
	a.Merge(&b)
	if a.Quantile(0.95) != h.Quantile(0.95) || a.Count() != h.Count() {
		t.Fatal("merged halves differ from the whole")
	}
	for _, d := range []time.Duration{0, time.Microsecond, 15 * time.Microsecond, 16 * time.Microsecond, 17 * time.Millisecond, 3 * time.Hour} {
		lo, hi := bounds(bucketOf(d))
		if d < lo || d >= hi {
			t.Errorf("%v not in its bucket [%v, %v)", d, lo, hi)
		}
	}
}

func TestDayAggregatesBucketsAndRings(t *testing.T) {
	t.Parallel()
	clk := clockwork.NewFakeClockAt(day1)
	set := DefaultSettings()
	set.Failures = 2
	s, err := New("job", clk, set)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []time.Duration{500 * time.Millisecond, 2 * time.Second, 30 * time.Second, 2 * time.Minute, 20 * time.Minute, 2 * time.Hour} {
		s.Record(Sample{TaskID: "t", Status: Success, Cost: c})
	}
	s.Record(Sample{TaskID: "bad", Status: Failed, Cost: time.Millisecond, Err: fmt.Errorf("sync: %w", errors.New("db down"))})
	s.Record(Sample{TaskID: "slow", Status: Timeout, Cost: time.Second, Err: errors.New("timed out")})
	s.Record(Sample{TaskID: "full", Status: Rejected, Err: errors.New("queue full")})
	s.RecordLateness(time.Time{}, 3*time.Millisecond) // zero: the clock's day
	s.RecordLateness(clk.Now(), time.Millisecond)
	// A round counts on the day it started, whatever the clock says when
	// it is recorded.
	s.RecordLateness(day1.Add(-11*time.Hour), 7*time.Millisecond) // 23:00 the day before
	if prev := s.Day(day1.AddDate(0, 0, -1)); prev.Rounds != 1 || prev.LateMax != 7*time.Millisecond {
		t.Fatalf("previous day's lateness %+v", prev)
	}
	d := s.Day(day1)
	if d.Count != 9 || d.ByStatus["success"] != 6 || d.ByStatus["failed"] != 1 || d.ByStatus["timeout"] != 1 || d.ByStatus["rejected"] != 1 {
		t.Fatalf("day %+v", d)
	}
	if d.Min != 0 || d.Max != 2*time.Hour {
		t.Fatalf("min %v max %v", d.Min, d.Max)
	}
	if want := [6]int64{3, 2, 1, 1, 1, 1}; d.Buckets != want {
		t.Fatalf("buckets %v, want %v", d.Buckets, want)
	}
	if d.Rounds != 2 || d.LateMax != 3*time.Millisecond || d.LateAvg != 2*time.Millisecond {
		t.Fatalf("lateness %+v", d)
	}
	f := s.Failures()
	if len(f) != 2 || f[0].TaskID != "full" || f[1].TaskID != "slow" {
		t.Fatalf("failures ring %+v", f)
	}
	if got := s.Results(); len(got) != 9 || got[0].TaskID != "full" {
		t.Fatalf("results %+v", got)
	}
	// Editing thresholds re-buckets the stored histogram.
	set.Thresholds = [5]time.Duration{time.Millisecond * 100, time.Second * 5, time.Minute * 5, time.Minute * 30, time.Hour * 3}
	if err := s.SetSettings(set); err != nil {
		t.Fatal(err)
	}
	if got := s.Day(day1).Buckets; got != [6]int64{2, 3, 2, 1, 1, 0} {
		t.Fatalf("re-bucketed %v", got)
	}
	bad := set
	bad.Thresholds[2] = time.Second
	if err := s.SetSettings(bad); err == nil || !strings.Contains(err.Error(), "thresholds[2] = 1s: must be greater than thresholds[1] = 5s") {
		t.Fatalf("got %v", err)
	}
}

type stackErr struct{}

func (stackErr) Error() string      { return "panic: boom" }
func (stackErr) StackTrace() string { return "goroutine 7 [running]:\nmain.f()" }

func TestPersistAcrossRestartAndRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	clk := clockwork.NewFakeClockAt(day1)
	st, err := sqlite.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := New("job", clk, DefaultSettings())
	s.Record(Sample{TaskID: "a", Status: Success, Cost: time.Second})
	s.Record(Sample{TaskID: "b", Status: Failed, Cost: 2 * time.Second, Err: fmt.Errorf("wrapped: %w", stackErr{})})
	set := DefaultSettings()
	set.RetentionDays = 3
	if err := s.SaveSettings(ctx, st, set); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx, st); err != nil {
		t.Fatal(err)
	}
	st.Close()

	// The next day, a new process.
	clk.Advance(24 * time.Hour)
	st, _ = sqlite.Open(ctx, dir)
	defer st.Close()
	s2, _ := New("job", clk, DefaultSettings())
	s2.Record(Sample{TaskID: "c", Status: Success, Cost: time.Second}) // before Load: merged
	if w, err := s2.Load(ctx, st); err != nil || len(w) != 0 {
		t.Fatalf("load %v %v", w, err)
	}
	days := s2.Days()
	if len(days) != 3 || days[1].Count != 2 || days[2].Count != 1 || s2.Settings().RetentionDays != 3 {
		t.Fatalf("days %+v settings %+v", days, s2.Settings())
	}
	f := s2.Failures()
	if len(f) != 1 || f[0].Stack != "goroutine 7 [running]:\nmain.f()" || f[0].Error != "wrapped: panic: boom" {
		t.Fatalf("failures %+v", f)
	}
	// Three days later yesterday falls out of the window and the store.
	clk.Advance(3 * 24 * time.Hour)
	s2.Record(Sample{TaskID: "d", Status: Success})
	if err := s2.Flush(ctx, st); err != nil {
		t.Fatal(err)
	}
	stored, _ := st.LoadDays(ctx, "job", day1.AddDate(-1, 0, 0))
	if len(stored) != 1 {
		t.Fatalf("stored days after retention: %d", len(stored))
	}
}

func TestCorruptDayIsSkipped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _ := sqlite.Open(ctx, t.TempDir())
	defer st.Close()
	clk := clockwork.NewFakeClockAt(day1)
	s, _ := New("job", clk, DefaultSettings())
	s.Record(Sample{Status: Success})
	s.Flush(ctx, st)
	st.PutSetting(ctx, "job", SettingKey, "{not json")
	bad := []byte(`{"v":1,"hist":{"x":1}}`)
	if err := st.SaveStats(ctx, storeBatch("job", day1.AddDate(0, 0, -1), bad)); err != nil {
		t.Fatal(err)
	}
	s2, _ := New("job", clk, DefaultSettings())
	w, err := s2.Load(ctx, st)
	if err != nil || len(w) != 2 || s2.Day(day1).Count != 1 {
		t.Fatalf("warnings %v err %v", w, err)
	}
}

func TestExport(t *testing.T) {
	t.Parallel()
	clk := clockwork.NewFakeClockAt(day1)
	s, _ := New("job", clk, DefaultSettings())
	s.Record(Sample{TaskID: "a", Status: Success, Cost: 1500 * time.Millisecond})
	s.Record(Sample{TaskID: "b,\"q\"", Status: Failed, Err: errors.New("line1\nline2")})
	var j bytes.Buffer
	if err := s.WriteJSON(&j); err != nil {
		t.Fatal(err)
	}
	var e Export
	if err := json.Unmarshal(j.Bytes(), &e); err != nil || len(e.Days) != 7 || e.Days[6].Count != 2 || e.Failures[0].Error != "line1\nline2" {
		t.Fatalf("json %v %+v", err, e)
	}
	var c bytes.Buffer
	if err := s.WriteCSV(&c); err != nil {
		t.Fatal(err)
	}
	parts := strings.SplitN(c.String(), "\n\n", 2)
	days, err := csv.NewReader(strings.NewReader(parts[0])).ReadAll()
	if err != nil || len(days) != 8 || days[7][1] != "2026-03-02" || days[7][2] != "2" || days[0][16] != "bucket 1s–10s" || days[0][17] != "bucket 10s–1m" {
		t.Fatalf("days csv %v %v", err, days)
	}
	fails, err := csv.NewReader(strings.NewReader(parts[1])).ReadAll()
	if err != nil || len(fails) != 2 || fails[0][1] != "round" || fails[1][3] != "b,\"q\"" || fails[1][6] != "line1\nline2" {
		t.Fatalf("failures csv %v %v", err, fails)
	}
}

func TestHistogramLongestDuration(t *testing.T) {
	if got := bucketOf(math.MaxInt64); got != maxBucket {
		t.Fatalf("bucketOf(MaxInt64) = %d, maxBucket = %d", got, maxBucket)
	}
	var h Histogram
	h.Add(math.MaxInt64)
	h.Add(time.Microsecond)
	if h.Count() != 2 || h.Quantile(1) < 100*365*24*time.Hour {
		t.Fatalf("count %d, max %v", h.Count(), h.Quantile(1))
	}
	if _, err := decodeHist(map[string]int64{"801": 1}); err == nil {
		t.Fatal("bucket past the longest duration accepted")
	}
}

// TestSinceStartFiguresAreThisProcesss: the since-start counts and cost
// histogram (the admin page's counters, Prometheus) hold what this process
// recorded: not the days Load read, merged with today's records or not,
// and still after days leave memory.
func TestSinceStartFiguresAreThisProcesss(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	clk := clockwork.NewFakeClockAt(day1)
	st := openStore(t, dir)
	s, _ := New("job", clk, DefaultSettings())
	for range 3 { // the day before and today, in an earlier process
		s.Record(Sample{At: day1.Add(-24 * time.Hour), TaskID: "a", Status: Success, Cost: time.Millisecond})
		s.Record(Sample{TaskID: "a", Status: Failed, Cost: time.Second})
	}
	st = restart(t, s, st, dir)
	defer st.Close()
	s2, _ := New("job", clk, DefaultSettings())
	s2.Record(Sample{TaskID: "b", Status: Success, Cost: 2 * time.Millisecond}) // before Load: merged into today
	if w, err := s2.Load(ctx, st); err != nil || len(w) != 0 {
		t.Fatalf("load %v %v", w, err)
	}
	s2.Record(Sample{TaskID: "b", Status: Timeout, Cost: 3 * time.Second})
	check := func(when string) {
		t.Helper()
		want := [numStatus]int64{Success: 1, Timeout: 1}
		if c := s2.CountsByIndex(); c != want {
			t.Fatalf("%s: counts %v, want %v", when, c, want)
		}
		h, counts := s2.costSnapshot()
		if counts != want || h.Count() != 2 || h.CountBelow(time.Second) != 1 || h.Quantile(1) < 2*time.Second {
			t.Fatalf("%s: cost histogram of %d (%d under 1s, max about %v), counts %v", when, h.Count(), h.CountBelow(time.Second), h.Quantile(1), counts)
		}
		if c := s2.Counts(); c["success"] != 1 || c["timeout"] != 1 || c["failed"] != 0 {
			t.Fatalf("%s: counts by name %v", when, c)
		}
	}
	check("after Load")
	if days := s2.Days(); days[len(days)-1].Count != 5 || days[len(days)-2].Count != 3 {
		t.Fatalf("days %+v: the stored days are not in memory", days)
	}
	// Every day in memory falls out of the retention window.
	clk.Advance(time.Duration(DefaultSettings().RetentionDays+1) * 24 * time.Hour)
	s2.Take()
	s2.mu.Lock()
	left := len(s2.days)
	s2.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d days still in memory", left)
	}
	check("after the days left memory")
}

// TestThresholdsEditedMidDay: after the thresholds change, a day's
// buckets are cut anew from its histogram, and the outcome that finds
// them changed is counted exactly, even when its histogram bucket
// straddles a threshold (1.51 ms is in the bucket from 1.472 ms; the new
// threshold is 1.5 ms).
func TestThresholdsEditedMidDay(t *testing.T) {
	t.Parallel()
	s, _ := New("job", clockwork.NewFakeClockAt(day1), DefaultSettings())
	s.Record(Sample{TaskID: "a", Status: Success, Cost: time.Millisecond})
	set := DefaultSettings()
	set.Thresholds = [5]time.Duration{1500 * time.Microsecond, time.Second, time.Minute, time.Hour, 2 * time.Hour}
	if err := s.SetSettings(set); err != nil {
		t.Fatal(err)
	}
	s.Record(Sample{TaskID: "a", Status: Success, Cost: 1510 * time.Microsecond})
	s.Record(Sample{TaskID: "a", Status: Success, Cost: 2 * time.Second})
	if b := s.Day(day1).Buckets; b != [6]int64{1, 1, 1, 0, 0, 0} {
		t.Fatalf("buckets %v, want [1 1 1 0 0 0]", b)
	}
}

// TestStatsLayout: what a fire reads and writes of a Stats is in its
// first cache line, and a Stats fills a 256-byte size class, whose
// objects start on a line (see Stats).
func TestStatsLayout(t *testing.T) {
	var s Stats
	if n := unsafe.Sizeof(s); n != 256 {
		t.Errorf("a Stats is %d bytes, want 256", n)
	}
	endWithinLines(t, 1, map[string]uintptr{
		"mu":       unsafe.Offsetof(s.mu) + unsafe.Sizeof(s.mu),
		"cur":      unsafe.Offsetof(s.cur) + unsafe.Sizeof(s.cur),
		"hist":     unsafe.Offsetof(s.hist) + unsafe.Sizeof(s.hist),
		"results":  unsafe.Offsetof(s.results) + unsafe.Sizeof(s.results),
		"unfolded": unsafe.Offsetof(s.unfolded) + unsafe.Sizeof(s.unfolded),
		"rounds":   unsafe.Offsetof(s.rounds) + unsafe.Sizeof(s.rounds),
	})
}

// TestDayLayout: a day fills a 320-byte size class, whose objects start
// on a line, and what a fire writes of it, when its task cost less than
// the first threshold, is in its first three lines (see day).
func TestDayLayout(t *testing.T) {
	var d day
	if n := unsafe.Sizeof(d); n <= 288 || n > 320 {
		t.Errorf("a day is %d bytes, want 289 to 320", n)
	}
	endWithinLines(t, 3, map[string]uintptr{
		"count":     unsafe.Offsetof(d.count) + unsafe.Sizeof(d.count),
		"byStatus":  unsafe.Offsetof(d.byStatus) + unsafe.Sizeof(d.byStatus),
		"from":      unsafe.Offsetof(d.from) + unsafe.Sizeof(d.from),
		"sum":       unsafe.Offsetof(d.sum) + unsafe.Sizeof(d.sum),
		"lateSum":   unsafe.Offsetof(d.lateSum) + unsafe.Sizeof(d.lateSum),
		"hist.last": unsafe.Offsetof(d.hist) + unsafe.Offsetof(d.hist.total) + unsafe.Sizeof(d.hist.total),
		"late.last": unsafe.Offsetof(d.late) + unsafe.Offsetof(d.late.total) + unsafe.Sizeof(d.late.total),
	})
}

// endWithinLines checks that every named field ends within the first
// lines cache lines (64 bytes each) of its struct.
func endWithinLines(t *testing.T, lines uintptr, ends map[string]uintptr) {
	t.Helper()
	for name, end := range ends {
		if end > 64*lines {
			t.Errorf("%s ends at byte %d, past line %d", name, end, lines)
		}
	}
}

// TestHistoryLayout: what a round writes of a history is its first 64
// bytes, and a history fills a 192-byte size class, whose objects start
// on a line.
func TestHistoryLayout(t *testing.T) {
	var h history
	if n := unsafe.Sizeof(h); n != 192 {
		t.Errorf("a history is %d bytes, want 192", n)
	}
	endWithinLines(t, 1, map[string]uintptr{
		"left (a round's fields)": unsafe.Offsetof(h.left) + unsafe.Sizeof(h.left),
		"unsaved":                 unsafe.Offsetof(h.unsaved) + unsafe.Sizeof(h.unsaved), // written by every round without a store
	})
}

// TestFirstBucketIsTheRest: a day's first cost bucket is its count less
// the others, through settings that cut it anew, a flush and a load.
func TestFirstBucketIsTheRest(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, t.TempDir())
	defer st.Close()
	clk := clockwork.NewFakeClockAt(day1.Add(time.Hour))
	s, _ := New("job", clk, DefaultSettings())
	s.Record(Sample{TaskID: "t", Cost: time.Millisecond})
	s.Day(clk.Now())                 // counts it
	if s.cur.buckets != [6]int64{} { // a fast task writes no line of buckets
		t.Fatalf("a task under the first threshold wrote buckets %v", s.cur.buckets)
	}
	costs := []time.Duration{2 * time.Second, 20 * time.Second, 500 * time.Millisecond, 2 * time.Hour}
	for _, c := range costs {
		s.Record(Sample{TaskID: "t", Cost: c})
	}
	if got, want := s.Day(clk.Now()).Buckets, [6]int64{2, 1, 1, 0, 0, 1}; got != want {
		t.Fatalf("buckets %v, want %v", got, want)
	}
	set := DefaultSettings()
	set.Thresholds = [5]time.Duration{10 * time.Millisecond, time.Second, 10 * time.Second, time.Minute, time.Hour}
	if err := s.SetSettings(set); err != nil {
		t.Fatal(err)
	}
	s.Record(Sample{TaskID: "t", Cost: 5 * time.Millisecond}) // cuts the day anew, then counts exactly
	want := [6]int64{2, 1, 1, 1, 0, 1}
	if got := s.Day(clk.Now()).Buckets; got != want {
		t.Fatalf("after new thresholds: buckets %v, want %v", got, want)
	}
	if err := s.Flush(ctx, st); err != nil {
		t.Fatal(err)
	}
	loaded, _ := New("job", clk, set)
	if _, err := loaded.Load(ctx, st); err != nil {
		t.Fatal(err)
	}
	if got := loaded.Day(clk.Now()).Buckets; got != want {
		t.Fatalf("loaded: buckets %v, want %v", got, want)
	}
	loaded.Record(Sample{TaskID: "t", Cost: time.Microsecond})
	want[0]++
	if got := loaded.Day(clk.Now()).Buckets; got != want {
		t.Fatalf("loaded, then a fire: buckets %v, want %v", got, want)
	}
}

// A default results ring is allocated whole at its first push: a young
// schedule's rounds do not grow it through smaller buffers.
func TestResultsRingAllocatedOnce(t *testing.T) {
	r := newRing[resultEntry](DefaultSettings().Results)
	allocs := testing.AllocsPerRun(1, func() {
		for i := range DefaultSettings().Results {
			r.push(resultEntry{at: int64(i)})
		}
		r = newRing[resultEntry](DefaultSettings().Results)
	})
	if allocs != 1 {
		t.Fatalf("%d results cost %v allocations, want 1", DefaultSettings().Results, allocs)
	}
	// Each result of a default ring is on a line of its own (resultLines).
	r.push(resultEntry{})
	if at := uintptr(unsafe.Pointer(&r.buf[0])) % 64; at != 0 || len(resultLines{}.e) != DefaultSettings().Results {
		t.Fatalf("a default ring's first result at byte %d of a line, want 0", at)
	}
	// A failures ring, of far more bytes, grows as failures come: one
	// failure holds a buffer of four.
	big := newRing[Failure](100)
	big.push(Failure{Round: 0})
	if cap(big.buf) != 4 {
		t.Fatalf("a failures ring holds room for %d after one failure, want 4", cap(big.buf))
	}
	for i := 1; i < 100; i++ {
		big.push(Failure{Round: int64(i)})
	}
	if got := big.items(); len(got) != 100 || got[0].Round != 0 || got[99].Round != 99 || cap(big.buf) != 100 {
		t.Fatalf("a ring of 100 holds %d items, cap %d", len(got), cap(big.buf))
	}
}

// TestFoldCountsEveryOutcome: outcomes and lateness reach their days from
// the results ring and the history's page (fold), however many are
// recorded between two reads: more than the ring holds, over pages held,
// a batch's lateness left out, and rounds that settings which keep fewer
// drop before anything read them.
func TestFoldCountsEveryOutcome(t *testing.T) {
	clk := clockwork.NewFakeClockAt(day1.Add(time.Hour))
	set := DefaultSettings()
	set.Results, set.Rounds = 3, 8 // pages of two rounds
	s, _ := New("job", clk, set)
	var sum, lateSum, lateMax time.Duration
	var failed, rounds int64
	record := func(i int) {
		cost := time.Duration(i+1) * time.Millisecond
		status := Success
		if i%5 == 4 {
			status = Failed
			failed++
		}
		batch := i%7 == 6
		if !batch {
			late := time.Duration(i) * time.Millisecond
			rounds, lateSum, lateMax = rounds+1, lateSum+late, max(lateMax, late)
		}
		sum += cost
		start := clk.Now()
		s.Record(Sample{TaskID: "t", Status: status, Cost: cost, At: start.Add(cost)})
		s.RecordRound(RoundSample{Number: int64(i + 1), Batch: batch, Planned: start.Add(-time.Duration(i) * time.Millisecond),
			Start: start, End: start.Add(cost), Tasks: []TaskSample{{ID: "t", Status: status, Started: start, Cost: cost}}})
		clk.Advance(time.Second)
	}
	check := func(n int) {
		t.Helper()
		d := s.Day(day1)
		if d.Count != int64(n) || d.ByStatus["failed"] != failed || d.ByStatus["success"] != int64(n)-failed {
			t.Fatalf("after %d: count %d, by status %v; want %d, %d failed", n, d.Count, d.ByStatus, n, failed)
		}
		if d.Min != time.Millisecond || d.Max != time.Duration(n)*time.Millisecond || d.Avg != sum/time.Duration(n) {
			t.Fatalf("after %d: min %v max %v avg %v", n, d.Min, d.Max, d.Avg)
		}
		if d.Rounds != rounds || d.LateMax != lateMax || d.LateAvg != lateSum/time.Duration(rounds) {
			t.Fatalf("after %d: %d rounds, late max %v avg %v; want %d, %v, %v", n, d.Rounds, d.LateMax, d.LateAvg, rounds, lateMax, lateSum/time.Duration(rounds))
		}
	}
	for i := range 25 {
		record(i)
	}
	check(25)
	for i := 25; i < 28; i++ { // in the page, not yet counted
		record(i)
	}
	set.Rounds = 1
	if err := s.SetSettings(set); err != nil {
		t.Fatal(err)
	}
	check(28)
	if got := s.Counts()["success"]; got != 28-failed {
		t.Fatalf("since start: %d successes, want %d", got, 28-failed)
	}
}

// TestRoundLatenessCountedOnce: a round's lateness counts once, on the day
// it started, whether it waits with a result in the ring or is counted at
// once: rounds whose results interleave, a round of two tasks, a round of
// none, a read between a result and its round, a round over midnight.
func TestRoundLatenessCountedOnce(t *testing.T) {
	if n := unsafe.Sizeof(resultEntry{}); n != 64 {
		t.Errorf("a result is %d bytes, want 64: a fire writes one line of the ring", n)
	}
	clk := clockwork.NewFakeClockAt(day1.Add(time.Hour))
	s, _ := New("job", clk, DefaultSettings())
	ms := time.Millisecond
	result := func(id string, end time.Time, cost time.Duration) TaskSample {
		s.Record(Sample{TaskID: id, Cost: cost, At: end})
		return TaskSample{ID: id, Started: end.Add(-cost), Cost: cost}
	}
	round := func(start time.Time, late time.Duration, ts ...TaskSample) {
		s.RecordRound(RoundSample{Planned: start.Add(-late), Start: start, End: start.Add(ms), Tasks: ts})
	}
	at := day1.Add(time.Hour)
	// Two rounds whose results come in the order a, b, and whose rounds
	// complete a, b: a's result is not the newest when a completes.
	a, b := result("a", at.Add(ms), ms), result("b", at.Add(2*ms), ms)
	round(at, 3*ms, a)
	round(at, 5*ms, b)
	// A round of two tasks.
	round(at, 7*ms, result("c", at.Add(ms), ms), result("d", at.Add(ms), ms))
	// A round of no task.
	round(at, 17*ms)
	// A read between a result and its round.
	e := result("e", at.Add(ms), ms)
	s.Day(at)
	round(at, 11*ms, e)
	// A round that starts before midnight, its task ending after.
	midnight := dayOf(day1).Add(24 * time.Hour)
	eve := midnight.Add(-ms)
	round(eve, 13*ms, result("f", eve.Add(2*ms), 2*ms))
	d1, d2 := s.Day(day1), s.Day(midnight)
	if d1.Rounds != 6 || d1.LateMax != 17*ms || d1.LateAvg != (3+5+7+17+11+13)*ms/6 {
		t.Errorf("first day: %d rounds, late max %v, avg %v; want 6, 17ms, 9ms", d1.Rounds, d1.LateMax, d1.LateAvg)
	}
	if d1.Count != 5 || d2.Count != 1 || d2.Rounds != 0 {
		t.Errorf("first day %d results, second %d results and %d rounds; want 5, 1, 0", d1.Count, d2.Count, d2.Rounds)
	}
}
