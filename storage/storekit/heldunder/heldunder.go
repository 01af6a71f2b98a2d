// Package heldunder keeps the ownerships taken under another
// (storage.Lease.Under), for the stores whose ownerships are objects of
// their own (etcdstore, kube): they end when the one they are under does.
package heldunder

import "sync"

// Set is the ownerships held under one. Its zero value is ready.
type Set struct {
	mu    sync.Mutex
	ended bool
	ends  map[any]func()
}

// Add keeps key, to be ended with end when the Set is; false if the Set
// has ended already (then key is not kept and end is not called).
func (s *Set) Add(key any, end func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	if s.ends == nil {
		s.ends = map[any]func(){}
	}
	s.ends[key] = end
	return true
}

// Remove forgets key: released alone, it is not ended with the Set.
func (s *Set) Remove(key any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ends, key)
}

// End ends every ownership kept, once; later Adds fail.
func (s *Set) End() {
	s.mu.Lock()
	ends := s.ends
	s.ends, s.ended = nil, true
	s.mu.Unlock()
	for _, end := range ends {
		end()
	}
}
