package web

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fom's metrics join a service's own registry (Options.Registerer, or
// RegisterMetrics), and {prefix}/metrics still serves them.
func TestMetricsJoinTheServicesRegistry(t *testing.T) {
	t.Parallel()
	svc := prometheus.NewRegistry()
	own := prometheus.NewCounter(prometheus.CounterOpts{Name: "service_requests_total", Help: "the service's own"})
	svc.MustRegister(own)
	f := newFixture(t, Options{Registerer: svc})
	n, err := testutil.GatherAndCount(svc, "fom_schedule_state", "service_requests_total")
	if err != nil || n < 3 {
		t.Fatalf("the service's registry gathers %d series of fom and its own: %v", n, err)
	}
	if got := f.do("GET", "/fom/metrics", "").body; !strings.Contains(got, `fom_schedule_state{schedule="alpha",state="SLEEPING"} 1`) {
		t.Fatalf("/fom/metrics: %s", got)
	}
	// Registering twice in one registry is refused, naming what.
	if err := RegisterMetrics(f.app, svc); err == nil || !strings.Contains(err.Error(), "fom/web: register metrics") {
		t.Fatalf("a second registration: %v", err)
	}
	other := prometheus.NewRegistry()
	if err := RegisterMetrics(f.app, other); err != nil {
		t.Fatal(err)
	}
	if n, _ := testutil.GatherAndCount(other, "fom_schedule_state"); n < 2 {
		t.Fatalf("RegisterMetrics: %d series", n)
	}
	if err := RegisterMetrics(nil, other); err != ErrNilApp {
		t.Fatalf("nil app: %v", err)
	}
}
