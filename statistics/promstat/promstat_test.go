package promstat

import (
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fom-go/fom/statistics"
)

func TestPrometheusCollector(t *testing.T) {
	t.Parallel()
	clk := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	s, _ := statistics.New("job", clk, statistics.DefaultSettings())
	s.Record(statistics.Sample{Status: statistics.Success, Cost: 500 * time.Millisecond})
	s.Record(statistics.Sample{Status: statistics.Success, Cost: 5 * time.Second})
	s.Record(statistics.Sample{Status: statistics.Timeout, Cost: 30 * time.Second})
	c := NewCollector(func() []Source {
		return []Source{{Schedule: "job", State: "SLEEPING", Stats: s, Waiting: 3, Active: 1}}
	})
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP fom_tasks_total Task outcomes by status.
# TYPE fom_tasks_total counter
fom_tasks_total{schedule="job",status="canceled"} 0
fom_tasks_total{schedule="job",status="conflict"} 0
fom_tasks_total{schedule="job",status="failed"} 0
fom_tasks_total{schedule="job",status="rejected"} 0
fom_tasks_total{schedule="job",status="success"} 2
fom_tasks_total{schedule="job",status="timeout"} 1
# HELP fom_schedule_state 1 for the schedule's current state, 0 for the others.
# TYPE fom_schedule_state gauge
fom_schedule_state{schedule="job",state="INITED"} 0
fom_schedule_state{schedule="job",state="RUNNING"} 0
fom_schedule_state{schedule="job",state="SLEEPING"} 1
fom_schedule_state{schedule="job",state="STOPPED"} 0
fom_schedule_state{schedule="job",state="STOPPING"} 0
# HELP fom_tasks_waiting Tasks queued for a worker.
# TYPE fom_tasks_waiting gauge
fom_tasks_waiting{schedule="job"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fom_tasks_total", "fom_schedule_state", "fom_tasks_waiting"); err != nil {
		t.Fatal(err)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "fom_task_cost_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 3 || h.GetBucket()[0].GetCumulativeCount() != 1 || h.GetBucket()[1].GetCumulativeCount() != 2 {
				t.Fatalf("histogram %v", h)
			}
			return
		}
	}
	t.Fatal("no cost histogram")
}
