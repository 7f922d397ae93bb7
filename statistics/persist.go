package statistics

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
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

func encodeDay(d *day) ([]byte, error) {
	return json.Marshal(dayRecord{
		Version: 1, Count: d.count, ByStatus: d.byStatus, Min: int64(d.min), Max: int64(d.max), Sum: int64(d.sum),
		Hist: encodeHist(&d.hist), Late: encodeHist(&d.late), LateMax: int64(d.lateMax), LateSum: int64(d.lateSum),
		Buckets: d.buckets, BucketTh: [5]int64{int64(d.bucketTh[0]), int64(d.bucketTh[1]), int64(d.bucketTh[2]), int64(d.bucketTh[3]), int64(d.bucketTh[4])},
	})
}

func decodeDay(b []byte) (*day, error) {
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
		hist: h, late: l, lateMax: time.Duration(r.LateMax), lateSum: time.Duration(r.LateSum), buckets: r.Buckets}
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
			s.settings = n
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
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range days {
		dd, err := decodeDay(d.Data)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("schedule %q: statistics of %s unreadable (%v); skipped", s.schedule, d.Day.Format(time.DateOnly), err))
			continue
		}
		k := dayOf(d.Day)
		if cur := s.days[k]; cur != nil { // recorded before Load: merge
			mergeDay(dd, cur)
			dd.changed = cur.changed
		}
		s.days[k] = dd
		if k.Equal(s.today) {
			s.cur = dd
		}
	}
	loaded := make([]Failure, 0, len(fs))
	for i := len(fs) - 1; i >= 0; i-- { // oldest first
		f := fs[i]
		loaded = append(loaded, Failure{At: f.At, TaskID: f.TaskID, Status: f.Status, Error: f.Error, Stack: f.Stack, Cost: f.Cost})
	}
	merged := append(loaded, s.failures.items()...)
	s.failures = newRing[Failure](set.Failures)
	for _, f := range merged {
		s.failures.push(f)
	}
	s.results.resize(set.Results)
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
		for i := range into.buckets {
			into.buckets[i] += d.buckets[i]
		}
	} else { // different cuts: fall back to the histogram
		into.bucketTh = [5]time.Duration{}
	}
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
	taken    []Failure
	days     []*day
}

// Take returns what changed since the last Take, encoded for the store,
// and drops days that fell out of the retention window from memory. It
// holds the lock only to copy; nothing here touches the store.
func (s *Stats) Take() (*Changes, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := &Changes{s: s}
	cutoff := s.cutoffLocked()
	for k, d := range s.days {
		if k.Before(cutoff) {
			delete(s.days, k)
			if k.Equal(s.today) {
				s.cur = nil
			}
			continue
		}
		if !d.changed {
			continue
		}
		b, err := encodeDay(d)
		if err != nil {
			return nil, fmt.Errorf("statistics of schedule %q: encode %s: %w", s.schedule, k.Format(time.DateOnly), err)
		}
		d.changed = false
		ch.days = append(ch.days, d)
		ch.Days = append(ch.Days, store.Day{Schedule: s.schedule, Day: k, Data: b})
	}
	ch.taken = s.pending.take()
	ch.Failures = make([]store.Failure, len(ch.taken))
	for i, f := range ch.taken {
		ch.Failures[i] = store.Failure{Schedule: s.schedule, At: f.At, TaskID: f.TaskID, Status: f.Status, Error: f.Error, Stack: f.Stack, Cost: f.Cost}
	}
	return ch, nil
}

// Retention is what the store should keep of this schedule.
func (s *Stats) Retention() store.Retention {
	s.mu.Lock()
	defer s.mu.Unlock()
	return store.Retention{Schedule: s.schedule, Before: s.cutoffLocked(), KeepFailures: s.settings.Failures}
}

// cutoffLocked is the first day inside the retention window.
func (s *Stats) cutoffLocked() time.Time {
	return dayOf(s.clk.Now()).AddDate(0, 0, -(s.settings.RetentionDays - 1))
}

// Empty reports whether there is nothing to write.
func (c *Changes) Empty() bool { return len(c.Days) == 0 && len(c.Failures) == 0 }

// Failed puts the changes back, to be written by the next flush: the days
// are marked changed again, and the failures go back ahead of newer ones
// (the pending bound still holds; what it drops is counted as unsaved).
func (c *Changes) Failed() {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range c.days {
		d.changed = true
	}
	newer := s.pending.take()
	for _, f := range append(c.taken, newer...) {
		if s.pending.push(f) {
			s.unsaved++
		}
	}
}

// Flush writes this schedule's changes and applies its retention, as one
// App flush does for every schedule. On error nothing is lost: the same
// data is written by the next Flush.
func (s *Stats) Flush(ctx context.Context, st store.Store) error {
	ch, err := s.Take()
	if err != nil {
		return err
	}
	err = st.SaveStats(ctx, store.StatsBatch{Days: ch.Days, Failures: ch.Failures})
	if err == nil {
		err = st.Prune(ctx, []store.Retention{s.Retention()})
	}
	if err != nil {
		ch.Failed()
		return fmt.Errorf("flush statistics of schedule %q: %w", s.schedule, err)
	}
	return nil
}
