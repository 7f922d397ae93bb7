package schedule

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// conflictShards splits the registry so that schedules firing at the same
// instant do not queue on one lock.
const conflictShards = 64

// sweepMin is the fewest ids a shard holds before it sweeps idle ones.
const sweepMin = 64

// Conflicts tracks which task ids are running, across every schedule that
// shares it. An app owns one; two apps in one process do not see each other.
//
// An id stays in the registry while idle, so that a schedule running the
// same task every period finds its entry rather than inserting and
// deleting one on every fire; the holder of a run keeps the entry and
// gives it back without a second lookup. A shard sweeps out ids that
// stayed idle since its previous sweep once it has doubled in size since
// then: a fixed set of ids is never swept, and ids made anew for every
// task (an order number, say) stay bounded by twice those in use between
// two sweeps.
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
	mu       sync.Mutex
	ids      map[string]*heldID
	sweepAt  int      // the size at which the shard next sweeps
	returned int      // swept ids that came back since the last sweep
	_        [32]byte // keep shards on separate cache lines
}

// heldID is an id's entry in its shard, guarded by the shard's lock.
type heldID struct {
	shard   *conflictShard
	id      string
	running int32
	used    bool // acquired since the shard's last sweep
	claimed bool // claimed through Claims by the current holder
	swept   bool // no longer the shard's: a caller holding it as a hint looks the id up again
}

// NewConflicts returns an empty registry.
func NewConflicts() *Conflicts {
	r := &Conflicts{seed: maphash.MakeSeed()}
	for i := range r.shards {
		r.shards[i].ids = map[string]*heldID{}
		r.shards[i].sweepAt = sweepMin
	}
	return r
}

func (r *Conflicts) shard(id string) *conflictShard {
	return &r.shards[maphash.String(r.seed, id)%conflictShards]
}

// acquire marks id as running and returns its entry, which release takes
// back. With exclusive it returns nil, changing nothing, when id is
// already running or (with Claims) is claimed elsewhere.
func (r *Conflicts) acquire(id string, exclusive bool) *heldID {
	return r.acquireFrom(nil, id, exclusive)
}

// acquireFrom is acquire with the entry the caller got last time (nil for
// none), kept in last: a schedule whose task recurs finds its entry
// there, without hashing its id and looking it up in the map, for as long
// as the shard has not swept it.
func (r *Conflicts) acquireFrom(last *atomic.Pointer[heldID], id string, exclusive bool) *heldID {
	var s *conflictShard
	var h, back *heldID
	if last != nil {
		if h = last.Load(); h != nil && h.id == id {
			s = h.shard
			s.mu.Lock()
			if h.swept {
				back, h = h, nil // the same shard: looked up below
			}
		} else {
			h = nil
		}
	}
	if h == nil {
		if s == nil {
			s = r.shard(id)
			s.mu.Lock()
		}
		h = s.entryLocked(id, back)
		if last != nil {
			last.Store(h)
		}
	}
	if exclusive && h.running > 0 {
		s.mu.Unlock()
		return nil
	}
	h.running++
	h.used = true
	s.mu.Unlock()
	if !exclusive || r.claims == nil {
		return h
	}
	// Counted here first (a second acquire here is refused meanwhile),
	// then claimed beyond the process without holding the lock.
	if !r.claims.Claim(id) {
		r.release(h)
		return nil
	}
	s.mu.Lock()
	h.claimed = true
	s.mu.Unlock()
	return h
}

// entryLocked returns id's entry in s, put in when missing: back, the
// caller's hint swept from s, when it has one (the id recurs), else a new
// one. Called with s.mu held.
func (s *conflictShard) entryLocked(id string, back *heldID) *heldID {
	if h := s.ids[id]; h != nil {
		return h
	}
	if len(s.ids) >= s.sweepAt {
		s.sweep()
	}
	h := back
	if h != nil { // swept too early: it recurs
		s.returned++
		s.sweepAt += 2 // room for it and one more, at once
		h.swept = false
	} else {
		h = &heldID{shard: s, id: id}
	}
	s.ids[id] = h
	return h
}

// prepare puts id's entry in the registry, idle, and in last: the first
// acquireFrom of it then finds it there, and inserts nothing. Counted as
// used, so the shard's next sweep keeps it.
func (r *Conflicts) prepare(last *atomic.Pointer[heldID], id string) {
	s := r.shard(id)
	s.mu.Lock()
	h := s.entryLocked(id, nil)
	h.used = true
	s.mu.Unlock()
	last.Store(h)
}

// release gives back an entry acquire returned.
func (r *Conflicts) release(h *heldID) {
	s := h.shard
	s.mu.Lock()
	h.running--
	claimed := h.claimed && h.running == 0
	if claimed {
		h.claimed = false
	}
	s.mu.Unlock()
	if claimed {
		r.claims.Unclaim(h.id)
	}
}

// sweep drops the ids idle since the previous sweep and sets the size of
// the next: twice what is left, plus twice the swept ids that came back
// since the previous sweep. Sweeps are set off by size, not time, so with
// more recurring ids in a shard than sweepMin, one period of their
// schedules can span several sweeps, each dropping the ids that have not
// fired since the previous one; every fire then made its entry anew. An
// id that comes back (its holder's hint names it, swept) is put back and
// moves the shard's next sweep two further at once, and the sweep after it
// by twice the ids that came back, until one period fits between two
// sweeps. Ids made anew for every task never come back, and stay bounded
// by twice those in use between two sweeps. Called with s.mu held.
func (s *conflictShard) sweep() {
	for id, h := range s.ids {
		if h.running == 0 && !h.used {
			delete(s.ids, id)
			h.swept = true
		}
		h.used = false
	}
	s.sweepAt = max(2*len(s.ids), sweepMin) + 2*s.returned
	s.returned = 0
}

// Running reports whether a task with this id has been submitted and has
// not yet returned, in any schedule sharing the registry.
func (r *Conflicts) Running(id string) bool {
	s := r.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.ids[id]
	return h != nil && h.running > 0
}
