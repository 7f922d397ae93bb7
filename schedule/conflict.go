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
	claims Claims // beyond the process, or nil
}

// Claims extends conflict detection beyond the process (several instances
// of an app: package cluster). A task of a schedule with
// enableTaskConflict claims its id before it runs and gives it back when
// it returns; an id claimed elsewhere is a conflict, and so is a claim
// that cannot be decided (the database unreachable). Tasks of schedules
// without enableTaskConflict make no claim.
type Claims interface {
	Claim(id string) bool
	Unclaim(id string)
}

// SetClaims makes r consult claims; call it before any schedule uses r.
func (r *Conflicts) SetClaims(c Claims) { r.claims = c }

type conflictShard struct {
	mu      sync.Mutex
	running map[string]int
	claimed map[string]bool // ids claimed through Claims; made on first use
	_       [32]byte        // keep shards on separate cache lines
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
	if exclusive && s.running[id] > 0 {
		s.mu.Unlock()
		return false
	}
	s.running[id]++
	s.mu.Unlock()
	if !exclusive || r.claims == nil {
		return true
	}
	// Counted here first (a second acquire here is refused meanwhile),
	// then claimed beyond the process without holding the lock.
	if !r.claims.Claim(id) {
		r.release(id)
		return false
	}
	s.mu.Lock()
	if s.claimed == nil {
		s.claimed = map[string]bool{}
	}
	s.claimed[id] = true
	s.mu.Unlock()
	return true
}

func (r *Conflicts) release(id string) {
	s := r.shard(id)
	s.mu.Lock()
	if s.running[id] > 1 {
		s.running[id]--
		s.mu.Unlock()
		return
	}
	delete(s.running, id)
	claimed := s.claimed[id]
	delete(s.claimed, id)
	s.mu.Unlock()
	if claimed {
		r.claims.Unclaim(id)
	}
}

// Running reports whether a task with this id has been submitted and has
// not yet returned, in any schedule sharing the registry.
func (r *Conflicts) Running(id string) bool {
	s := r.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running[id] > 0
}
