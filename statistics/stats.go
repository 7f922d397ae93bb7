package statistics

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/jonboulle/clockwork"
)

// Statuses, in the order of schedule.Status, which converts by index.
const (
	Success = iota
	Failed
	Timeout
	Rejected
	Conflict
	Canceled
	numStatus
)

// StatusNames names the statuses by index.
func StatusNames() [numStatus]string {
	return [numStatus]string{"success", "failed", "timeout", "rejected", "conflict", "canceled"}
}

// Settings are a schedule's statistics settings; operators may edit them.
type Settings struct {
	// Thresholds cut task cost into six buckets. Default 1s, 10s, 1m, 10m, 1h.
	Thresholds [5]time.Duration `json:"thresholds"`
	// RetentionDays is how many days of aggregates and failures are kept,
	// today included. Default 7.
	RetentionDays int `json:"retentionDays"`
	// Failures is how many recent failures are kept. Default 100.
	Failures int `json:"failures"`
	// Results is how many recent results are kept in memory. Default 16
	// (64 bytes each; the failures ring keeps failures longer).
	Results int `json:"results"`
	// Rounds is how many recent rounds the run history keeps, with up to
	// 100 task results each. Default 50.
	Rounds int `json:"rounds"`
}

// DefaultSettings returns the defaults.
func DefaultSettings() Settings {
	return Settings{
		Thresholds:    [5]time.Duration{time.Second, 10 * time.Second, time.Minute, 10 * time.Minute, time.Hour},
		RetentionDays: 7, Failures: 100, Results: 16, Rounds: 50,
	}
}

// Validate names the first bad field.
func (s Settings) Validate() error {
	for i, t := range s.Thresholds {
		if t <= 0 {
			return fmt.Errorf("statistics: thresholds[%d] = %s: must be greater than zero", i, t)
		}
		if i > 0 && t <= s.Thresholds[i-1] {
			return fmt.Errorf("statistics: thresholds[%d] = %s: must be greater than thresholds[%d] = %s", i, t, i-1, s.Thresholds[i-1])
		}
	}
	switch {
	case s.RetentionDays < 1 || s.RetentionDays > 3660:
		return fmt.Errorf("statistics: retentionDays = %d: must be between 1 and 3660", s.RetentionDays)
	case s.Failures < 1 || s.Failures > 100000:
		return fmt.Errorf("statistics: failures = %d: must be between 1 and 100000", s.Failures)
	case s.Results < 1 || s.Results > 100000:
		return fmt.Errorf("statistics: results = %d: must be between 1 and 100000", s.Results)
	case s.Rounds < 1 || s.Rounds > 10000:
		return fmt.Errorf("statistics: rounds = %d: must be between 1 and 10000", s.Rounds)
	}
	return nil
}

// Sample is one task outcome.
type Sample struct {
	Round   int64     // the round's (or batch's) number
	Batch   bool      // an ad-hoc batch rather than a scheduled round
	At      time.Time // when the outcome was decided; zero: now
	TaskID  string
	Status  int // Success ... Canceled
	Started time.Time
	Cost    time.Duration
	Err     error
}

// Failure is a recorded failure with its error chain and, for a panic, the stack.
type Failure struct {
	Round  int64         `json:"round"` // of the round (or batch) it belonged to; 0 if unknown
	Batch  bool          `json:"batch,omitempty"`
	At     time.Time     `json:"at"`
	TaskID string        `json:"taskId"`
	Status string        `json:"status"`
	Error  string        `json:"error"`
	Chain  []string      `json:"chain,omitempty"`
	Stack  string        `json:"stack,omitempty"`
	Cost   time.Duration `json:"costNs"`
}

// resultEntry is a recent result as kept: compact, its error formatted
// only when read.
type resultEntry struct {
	at      int64 // Unix nanoseconds
	cost    time.Duration
	taskID  string
	err     error
	late    time.Duration // the lateness of the task's round, if hasLate
	status  uint8
	hasLate bool // the round's lateness is counted with this result
}

// ResultRecord is a recent result.
type ResultRecord struct {
	At     time.Time     `json:"at"`
	TaskID string        `json:"taskId"`
	Status string        `json:"status"`
	Cost   time.Duration `json:"costNs"`
	Error  string        `json:"error,omitempty"`
}

// day is one day's aggregate. Its fields are in the order an outcome
// counted writes them, those it writes every time first. A day is 296
// bytes, in a size class whose objects start on a line, and an outcome
// whose task cost less than the first threshold writes only its first
// three lines (TestDayLayout): the first bucket is not counted but read as
// the count less the others, so that the line of buckets is written only
// by the slower tasks.
type day struct {
	count    int64
	byStatus [numStatus]int64
	changed  bool  // since the last flush took it
	from     int64 // Unix ns of the day's midnight (UTC)
	min, max time.Duration
	sum      time.Duration
	lateMax  time.Duration
	lateSum  time.Duration
	hist     Histogram
	late     Histogram // fire lateness of rounds
	buckets  [6]int64  // exact counts, cut at bucketTh; [0] is not counted (bucketCounts)
	bucketTh [5]time.Duration
}

// bucketCounts returns the day's exact counts by bucket, the first one
// being the count less the others (a day read from a corrupt record that
// counts more in them than in all is not shown a negative count).
func (d *day) bucketCounts() [6]int64 {
	b := d.buckets
	b[0] = d.count
	for _, n := range b[1:] {
		b[0] -= n
	}
	b[0] = max(b[0], 0)
	return b
}

// setBuckets sets the day's exact counts by bucket: all but the first,
// which is their count less the others.
func (d *day) setBuckets(b [6]int64) {
	b[0] = 0
	d.buckets = b
}

// DaySummary is a day's aggregate as shown and exported.
type DaySummary struct {
	Day      time.Time        `json:"day"`
	Count    int64            `json:"count"`
	ByStatus map[string]int64 `json:"byStatus"`
	Min      time.Duration    `json:"minNs"`
	Max      time.Duration    `json:"maxNs"`
	Avg      time.Duration    `json:"avgNs"`
	P50      time.Duration    `json:"p50Ns"`
	P95      time.Duration    `json:"p95Ns"`
	P99      time.Duration    `json:"p99Ns"`
	Buckets  [6]int64         `json:"buckets"`
	Rounds   int64            `json:"rounds"`
	LateAvg  time.Duration    `json:"lateAvgNs"`
	LateP99  time.Duration    `json:"lateP99Ns"`
	LateMax  time.Duration    `json:"lateMaxNs"`
}

// Stats holds one schedule's statistics. Recording takes a short lock and
// never touches the store; Flush writes what changed.
//
// A fire reads and writes the fields of the first line (64 bytes: a Stats
// is 256 bytes, a size class whose objects start on a line) and no other:
// with thousands of schedules, each line of a Stats is one a fire finds
// cold. TestStatsLayout keeps it so. Its outcome, with its round's
// lateness, waits in the results ring, to be counted into its day later
// (foldLocked), a few at a time.
type Stats struct {
	mu       sync.Mutex
	cur      *day     // the newest day counted on, or today's as Load read it
	hist     *history // the run history's numbering and rounds not yet written; made by the first round or Load
	results  ring[resultEntry]
	unfolded int32 // the newest results not yet counted in their days (fold)
	rounds   int16 // settings.Rounds (at most 10 000), in this line
	older    bool  // the next Take looks at every day: another day than cur changed, a new day began, or settings or days were set anew

	schedule string
	settings Settings // its Thresholds end the second line

	clk      clockwork.Clock
	days     map[time.Time]*day
	outside  *outside // made by a Load that read days, or the first day to leave memory
	failures ring[Failure]
	pending  ring[Failure] // not yet flushed: at most settings.Failures, the newest
	unsaved  int64         // failures dropped from pending before a flush took them
}

// setSettingsLocked applies n, which Validate accepted.
func (s *Stats) setSettingsLocked(n Settings) {
	s.settings, s.rounds = n, int16(n.Rounds)
}

// outside is what the days in memory and the outcomes this process
// recorded differ by: the since-start counts and cost histogram are the
// days' sums, less what Load read into them, plus the days that left
// memory. A fire then counts its outcome and cost once, in its day,
// rather than also in since-start figures of their own: with thousands of
// schedules, those were cache lines every fire found cold, for figures
// read at a page view or a scrape.
type outside struct {
	loaded tally       // the stored days Load read, as read
	gone   tally       // the days dropped from memory or closed, as they were then
	closed []closedDay // no two of one day
	// unreadable are the stored days (Unix ns of their midnight) Load
	// could not read: their rows are left as they are, never overwritten
	// by this process's counts of the same day, which stay in memory.
	unreadable []int64
}

// closedDay is a day that is over and written, kept in appendDay's form:
// an open day is about a kilobyte with its histograms' octaves, and a
// schedule keeps the days of its retention window, so a week-old schedule
// held seven. Its outcomes count in the since-start figures as the days
// gone from memory do (outside.gone), so that no count or scrape decodes
// it; a read decodes a copy, and a late record (a round that began that
// day and ended after it) opens it again, out of gone. Days are closed by
// Take: never one it took in the same call, so that Changes.Failed finds
// what it marks changed. A slice rather than a map: a schedule has a
// handful, and a map's first group alone is larger than them all.
type closedDay struct {
	from int64 // Unix ns of the day's midnight
	data []byte
}

// closeLocked moves day k, over and written, to its closed form.
func (s *Stats) closeLocked(k time.Time, d *day) {
	b := appendDay(nil, d)
	o := s.outsideLocked()
	// Grown one at a time (append would double it), data at its length:
	// closing is once a day.
	closed := make([]closedDay, len(o.closed)+1)
	copy(closed, o.closed)
	closed[len(o.closed)] = closedDay{from: d.from, data: bytes.Clone(b)}
	o.closed = closed
	o.gone.add(d)
	delete(s.days, k)
}

// closedAt returns the index of closed day k in s.outside.closed, or -1.
func (s *Stats) closedAt(k time.Time) int {
	if s.outside == nil {
		return -1
	}
	ns := k.UnixNano()
	return slices.IndexFunc(s.outside.closed, func(c closedDay) bool { return c.from == ns })
}

// decoded returns closed day c decoded, or nil.
func (c *closedDay) decoded() *day {
	d, err := decodeDay(c.data)
	if err != nil { // cannot happen: appendDay wrote it
		return nil
	}
	d.from = c.from
	return d
}

// dayAtLocked returns day k to read: open, a decoded copy of a closed
// one, or nil.
func (s *Stats) dayAtLocked(k time.Time) *day {
	if d := s.days[k]; d != nil {
		return d
	}
	if i := s.closedAt(k); i >= 0 {
		return s.outside.closed[i].decoded()
	}
	return nil
}

// tally is the part of days the since-start figures count.
type tally struct {
	counts [numStatus]int64
	cost   Histogram
}

func (t *tally) add(d *day) {
	for i, n := range d.byStatus {
		t.counts[i] += n
	}
	t.cost.Merge(&d.hist)
}

// sub takes back what add added for d.
func (t *tally) sub(d *day) {
	for i, n := range d.byStatus {
		t.counts[i] -= n
	}
	t.cost.subtract(&d.hist)
}

// outsideLocked returns s.outside, made if need be.
func (s *Stats) outsideLocked() *outside {
	if s.outside == nil {
		s.outside = &outside{}
	}
	return s.outside
}

// sinceStartLocked returns the counts by status since the process
// started and, with cost, the cost histogram of the same outcomes.
func (s *Stats) sinceStartLocked(cost bool) (Histogram, [numStatus]int64) {
	var h Histogram
	var counts [numStatus]int64
	for _, d := range s.days {
		for i, n := range d.byStatus {
			counts[i] += n
		}
		if cost {
			h.Merge(&d.hist)
		}
	}
	if o := s.outside; o != nil {
		for i := range counts {
			counts[i] += o.gone.counts[i] - o.loaded.counts[i]
		}
		if cost {
			h.Merge(&o.gone.cost)
			h.subtract(&o.loaded.cost)
		}
	}
	return h, counts
}

// New returns empty statistics for schedule.
func New(schedule string, clk clockwork.Clock, s Settings) (*Stats, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("schedule %q: %w", schedule, err)
	}
	if clk == nil {
		clk = clockwork.NewRealClock()
	}
	return &Stats{schedule: schedule, clk: clk, settings: s, rounds: int16(s.Rounds), days: map[time.Time]*day{},
		failures: newRing[Failure](s.Failures), pending: newRing[Failure](s.Failures), results: newRing[resultEntry](s.Results)}, nil
}

// Schedule returns the schedule's name.
func (s *Stats) Schedule() string { return s.schedule }

// dayOf is the UTC midnight starting t's day. A UTC day is 86 400
// seconds, so this is a division, not a calendar computation (it runs for
// every schedule at every flush).
func dayOf(t time.Time) time.Time {
	const day = 24 * 60 * 60
	sec := t.Unix()
	start := sec - sec%day
	if start > sec { // before 1970: % truncates towards zero
		start -= day
	}
	return time.Unix(start, 0).UTC()
}

// dayLocked returns the day of ns (Unix nanoseconds), marked changed,
// for counting.
func (s *Stats) dayLocked(ns int64) *day {
	if d := s.cur; d != nil && ns >= d.from && ns < d.from+int64(24*time.Hour) {
		d.changed = true // the common case: today
		return d
	}
	k := dayOf(time.Unix(0, ns))
	d := s.days[k]
	if d == nil {
		if i := s.closedAt(k); i >= 0 { // a late record for a closed day
			o := s.outside
			if d = o.closed[i].decoded(); d != nil {
				o.gone.sub(d)
			}
			o.closed = slices.Delete(o.closed, i, i+1)
		}
		if d == nil {
			d = &day{from: k.UnixNano()}
		}
		s.days[k] = d
	}
	d.changed = true
	if s.cur == nil || d.from > s.cur.from {
		if s.cur != nil {
			s.older = true // yesterday: its last changes to write, or to close
		}
		s.cur = d
	}
	if d != s.cur {
		s.older = true
	}
	return d
}

// Reserve makes, before a schedule's first result, what that result and
// its round would otherwise allocate: the results ring, when it is
// allocated whole (the default size), and the first page of the rounds'
// history, with room for a page of short rounds. A schedule about to
// fire on this instance (started here, or taken over from another
// instance) reserves them, so that its first fire, which may be one of
// an aligned burst of thousands, allocates no more than the next.
func (s *Stats) Reserve() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cap(s.results.buf) == 0 && s.results.whole() {
		s.results.grow()
	}
	if s.hist == nil {
		h := s.histLocked()
		if h.start(); h.grow {
			h.roomFor(pageRounds(int32(s.rounds)), shortRound)
		}
	}
}

// Record adds one task outcome: to the results ring, and to the failures
// if it failed. It is counted in its day by the next fold: when the ring
// would drop a result not yet counted, or before anything reads or takes
// the days.
func (s *Stats) Record(x Sample) {
	if x.Status < 0 || x.Status >= numStatus {
		return
	}
	now := x.At
	if now.IsZero() {
		now = s.clk.Now()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unfolded == s.results.cap {
		s.foldLocked()
	}
	s.results.push(resultEntry{at: now.UnixNano(), cost: x.Cost, taskID: x.TaskID, err: x.Err, status: uint8(x.Status)})
	s.unfolded++
	if x.Status != Success {
		f := Failure{Round: x.Round, Batch: x.Batch, At: now, TaskID: x.TaskID, Status: StatusNames()[x.Status], Cost: x.Cost}
		if x.Err != nil {
			f.Error = x.Err.Error()
			f.Chain, f.Stack = chainOf(x.Err, f.Error)
		}
		s.failures.push(f)
		if s.pending.push(f) {
			s.unsaved++
		}
	}
}

// foldLocked counts the results not yet counted (the newest s.unfolded of
// the ring) in their days, with the lateness of the rounds left with
// them. Everything that reads, takes or replaces the days, or changes the
// settings, folds first, and so does a result that would push out one
// not yet counted: no reader sees a figure short of what was recorded.
//
// Why a fire does not count its outcome itself: with thousands of
// schedules a fire finds its schedule's lines in memory, not in a cache,
// and counting wrote five more of them (the day's first three lines and a
// line of each histogram) besides the ring's slot, which it writes anyway.
// Folded a few at a time, the day's lines are fetched once for them all;
// with a store, by the flush that encodes the day next.
func (s *Stats) foldLocked() {
	n, r := int(s.unfolded), &s.results
	if n == 0 {
		return
	}
	s.unfolded = 0
	l := len(r.buf)
	i := (r.head() - n + l) % l
	for range n {
		e := &r.buf[i]
		s.countLocked(e.at, e.cost, e.status)
		if e.hasLate {
			s.lateLocked(e.at, e.late)
		}
		if i++; i == l {
			i = 0
		}
	}
}

// lateWithResultLocked leaves the lateness of round x with the ring's
// newest result, if that is not yet counted and carries no lateness yet,
// and reports whether it did. Which result carries it does not matter:
// the fold counts it once, on the day the result ended, which must be the
// day the round started. It is mostly the round's own task's, whose slot
// the fire has just written.
func (s *Stats) lateWithResultLocked(x *RoundSample) bool {
	if s.unfolded == 0 {
		return false
	}
	r := &s.results
	e := &r.buf[(r.head()-1+len(r.buf))%len(r.buf)]
	if e.hasLate || dayNumber(e.at) != dayNumber(x.Start.UnixNano()) {
		return false
	}
	e.late, e.hasLate = x.Start.Sub(x.Planned), true
	return true
}

// dayNumber is the UTC day of ns (Unix nanoseconds) since 1970-01-01.
func dayNumber(ns int64) int64 {
	const day = int64(24 * time.Hour)
	d := ns / day
	if ns%day < 0 {
		d--
	}
	return d
}

// countLocked counts an outcome ended at ns (Unix nanoseconds) in its day.
func (s *Stats) countLocked(ns int64, cost time.Duration, status uint8) {
	d := s.dayLocked(ns)
	if d.count == 0 || cost < d.min {
		d.min = cost
	}
	d.max = max(d.max, cost)
	d.count++
	d.byStatus[status]++
	d.sum += cost
	d.hist.Add(cost)
	th := &s.settings.Thresholds
	if !sameThresholds(&d.bucketTh, th) {
		// A new or merged day, or thresholds changed since this day's
		// buckets were counted: re-cut what is there from the histogram,
		// then count exactly. The re-cut counted this cost by its
		// histogram bucket's lower bound: it is taken back from there.
		b := bucketsOf(&d.hist, *th)
		lo, _ := bounds(bucketOf(cost))
		b[bucketIndex(lo, *th)]--
		d.setBuckets(b)
		d.bucketTh = *th
	}
	if i := bucketIndex(cost, *th); i > 0 { // the first is the count less these
		d.buckets[i]++
	}
}

// sameThresholds is a == *b, compared in line: an array compare of this
// size is a call to memequal, on every outcome counted.
func sameThresholds(a, b *[5]time.Duration) bool {
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3] && a[4] == b[4]
}

// RecordLateness adds a round's fire lateness (actual start minus plan) to
// the day of at, the round's start; a zero at means now. RecordRound
// counts a round's own lateness: this is for lateness measured elsewhere.
func (s *Stats) RecordLateness(at time.Time, late time.Duration) {
	if at.IsZero() {
		at = s.clk.Now()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lateLocked(at.UnixNano(), late)
}

// lateLocked counts a round's lateness in the day of at (Unix ns).
func (s *Stats) lateLocked(at int64, late time.Duration) {
	late = max(late, 0)
	d := s.dayLocked(at)
	d.late.Add(late)
	d.lateSum += late
	d.lateMax = max(d.lateMax, late)
}

// ring keeps the last cap items in O(1) per push.
type ring[T any] struct {
	buf  []T
	next int32 // where the next push goes once full
	cap  int32 // int32s: three rings a schedule, 24 bytes fewer
}

func newRing[T any](n int) ring[T] { return ring[T]{cap: int32(n)} }

// wholeRing is the most bytes of a ring allocated whole at its first push:
// a default results ring (16 of 64 bytes) is, so that the ring every
// round pushes to is allocated once, at a schedule's first result, rather
// than grown through 4 and 8 while the schedule is young (at ten thousand
// schedules, a third of the garbage of their first dozen rounds). A larger
// ring (the failures', 100 of 136 bytes) starts at 4 and grows only as
// failures come.
const wholeRing = 1024

// head is where the next push goes.
func (r *ring[T]) head() int {
	if len(r.buf) == int(r.cap) {
		return int(r.next)
	}
	return len(r.buf)
}

// resultLines holds a default results ring, each result on a line of its
// own, which a fire writes. An object with pointers larger than 512 bytes
// begins with the runtime's 8-byte type header, so in a plain array every
// 64-byte result lay across two lines.
type resultLines struct {
	_ [64 - 8]byte // the header's line
	e [16]resultEntry
}

// push adds x; it reports whether the oldest item was dropped for it.
func (r *ring[T]) push(x T) (dropped bool) {
	if len(r.buf) < int(r.cap) {
		if len(r.buf) == cap(r.buf) {
			r.grow()
		}
		r.buf = append(r.buf, x)
		return false
	}
	r.buf[r.next] = x
	r.next = (r.next + 1) % r.cap
	return true
}

// whole reports whether the ring is allocated whole at its first push.
func (r *ring[T]) whole() bool { return int(r.cap)*int(unsafe.Sizeof(*new(T))) <= wholeRing }

// grow gives the ring more room, never past its size: all of it at once
// when it is small (whole).
func (r *ring[T]) grow() {
	n := max(2*len(r.buf), 4)
	if r.whole() {
		n = int(r.cap)
	}
	var grown []T
	if p, ok := any(&grown).(*[]resultEntry); ok && n == len(resultLines{}.e) {
		*p = new(resultLines).e[:len(r.buf)]
	} else {
		grown = make([]T, len(r.buf), min(n, int(r.cap)))
	}
	copy(grown, r.buf)
	r.buf = grown
}

// take returns the items oldest first and empties the ring.
func (r *ring[T]) take() []T {
	out := r.items()
	*r = ring[T]{cap: r.cap}
	return out
}

// items returns the items oldest first.
func (r *ring[T]) items() []T {
	out := make([]T, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

func (r *ring[T]) newestFirst() []T {
	out := r.items()
	slices.Reverse(out)
	return out
}

// resize keeps the newest n items and returns how many it dropped.
func (r *ring[T]) resize(n int) (dropped int) {
	items := r.items()
	if over := len(items) - n; over > 0 {
		items, dropped = items[over:], over
	}
	*r = ring[T]{buf: items, cap: int32(n)}
	return dropped
}

// stacker is implemented by errors carrying a stack (schedule.PanicError).
type stacker interface{ StackTrace() string }

// chainOf returns the messages of an error chain and the first stack in
// it; msg is err's own message, already known.
func chainOf(err error, msg string) (chain []string, stack string) {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e == err {
			chain = append(chain, msg)
		} else {
			chain = append(chain, e.Error())
		}
		if st, ok := e.(stacker); ok && stack == "" {
			stack = st.StackTrace()
		}
		if len(chain) > 16 {
			break
		}
	}
	if len(chain) == 1 {
		chain = nil
	}
	return chain, stack
}

// CountsByIndex returns the counts by status index (Success ... Canceled)
// since the process started.
func (s *Stats) CountsByIndex() [6]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.foldLocked()
	_, counts := s.sinceStartLocked(false)
	return counts
}

// Counts returns the counts by status since the process started.
func (s *Stats) Counts() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.foldLocked()
	_, counts := s.sinceStartLocked(false)
	out := map[string]int64{}
	for i, n := range StatusNames() {
		out[n] = counts[i]
	}
	return out
}

// Settings returns the current settings.
func (s *Stats) Settings() Settings {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settings
}

// SetSettings validates and applies new settings; rings shrink at once,
// buckets are recomputed from the histograms for every stored day.
func (s *Stats) SetSettings(n Settings) error {
	if err := n.Validate(); err != nil {
		return fmt.Errorf("schedule %q: %w", s.schedule, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.foldLocked() // counted at the thresholds they were recorded under
	s.setSettingsLocked(n)
	s.older = true // the retention window may have shrunk
	s.failures.resize(n.Failures)
	s.unsaved += int64(s.pending.resize(n.Failures))
	s.results.resize(n.Results)
	if s.hist != nil {
		s.hist.trim(int32(n.Rounds))
	}
	return nil
}

// Days returns the daily summaries in the retention window, oldest first,
// with a zero summary for a day without results.
func (s *Stats) Days() []DaySummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.foldLocked()
	today := dayOf(s.clk.Now())
	out := make([]DaySummary, 0, s.settings.RetentionDays)
	for i := s.settings.RetentionDays - 1; i >= 0; i-- {
		k := today.AddDate(0, 0, -i)
		out = append(out, s.summaryLocked(k, s.dayAtLocked(k)))
	}
	return out
}

// Day returns one day's summary.
func (s *Stats) Day(t time.Time) DaySummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.foldLocked()
	k := dayOf(t)
	return s.summaryLocked(k, s.dayAtLocked(k))
}

func (s *Stats) summaryLocked(k time.Time, d *day) DaySummary {
	sum := DaySummary{Day: k, ByStatus: map[string]int64{}}
	names := StatusNames()
	for _, n := range names {
		sum.ByStatus[n] = 0
	}
	if d == nil {
		return sum
	}
	for i, n := range names {
		sum.ByStatus[n] = d.byStatus[i]
	}
	sum.Count, sum.Min, sum.Max = d.count, d.min, d.max
	if d.count > 0 {
		sum.Avg = d.sum / time.Duration(d.count)
		sum.P50, sum.P95, sum.P99 = clamp(d.hist.Quantile(.5), d), clamp(d.hist.Quantile(.95), d), clamp(d.hist.Quantile(.99), d)
	}
	if d.bucketTh == s.settings.Thresholds {
		sum.Buckets = d.bucketCounts()
	} else {
		sum.Buckets = bucketsOf(&d.hist, s.settings.Thresholds)
	}
	sum.Rounds = d.late.Count()
	if sum.Rounds > 0 {
		sum.LateAvg = d.lateSum / time.Duration(sum.Rounds)
		sum.LateP99 = min(d.late.Quantile(.99), d.lateMax)
	}
	sum.LateMax = d.lateMax
	return sum
}

// clamp keeps a bucket estimate inside the day's real range.
func clamp(v time.Duration, d *day) time.Duration { return min(max(v, d.min), d.max) }

func bucketsOf(h *Histogram, th [5]time.Duration) [6]int64 {
	var b [6]int64
	prev := int64(0)
	for i, t := range th {
		below := h.CountBelow(t)
		b[i] = below - prev
		prev = below
	}
	b[5] = h.Count() - prev
	return b
}

func bucketIndex(d time.Duration, th [5]time.Duration) int {
	for i, t := range th {
		if d < t {
			return i
		}
	}
	return 5
}

// BucketLabels names the six cost buckets for the current thresholds.
func (s *Stats) BucketLabels() [6]string {
	th := s.Settings().Thresholds
	var out [6]string
	out[0] = "< " + ShortDuration(th[0])
	for i := 1; i < 5; i++ {
		out[i] = ShortDuration(th[i-1]) + "–" + ShortDuration(th[i])
	}
	out[5] = "≥ " + ShortDuration(th[4])
	return out
}

// ShortDuration prints a duration without zero tails: 1m rather than 1m0s.
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Unsaved returns how many failures, since the process started, were
// dropped before they could be saved: between two flushes (or while the
// store failed) only the newest settings.Failures are kept, as the store
// keeps no more than that anyway. Counts and daily aggregates stay exact.
func (s *Stats) Unsaved() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unsaved
}

// Failures returns the recent failures, newest first.
func (s *Stats) Failures() []Failure {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failures.newestFirst()
}

// Results returns the recent results, newest first.
func (s *Stats) Results() []ResultRecord {
	s.mu.Lock()
	es := s.results.newestFirst()
	s.mu.Unlock()
	names := StatusNames()
	out := make([]ResultRecord, len(es))
	for i, e := range es {
		out[i] = ResultRecord{At: time.Unix(0, e.at).UTC(), TaskID: e.taskID, Status: names[e.status], Cost: e.cost}
		if e.err != nil {
			out[i].Error = e.err.Error()
		}
	}
	return out
}

// costSnapshot returns the since-start cost histogram and counts.
// CostSummary is a schedule's task outcomes and costs since the start, as
// a metrics exporter reports them (package statistics/promstat).
type CostSummary struct {
	Counts [numStatus]int64 // by status, in StatusNames' order
	// Below counts the tasks that cost at most each of the settings'
	// thresholds; Count and Sum are every task's (Sum from the
	// histogram's bucket midpoints).
	Below map[time.Duration]uint64
	Count uint64
	Sum   time.Duration
}

// CostSummary returns the outcomes and costs since the start.
func (s *Stats) CostSummary() CostSummary {
	hist, counts := s.costSnapshot()
	out := CostSummary{Counts: counts, Below: map[time.Duration]uint64{}, Count: uint64(hist.Count())}
	for _, t := range s.Settings().Thresholds {
		out.Below[t] = uint64(hist.CountBelow(t))
	}
	var sum float64
	hist.each(func(k int32, n int64) {
		lo, hi := bounds(k)
		sum += float64(n) * float64(lo+(hi-lo)/2)
	})
	out.Sum = time.Duration(sum)
	return out
}

func (s *Stats) costSnapshot() (Histogram, [numStatus]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.foldLocked()
	return s.sinceStartLocked(true)
}
