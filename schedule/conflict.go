package schedule

import (
	"hash/maphash"
	"sync"
)

// conflictShards splits the registry so that schedules firing at the same
// instant do not queue on one lock.
const conflictShards = 64

// Conflicts tracks which task ids are running, across every schedule that
// shares it. An app owns one; two apps in one process do not see each other.
type Conflicts struct {
	seed   maphash.Seed
	shards [conflictShards]conflictShard
}

type conflictShard struct {
	mu      sync.Mutex
	running map[string]int
	_       [40]byte // keep shards on separate cache lines
}

// NewConflicts returns an empty registry.
func NewConflicts() *Conflicts {
	r := &Conflicts{seed: maphash.MakeSeed()}
	for i := range r.shards {
		r.shards[i].running = map[string]int{}
	}
	return r
}

func (r *Conflicts) shard(id string) *conflictShard {
	return &r.shards[maphash.String(r.seed, id)%conflictShards]
}

// acquire marks id as running. With exclusive it fails, changing nothing,
// when id is already running.
func (r *Conflicts) acquire(id string, exclusive bool) bool {
	s := r.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if exclusive && s.running[id] > 0 {
		return false
	}
	s.running[id]++
	return true
}

func (r *Conflicts) release(id string) {
	s := r.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[id] <= 1 {
		delete(s.running, id)
		return
	}
	s.running[id]--
}

// Running reports whether a task with this id has been submitted and has
// not yet returned, in any schedule sharing the registry.
func (r *Conflicts) Running(id string) bool {
	s := r.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running[id] > 0
}
