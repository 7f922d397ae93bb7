// Package promstat exposes fom's schedule statistics to Prometheus. It is
// a package of its own so that an app that serves no metrics links none
// of Prometheus: package web registers it.
package promstat

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fom-go/fom/statistics"
)

// Source is one schedule as the collector sees it.
type Source struct {
	Schedule string
	State    string
	Stats    *statistics.Stats
	Waiting  int
	Active   int
	Stalled  bool
	// The last scheduled round: its outcome (success, partial, failed,
	// timeout; "" before one ran), when a round last fully succeeded, and
	// how late the last one started.
	LastOutcome string
	LastSuccess time.Time
	LastLate    time.Duration
	// ConsecutiveFailures counts the scheduled rounds in a row that did
	// not succeed (0 when the last did).
	ConsecutiveFailures int
}

// Outcomes lists the round outcomes the outcome gauge reports.
func Outcomes() []string { return []string{"success", "partial", "failed", "timeout"} }

// States lists the schedule states the state gauge reports.
func States() []string { return []string{"INITED", "RUNNING", "SLEEPING", "STOPPING", "STOPPED"} }

// Collector exposes every schedule's counters, cost histogram, state and
// pool load to Prometheus. It reads the live statistics at scrape time.
type Collector struct {
	sources func() []Source
	tasks   *prometheus.Desc
	cost    *prometheus.Desc
	state   *prometheus.Desc
	waiting *prometheus.Desc
	active  *prometheus.Desc
	stalled *prometheus.Desc
	success *prometheus.Desc
	outcome *prometheus.Desc
	late    *prometheus.Desc
	streak  *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a collector over the schedules sources returns.
func NewCollector(sources func() []Source) *Collector {
	l := []string{"schedule"}
	return &Collector{
		sources: sources,
		tasks:   prometheus.NewDesc("fom_tasks_total", "Task outcomes by status.", []string{"schedule", "status"}, nil),
		cost:    prometheus.NewDesc("fom_task_cost_seconds", "Task cost, bucketed at the schedule's statistics thresholds.", l, nil),
		state:   prometheus.NewDesc("fom_schedule_state", "1 for the schedule's current state, 0 for the others.", []string{"schedule", "state"}, nil),
		waiting: prometheus.NewDesc("fom_tasks_waiting", "Tasks queued for a worker.", l, nil),
		active:  prometheus.NewDesc("fom_tasks_active", "Tasks on a worker.", l, nil),
		stalled: prometheus.NewDesc("fom_schedule_stalled", "1 while tasks past their timeout hold every worker.", l, nil),
		success: prometheus.NewDesc("fom_last_success_timestamp_seconds", "When a round of the schedule last succeeded in every task (Unix time); absent until one did in this process.", l, nil),
		outcome: prometheus.NewDesc("fom_last_round_outcome", "1 for the last round's outcome, 0 for the others; absent until a round ran.", []string{"schedule", "outcome"}, nil),
		late:    prometheus.NewDesc("fom_last_fire_lateness_seconds", "How late the last round started after its planned fire.", l, nil),
		streak:  prometheus.NewDesc("fom_consecutive_failures", "Scheduled rounds in a row, the last included, that did not succeed (0 when the last did).", l, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.tasks, c.cost, c.state, c.waiting, c.active, c.stalled, c.success, c.outcome, c.late, c.streak} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	names := statistics.StatusNames()
	for _, src := range c.sources() {
		if src.Stats != nil {
			cs := src.Stats.CostSummary()
			for i, n := range cs.Counts {
				ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.CounterValue, float64(n), src.Schedule, names[i])
			}
			buckets := make(map[float64]uint64, len(cs.Below))
			for t, n := range cs.Below {
				buckets[t.Seconds()] = n
			}
			ch <- prometheus.MustNewConstHistogram(c.cost, cs.Count, cs.Sum.Seconds(), buckets, src.Schedule)
		}
		for _, st := range States() {
			v := 0.0
			if st == src.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, src.Schedule, st)
		}
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(src.Waiting), src.Schedule)
		ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, float64(src.Active), src.Schedule)
		stalled := 0.0
		if src.Stalled {
			stalled = 1
		}
		ch <- prometheus.MustNewConstMetric(c.stalled, prometheus.GaugeValue, stalled, src.Schedule)
		if !src.LastSuccess.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.success, prometheus.GaugeValue, float64(src.LastSuccess.UnixNano())/1e9, src.Schedule)
		}
		if src.LastOutcome != "" {
			for _, o := range Outcomes() {
				v := 0.0
				if o == src.LastOutcome {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(c.outcome, prometheus.GaugeValue, v, src.Schedule, o)
			}
			ch <- prometheus.MustNewConstMetric(c.late, prometheus.GaugeValue, src.LastLate.Seconds(), src.Schedule)
		}
		ch <- prometheus.MustNewConstMetric(c.streak, prometheus.GaugeValue, float64(src.ConsecutiveFailures), src.Schedule)
	}
}
