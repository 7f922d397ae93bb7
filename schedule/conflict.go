package schedule

import "sync"

// Conflicts tracks which task ids are running, across every schedule that
// shares it. An app owns one; two apps in one process do not see each other.
type Conflicts struct {
	mu      sync.Mutex
	running map[string]int
}

// NewConflicts returns an empty registry.
func NewConflicts() *Conflicts { return &Conflicts{running: map[string]int{}} }

// acquire marks id as running. With exclusive it fails, changing nothing,
// when id is already running.
func (r *Conflicts) acquire(id string, exclusive bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if exclusive && r.running[id] > 0 {
		return false
	}
	r.running[id]++
	return true
}

func (r *Conflicts) release(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running[id] <= 1 {
		delete(r.running, id)
		return
	}
	r.running[id]--
}

// Running reports whether a task with this id has been submitted and has
// not yet returned, in any schedule sharing the registry.
func (r *Conflicts) Running(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[id] > 0
}
