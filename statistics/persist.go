package statistics

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fom-go/fom/store"
)

// SettingKey is the store setting that keeps a schedule's statistics settings.
const SettingKey = "statistics"

// dayRecord is the stored form of a day; Version guards future changes.
type dayRecord struct {
	Version  int              `json:"v"`
	Count    int64            `json:"count"`
	ByStatus [numStatus]int64 `json:"byStatus"`
	Min      int64            `json:"min"`
	Max      int64            `json:"max"`
	Sum      int64            `json:"sum"`
	Hist     map[string]int64 `json:"hist"`
	Late     map[string]int64 `json:"late"`
	LateMax  int64            `json:"lateMax"`
	LateSum  int64            `json:"lateSum"`
	Buckets  [6]int64         `json:"buckets"`
	BucketTh [5]int64         `json:"bucketTh"`
}

func encodeHist(h *Histogram) map[string]int64 {
	m := map[string]int64{}
	h.each(func(k int32, n int64) { m[strconv.Itoa(int(k))] = n })
	return m
}

func decodeHist(m map[string]int64) (Histogram, error) {
	var h Histogram
	for k, v := range m {
		i, err := strconv.Atoi(k)
		if err != nil || i < 0 || i > int(maxBucket) || v < 0 {
			return Histogram{}, fmt.Errorf("bad histogram bucket %q=%d", k, v)
		}
		h.addN(int32(i), v)
	}
	return h, nil
}

// Days are stored in a compact binary form (version 2): a version byte,
// then varints: count, the six status counts, min, max, sum, lateMax,
// lateSum, the six bucket counts, the five thresholds, and the two
// histograms as (bucket delta, count) pairs after their pair count. About
// 60 bytes for a typical day against ~400 as JSON, and an order of magnitude
// cheaper to write. Version 1 (JSON, starting with '{') is still read.
//
// Version 3 writes the thresholds in the largest of a second, a
// millisecond, a microsecond and a nanosecond that divides all five: a
// byte naming it (thresholdUnits), then each as a varint of that unit.
// Thresholds are settings, round figures such as 1s or 5m, and a day
// written at every flush carried them in 29 bytes of about 100; in 8 now.
const (
	dayVersion2 = 2
	dayVersion3 = 3
)

// thresholdUnits are the units version 3 writes thresholds in, by index.
func thresholdUnits() [4]time.Duration {
	return [4]time.Duration{time.Nanosecond, time.Microsecond, time.Millisecond, time.Second}
}

// appendDay appends d's encoding to b.
func appendDay(b []byte, d *day) []byte { return appendDayAs(b, d, dayVersion3) }

// appendDayAs appends d's encoding in version (2 or 3) to b.
func appendDayAs(b []byte, d *day, version byte) []byte {
	// Room for the histograms' octaves at a few bytes a bucket: one
	// allocation for most days, rather than growing through several.
	b = slices.Grow(b, 64+20*(d.hist.octaveCount()+d.late.octaveCount()))
	b = append(b, version)
	b = binary.AppendVarint(b, d.count)
	for _, n := range d.byStatus {
		b = binary.AppendVarint(b, n)
	}
	for _, v := range []time.Duration{d.min, d.max, d.sum, d.lateMax, d.lateSum} {
		b = binary.AppendVarint(b, int64(v))
	}
	for _, n := range d.bucketCounts() {
		b = binary.AppendVarint(b, n)
	}
	unit := time.Duration(1)
	if version == dayVersion3 {
		units := thresholdUnits()
		k := len(units) - 1
		for _, t := range d.bucketTh {
			for t%units[k] != 0 {
				k--
			}
		}
		b = append(b, byte(k))
		unit = units[k]
	}
	for _, t := range d.bucketTh {
		b = binary.AppendVarint(b, int64(t/unit))
	}
	b = appendHist(b, &d.hist)
	return appendHist(b, &d.late)
}

// appendHist encodes h: the count of its non-zero buckets, then each as
// the gap from the previous one and its count. It runs for every changed
// day at every flush, over arrays a flush finds cold, so it reads them
// once: the count goes in a byte reserved before the buckets, moved up in
// the rare case (128 buckets or more) that it needs two.
func appendHist(b []byte, h *Histogram) []byte {
	at := len(b)
	b = append(b, 0)
	n, prev := 0, 0
	for o, oct := range h.octaves {
		if oct == nil {
			continue
		}
		for i, c := range oct {
			if c == 0 {
				continue
			}
			k := o*subBuckets + i
			b = binary.AppendUvarint(b, uint64(k-prev))
			b = binary.AppendVarint(b, c)
			n, prev = n+1, k
		}
	}
	if n < 0x80 {
		b[at] = byte(n)
		return b
	}
	var count [binary.MaxVarintLen64]byte
	w := binary.PutUvarint(count[:], uint64(n))
	b = append(b, count[1:w]...) // room for the longer count
	copy(b[at+w:], b[at+1:len(b)-(w-1)])
	copy(b[at:], count[:w])
	return b
}

// reader decodes varints, remembering the first error.
type reader struct {
	b   []byte
	err error
}

// varint reads a signed varint: binary.Varint's zig-zag over uvarint.
func (r *reader) varint() int64 {
	u := r.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errors.New("truncated or bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) hist() Histogram {
	var h Histogram
	n := r.uvarint()
	if n > uint64(maxBucket)+1 {
		r.err = fmt.Errorf("histogram of %d buckets", n)
		return h
	}
	k := int64(0)
	for i := uint64(0); i < n && r.err == nil; i++ {
		k += int64(r.uvarint())
		c := r.varint()
		if k > int64(maxBucket) || c < 0 {
			r.err = fmt.Errorf("bad histogram bucket %d=%d", k, c)
			return Histogram{}
		}
		h.addN(int32(k), c)
	}
	return h
}

// decodeCompactDay reads a day of version 2 or 3 (the binary forms).
func decodeCompactDay(b []byte) (*day, error) {
	version := b[0]
	r := &reader{b: b[1:]}
	d := &day{count: r.varint()}
	for i := range d.byStatus {
		d.byStatus[i] = r.varint()
	}
	for _, v := range []*time.Duration{&d.min, &d.max, &d.sum, &d.lateMax, &d.lateSum} {
		*v = time.Duration(r.varint())
	}
	var buckets [6]int64
	for i := range buckets {
		buckets[i] = r.varint()
	}
	d.setBuckets(buckets)
	unit := time.Duration(1)
	if version == dayVersion3 {
		units := thresholdUnits()
		if k := r.byte(); int(k) < len(units) {
			unit = units[k]
		} else if r.err == nil {
			r.err = fmt.Errorf("threshold unit %d", k)
		}
	}
	for i := range d.bucketTh {
		v := r.varint()
		if v > math.MaxInt64/int64(unit) || v < math.MinInt64/int64(unit) {
			if r.err == nil {
				r.err = fmt.Errorf("threshold %d×%s out of range", v, unit)
			}
		}
		d.bucketTh[i] = time.Duration(v) * unit
	}
	d.hist = r.hist()
	d.late = r.hist()
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d bytes after the record", len(r.b))
	}
	if r.err != nil {
		return nil, r.err
	}
	return d, nil
}

// encodeDayV1 is the JSON form earlier versions wrote (tests check that
// it is still read).
func encodeDayV1(d *day) ([]byte, error) {
	return json.Marshal(dayRecord{
		Version: 1, Count: d.count, ByStatus: d.byStatus, Min: int64(d.min), Max: int64(d.max), Sum: int64(d.sum),
		Hist: encodeHist(&d.hist), Late: encodeHist(&d.late), LateMax: int64(d.lateMax), LateSum: int64(d.lateSum),
		Buckets: d.bucketCounts(), BucketTh: [5]int64{int64(d.bucketTh[0]), int64(d.bucketTh[1]), int64(d.bucketTh[2]), int64(d.bucketTh[3]), int64(d.bucketTh[4])},
	})
}

func decodeDay(b []byte) (*day, error) {
	if len(b) > 0 && (b[0] == dayVersion2 || b[0] == dayVersion3) {
		return decodeCompactDay(b)
	}
	var r dayRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	if r.Version != 1 {
		return nil, fmt.Errorf("unknown day record version %d", r.Version)
	}
	h, err := decodeHist(r.Hist)
	if err != nil {
		return nil, err
	}
	l, err := decodeHist(r.Late)
	if err != nil {
		return nil, err
	}
	d := &day{count: r.Count, byStatus: r.ByStatus, min: time.Duration(r.Min), max: time.Duration(r.Max), sum: time.Duration(r.Sum),
		hist: h, late: l, lateMax: time.Duration(r.LateMax), lateSum: time.Duration(r.LateSum)}
	d.setBuckets(r.Buckets)
	for i, v := range r.BucketTh {
		d.bucketTh[i] = time.Duration(v)
	}
	return d, nil
}

// Load reads settings, the days in the retention window and the recent
// failures. A day record that cannot be read is skipped and reported in
// the returned warnings, never fatal.
func (s *Stats) Load(ctx context.Context, st store.Store) (warnings []string, err error) {
	if v, ok, err := st.GetSetting(ctx, s.schedule, SettingKey); err != nil {
		return nil, err
	} else if ok {
		n := DefaultSettings()
		if err := json.Unmarshal([]byte(v), &n); err != nil || n.Validate() != nil {
			warnings = append(warnings, fmt.Sprintf("schedule %q: stored statistics settings %q ignored", s.schedule, v))
		} else {
			s.mu.Lock()
			s.foldLocked()
			s.setSettingsLocked(n)
			s.mu.Unlock()
		}
	}
	set := s.Settings()
	from := dayOf(s.clk.Now()).AddDate(0, 0, -(set.RetentionDays - 1))
	days, err := st.LoadDays(ctx, s.schedule, from)
	if err != nil {
		return warnings, err
	}
	fs, err := st.LoadFailures(ctx, s.schedule, set.Failures)
	if err != nil {
		return warnings, err
	}
	seq, err := st.LastRoundSeq(ctx, s.schedule)
	if err != nil {
		return warnings, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.foldLocked() // what was recorded before Load, into the days it merges with
	today := dayOf(s.clk.Now()).UnixNano()
	for _, d := range days {
		dd, err := decodeDay(d.Data)
		if err != nil {
			o := s.outsideLocked()
			o.unreadable = append(o.unreadable, dayOf(d.Day).UnixNano())
			warnings = append(warnings, fmt.Sprintf("schedule %q: statistics of %s unreadable (%v); the stored row is left as it is, and this process's counts of that day are kept in memory only", s.schedule, d.Day.Format(time.DateOnly), err))
			continue
		}
		k := dayOf(d.Day)
		if s.closedAt(k) >= 0 { // closed: written by this process, the stored copy is its own
			continue
		}
		s.outsideLocked().loaded.add(dd)
		dd.from = k.UnixNano()
		if cur := s.days[k]; cur != nil { // recorded before Load: merge
			mergeDay(dd, cur)
			dd.changed = cur.changed
		}
		s.days[k] = dd
		// cur is the day merged into dd, or else today's, as a record
		// today leaves it: the next Take closes the days that are not
		// cur, and today's, read here, would otherwise be closed with
		// them, to be decoded back by the next round's fold. An older
		// day is closed, as before: an idle schedule keeps no open day
		// it read. (Nor is a day after today, written by a clock ahead
		// of this one, the day today's rounds count on.)
		if s.cur != nil && s.cur.from == dd.from || s.cur == nil && dd.from == today {
			s.cur = dd
		}
	}
	s.older = true // the next Take looks at every day
	loaded := make([]Failure, 0, len(fs))
	for i := len(fs) - 1; i >= 0; i-- { // oldest first
		f := fs[i]
		loaded = append(loaded, Failure{Round: f.Round, At: f.At, TaskID: f.TaskID, Status: f.Status, Error: f.Error, Stack: f.Stack, Cost: f.Cost})
	}
	merged := append(loaded, s.failures.items()...)
	s.failures = newRing[Failure](set.Failures)
	for _, f := range merged {
		s.failures.push(f)
	}
	s.results.resize(set.Results)
	if seq > 0 { // rounds recorded before Load follow the stored ones
		h := s.histLocked()
		if h.kept > 0 || h.taken != nil {
			warnings = append(warnings, fmt.Sprintf("schedule %q: %d rounds ran before the history was loaded; numbered anew", s.schedule, h.kept))
		}
		h.seq += seq
	}
	return warnings, nil
}

func mergeDay(into, d *day) {
	if into.count == 0 || (d.count > 0 && d.min < into.min) {
		into.min = d.min
	}
	into.max = max(into.max, d.max)
	into.count += d.count
	into.sum += d.sum
	for i := range into.byStatus {
		into.byStatus[i] += d.byStatus[i]
	}
	into.hist.Merge(&d.hist)
	into.late.Merge(&d.late)
	into.lateMax = max(into.lateMax, d.lateMax)
	into.lateSum += d.lateSum
	if into.bucketTh == d.bucketTh {
		for i := range into.buckets { // [0] of both is 0: not counted
			into.buckets[i] += d.buckets[i]
		}
	} else { // different cuts: fall back to the histogram
		into.bucketTh = [5]time.Duration{}
	}
}

// ReloadSettings reads the stored settings again and applies them: the
// settings another instance of the app saved in a shared store.
func (s *Stats) ReloadSettings(ctx context.Context, st store.Store) error {
	v, ok, err := st.GetSetting(ctx, s.schedule, SettingKey)
	if err != nil || !ok {
		return err
	}
	n := DefaultSettings()
	if err := json.Unmarshal([]byte(v), &n); err != nil {
		return fmt.Errorf("schedule %q: stored statistics settings %q: %w", s.schedule, v, err)
	}
	if n == s.Settings() {
		return nil
	}
	return s.SetSettings(n)
}

// SaveSettings validates, applies and stores new settings.
func (s *Stats) SaveSettings(ctx context.Context, st store.Store, n Settings) error {
	if err := n.Validate(); err != nil {
		return fmt.Errorf("schedule %q: %w", s.schedule, err)
	}
	b, _ := json.Marshal(n)
	if err := st.PutSetting(ctx, s.schedule, SettingKey, string(b)); err != nil {
		return fmt.Errorf("save statistics settings of schedule %q: %w", s.schedule, err)
	}
	return s.SetSettings(n)
}

// Changes is what one schedule's statistics changed since the last flush,
// taken for writing. If writing them fails, Failed puts them back.
type Changes struct {
	s        *Stats
	Days     []store.Day
	Failures []store.Failure
	Rounds   []store.Round
	taken    []Failure
	days     []*day
	rounds   int    // how many rounds this took
	enc      []byte // the days' encodings; kept by Reset for the next Take

	// What one flush of a schedule takes, mostly: today and a page.
	oneDay   [1]store.Day
	oneD     [1]*day
	oneRound [1]store.Round
}

// Take returns what changed since the last Take, encoded for the store,
// and drops days that fell out of the retention window from memory. It
// holds the lock only to copy; nothing here touches the store.
func (s *Stats) Take() *Changes {
	ch := new(Changes)
	s.TakeInto(ch)
	return ch
}

// TakeInto is Take into ch, whatever it held before: a flush of many
// schedules takes their changes into an array it keeps between flushes,
// rather than allocating each schedule's. The days are encoded into the
// room ch's last encodings took, so the Days ch held before are no longer
// valid.
func (s *Stats) TakeInto(ch *Changes) {
	*ch = Changes{s: s, enc: ch.enc[:0]}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.foldLocked()
	ch.Days, ch.days = ch.oneDay[:0], ch.oneD[:0]
	take := func(k time.Time, d *day) {
		if o := s.outside; o != nil && slices.Contains(o.unreadable, k.UnixNano()) {
			d.changed = false // its stored row is one this build cannot read: left untouched
			return
		}
		at := len(ch.enc)
		ch.enc = appendDay(ch.enc, d)
		d.changed = false
		ch.days = append(ch.days, d)
		ch.Days = append(ch.Days, store.Day{Schedule: s.schedule, Day: k, Data: ch.enc[at:len(ch.enc):len(ch.enc)]})
	}
	if s.older {
		cutoff := s.cutoffLocked()
		// Another day changed, a new day began (days may have left the
		// window), or the window or the days were set anew: look at
		// them all. Otherwise only today can have changed. (An idle
		// schedule keeps its days past the window until it records on a
		// new day: a few days at most, and Days shows the window only.)
		// A day over and unchanged since the last Take is closed; one
		// taken now is closed by the next Take, which looks at every day
		// again for it.
		again := false
		for k, d := range s.days {
			if k.Before(cutoff) {
				s.outsideLocked().gone.add(d)
				delete(s.days, k)
				if d == s.cur {
					s.cur = nil
				}
				continue
			}
			switch {
			case d.changed:
				take(k, d)
				again = again || d != s.cur
			case d != s.cur:
				s.closeLocked(k, d)
			}
		}
		if o := s.outside; o != nil {
			// Counted in gone since they were closed.
			o.closed = slices.DeleteFunc(o.closed, func(c closedDay) bool { return c.from < cutoff.UnixNano() })
		}
		s.older = again
	} else if d := s.cur; d != nil && d.changed {
		take(time.Unix(0, d.from).UTC(), d)
	}
	if h := s.hist; h != nil && h.kept > 0 && h.taken == nil {
		// One page for the rounds since the last flush, in the slot of its
		// last round: a page that slot held ended at least Settings.Rounds
		// rounds earlier, so none of its rounds is among the newest kept.
		first := h.seq - int64(h.kept) + 1
		data := h.take()
		ch.oneRound[0] = store.Round{Schedule: s.schedule, Slot: int(h.seq % int64(s.settings.Rounds)), Seq: h.seq, First: first,
			Start: time.Unix(0, h.lastStart).UTC(), Data: data}
		ch.Rounds = ch.oneRound[:]
		ch.rounds = int(h.seq - first + 1)
		h.taken, h.takenN = data, ch.rounds
	}
	ch.taken = s.pending.take()
	ch.Failures = make([]store.Failure, len(ch.taken))
	for i, f := range ch.taken {
		ch.Failures[i] = store.Failure{Schedule: s.schedule, Round: f.Round, At: f.At, TaskID: f.TaskID, Status: f.Status, Error: f.Error, Stack: f.Stack, Cost: f.Cost}
	}
}

// Retention is what the store should keep of this schedule.
func (s *Stats) Retention() store.Retention {
	s.mu.Lock()
	defer s.mu.Unlock()
	return store.Retention{Schedule: s.schedule, Before: s.cutoffLocked(), KeepFailures: s.settings.Failures, KeepRounds: s.settings.Rounds}
}

// cutoffLocked is the first day inside the retention window.
func (s *Stats) cutoffLocked() time.Time {
	return dayOf(s.clk.Now()).Add(-time.Duration(s.settings.RetentionDays-1) * 24 * time.Hour) // UTC days
}

// Reset drops what ch holds, but for the room its encodings took: the
// next TakeInto encodes into it (the store keeps nothing of a batch).
func (c *Changes) Reset() { *c = Changes{enc: c.enc[:0]} }

// Empty reports whether there is nothing to write.
func (c *Changes) Empty() bool { return len(c.Days) == 0 && len(c.Failures) == 0 && len(c.Rounds) == 0 }

// Done tells the statistics that the changes were written: the rounds
// they took leave memory.
func (c *Changes) Done() {
	if c.rounds == 0 {
		return
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hist.written()
}

// Failed puts the changes back, to be written by the next flush: the days
// are marked changed again, and the failures go back ahead of newer ones
// (the pending bound still holds; what it drops is counted as unsaved).
func (c *Changes) Failed() {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range c.days {
		d.changed = true
		s.older = s.older || d != s.cur
	}
	newer := s.pending.take()
	for _, f := range append(c.taken, newer...) {
		if s.pending.push(f) {
			s.unsaved++
		}
	}
	if c.rounds > 0 { // the taken rounds go back ahead of the newer ones
		h := s.hist
		body, _, _ := pageBody(h.taken)
		h.putBack(body, h.takenN, int32(s.settings.Rounds))
		h.taken, h.takenN, h.handed = nil, 0, nil
	}
}

// Flush writes this schedule's changes and applies its retention, as one
// App flush does for every schedule. On error nothing is lost: the same
// data is written by the next Flush.
func (s *Stats) Flush(ctx context.Context, st store.Store) error {
	ch := s.Take()
	if err := st.SaveStats(ctx, store.StatsBatch{Days: ch.Days, Failures: ch.Failures, Rounds: ch.Rounds}); err != nil {
		ch.Failed()
		return fmt.Errorf("flush statistics of schedule %q: %w", s.schedule, err)
	}
	ch.Done()
	if err := st.Prune(ctx, []store.Retention{s.Retention()}); err != nil {
		return fmt.Errorf("flush statistics of schedule %q: %w", s.schedule, err)
	}
	return nil
}

// MergedDays sums the stored days of the other instances of one schedule
// (a shared store) and this instance's own, live statistics into the day
// summaries of the retention window ending today, oldest first, as
// Stats.Days gives them for one instance. A day record that cannot be read
// is skipped and named in the error, never fatal.
func MergedDays(local *Stats, others []store.Day, today time.Time) ([]DaySummary, error) {
	schedule, set := local.schedule, local.Settings()
	s, err := New(schedule, nil, set)
	if err != nil {
		return nil, err
	}
	local.mu.Lock()
	local.foldLocked()
	for k, d := range local.days {
		cp := &day{from: d.from}
		mergeDay(cp, d)
		s.days[k] = cp
	}
	if o := local.outside; o != nil {
		for i := range o.closed {
			if d := o.closed[i].decoded(); d != nil {
				s.days[time.Unix(0, d.from).UTC()] = d
			}
		}
	}
	local.mu.Unlock()
	days := others
	var bad []string
	for _, d := range days {
		dd, err := decodeDay(d.Data)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s of %q (%v)", d.Day.Format(time.DateOnly), d.Instance, err))
			continue
		}
		k := dayOf(d.Day)
		if cur := s.days[k]; cur != nil {
			mergeDay(cur, dd)
		} else {
			s.days[k] = dd
		}
	}
	t := dayOf(today)
	out := make([]DaySummary, 0, set.RetentionDays)
	for i := set.RetentionDays - 1; i >= 0; i-- {
		k := t.AddDate(0, 0, -i)
		out = append(out, s.summaryLocked(k, s.days[k]))
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("schedule %q: unreadable statistics skipped: %s", schedule, strings.Join(bad, "; "))
	}
	return out, nil
}
