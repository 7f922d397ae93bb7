package statistics

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Export is the JSON form of a schedule's statistics.
type Export struct {
	Schedule string           `json:"schedule"`
	Settings Settings         `json:"settings"`
	Buckets  [6]string        `json:"bucketLabels"`
	Counts   map[string]int64 `json:"counts"`
	Days     []DaySummary     `json:"days"`
	Failures []Failure        `json:"failures"`
	// Unsaved counts failures not written to the store: between two
	// flushes only the newest settings.Failures are kept (see Unsaved).
	Unsaved int64 `json:"unsavedFailures"`
}

// Snapshot gathers everything an export shows.
func (s *Stats) Snapshot() Export {
	return Export{Schedule: s.schedule, Settings: s.Settings(), Buckets: s.BucketLabels(), Counts: s.Counts(), Days: s.Days(), Failures: s.Failures(), Unsaved: s.Unsaved()}
}

// WriteJSON writes the statistics and failures as one JSON document.
func (s *Stats) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s.Snapshot())
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
}

// WriteDaysCSV writes one row per day of the retention window.
func (s *Stats) WriteDaysCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	labels := s.BucketLabels()
	head := []string{"schedule", "day", "count"}
	for _, n := range StatusNames() {
		head = append(head, n)
	}
	head = append(head, "min_ms", "avg_ms", "max_ms", "p50_ms", "p95_ms", "p99_ms")
	for _, l := range labels {
		head = append(head, "bucket "+l)
	}
	head = append(head, "rounds", "lateness_avg_ms", "lateness_p99_ms", "lateness_max_ms")
	cw.Write(head)
	for _, d := range s.Days() {
		row := []string{s.schedule, d.Day.Format(time.DateOnly), strconv.FormatInt(d.Count, 10)}
		for _, n := range StatusNames() {
			row = append(row, strconv.FormatInt(d.ByStatus[n], 10))
		}
		row = append(row, ms(d.Min), ms(d.Avg), ms(d.Max), ms(d.P50), ms(d.P95), ms(d.P99))
		for _, b := range d.Buckets {
			row = append(row, strconv.FormatInt(b, 10))
		}
		row = append(row, strconv.FormatInt(d.Rounds, 10), ms(d.LateAvg), ms(d.LateP99), ms(d.LateMax))
		cw.Write(row)
	}
	cw.Flush()
	return cw.Error()
}

// WriteFailuresCSV writes the recent failures, newest first.
func (s *Stats) WriteFailuresCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"schedule", "round", "at", "task", "status", "cost_ms", "error", "stack"})
	for _, f := range s.Failures() {
		cw.Write([]string{s.schedule, strconv.FormatInt(f.Round, 10), f.At.UTC().Format(time.RFC3339Nano), f.TaskID, f.Status, ms(f.Cost), f.Error, f.Stack})
	}
	cw.Flush()
	return cw.Error()
}

// WriteCSV writes the days, a blank line, then the failures: two tables
// in one file, each with its header.
func (s *Stats) WriteCSV(w io.Writer) error {
	if err := s.WriteDaysCSV(w); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	return s.WriteFailuresCSV(w)
}
