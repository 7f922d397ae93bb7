package timer

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

// metrics are what the service counts, for Stats (and fom's Prometheus
// collector): no dependency of the timer package's own.
type metrics struct {
	created, claimed atomic.Int64
	late             histogram
	// outcomes counts attempts by kind and state, under the service's mu
	// (taken anyway to queue an outcome).
	outcomes map[string]map[string]int64
}

func newMetrics() metrics { return metrics{outcomes: map[string]map[string]int64{}} }

// outcomeLocked counts an attempt's outcome; the service's mu is held.
func (m *metrics) outcomeLocked(kind, state string) {
	k := m.outcomes[kind]
	if k == nil {
		k = map[string]int64{}
		m.outcomes[kind] = k
	}
	k[state]++
}

// LatenessBuckets are the upper bounds of the lateness histogram.
func LatenessBuckets() []time.Duration {
	b := latenessBounds()
	return b[:]
}

// latenessBounds are LatenessBuckets as an array, which a caller keeps
// on its stack.
func latenessBounds() [12]time.Duration {
	return [...]time.Duration{time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond,
		50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, 5 * time.Second, 30 * time.Second}
}

// histogram counts attempts' lateness (start less planned) by bucket.
type histogram struct {
	mu     sync.Mutex
	counts [13]int64 // LatenessBuckets, then +Inf
	sum    time.Duration
	n      int64
}

func (h *histogram) observe(d time.Duration) {
	b := latenessBounds()
	i := 0
	for i < len(b) && d > b[i] {
		i++
	}
	h.mu.Lock()
	h.counts[i]++
	h.sum += d
	h.n++
	h.mu.Unlock()
}

// Stats are the service's counters since it was built.
type Stats struct {
	Created, Claimed int64
	// Outcomes counts attempts by kind and outcome (succeeded, retry,
	// dead).
	Outcomes map[string]map[string]int64
	// Lateness counts attempts by how late they began: LatenessCounts[i]
	// are those up to LatenessBuckets()[i] (not cumulative), the last
	// those beyond.
	LatenessCounts []int64
	LatenessSum    time.Duration
	Attempts       int64
}

// Stats returns the service's counters.
func (s *Service) Stats() Stats {
	m := &s.metrics
	st := Stats{Created: m.created.Load(), Claimed: m.claimed.Load(), Outcomes: map[string]map[string]int64{}}
	s.mu.Lock()
	for k, states := range m.outcomes {
		st.Outcomes[k] = maps.Clone(states)
	}
	s.mu.Unlock()
	m.late.mu.Lock()
	st.LatenessCounts = append([]int64(nil), m.late.counts[:]...)
	st.LatenessSum, st.Attempts = m.late.sum, m.late.n
	m.late.mu.Unlock()
	return st
}
