// Package watchlog turns a store's retained log of writes into watches
// that never miss a change: the shared machinery behind the Watch of
// transition.MemoryStore and boltstore.
//
// A watcher follows the log from a revision with its own cursor, so a
// slow consumer slows only itself, never a writer. When the cursor falls
// behind what the log retains, the watcher delivers an entry for every
// record the store holds and carries on from there: a level-triggered
// consumer re-reads each one and has missed nothing.
package watchlog

import (
	"context"
	"sync"
)

// Entry says that the record ID was written at Revision.
type Entry struct {
	ID       string
	Revision uint64
}

// Source is a store's log.
type Source interface {
	// Since returns up to limit entries with a revision above rev, in
	// revision order; compacted is true if entries above rev are no
	// longer all retained.
	Since(rev uint64, limit int) (entries []Entry, compacted bool, err error)
	// Snapshot returns an entry for every record the store holds and the
	// store's revision, read consistently.
	Snapshot() (entries []Entry, revision uint64, err error)
}

// Hub tells watchers that the log grew. The zero value is ready to use.
type Hub struct {
	mu      sync.Mutex
	changed chan struct{}
	closed  bool
}

// Notify wakes every watcher; writers call it after each commit.
func (h *Hub) Notify() {
	h.mu.Lock()
	if h.changed != nil {
		close(h.changed)
		h.changed = nil
	}
	h.mu.Unlock()
}

// Close ends every watch.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	if h.changed != nil {
		close(h.changed)
		h.changed = nil
	}
	h.mu.Unlock()
}

func (h *Hub) wait() (<-chan struct{}, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, false
	}
	if h.changed == nil {
		h.changed = make(chan struct{})
	}
	return h.changed, true
}

// batch bounds how many entries one read of the log returns.
const batch = 1024

// Follow calls emit for every entry above from, then for every new one,
// until ctx is done, the hub is closed, emit returns false or the source
// fails (whose error it returns).
func (h *Hub) Follow(ctx context.Context, src Source, from uint64, emit func(Entry) bool) error {
	cursor := from
	for {
		// Take the wake-up channel before reading, so a write that lands
		// after the read still wakes us.
		changed, open := h.wait()
		if !open {
			return nil
		}
		entries, compacted, err := src.Since(cursor, batch)
		if err != nil {
			return err
		}
		if compacted {
			entries, cursor, err = src.Snapshot()
			if err != nil {
				return err
			}
			for _, e := range entries {
				if !emit(e) {
					return nil
				}
			}
			continue
		}
		for _, e := range entries {
			if !emit(e) {
				return nil
			}
			cursor = e.Revision
		}
		if len(entries) == batch {
			continue
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil
		}
	}
}

// Channel runs Follow in a goroutine and delivers each entry, converted,
// on the returned channel, which is closed when the watch ends.
func Channel[T any](ctx context.Context, h *Hub, src Source, from uint64, convert func(Entry) T) <-chan T {
	ch := make(chan T)
	go func() {
		defer close(ch)
		_ = h.Follow(ctx, src, from, func(e Entry) bool {
			select {
			case ch <- convert(e):
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	return ch
}
