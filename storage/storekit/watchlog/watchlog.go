// Package watchlog turns a store's retained log of writes into watches
// that never miss a change: the shared machinery behind the Watch of
// storage.Memory and boltstore.
//
// A watcher follows the log from a revision with its own cursor, so a
// slow consumer slows only itself, never a writer. When the cursor falls
// behind what the log retains, the watcher delivers an entry for every
// record the store holds and carries on from there: a level-triggered
// consumer re-reads each one and has missed nothing.
package watchlog

import (
	"context"
	"errors"
	"sync"
)

// ErrInconsistent is returned by Follow when the source contradicts
// itself: it says the log was compacted past a snapshot it just took. A
// watch on it would re-send the snapshot forever.
var ErrInconsistent = errors.New("watchlog: the log says it was compacted past the store's own revision")

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
	done    chan struct{} // closed by Close
}

// Done is closed when the hub is closed: a watcher blocked on its
// consumer stops then.
func (h *Hub) Done() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done == nil {
		h.done = make(chan struct{})
		if h.closed {
			close(h.done)
		}
	}
	return h.done
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
	if !h.closed && h.done != nil {
		close(h.done)
	}
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
			// A log compacted past the snapshot's own revision contradicts
			// it (tampered metadata): following it would re-send the
			// snapshot in a busy loop.
			if _, again, err := src.Since(cursor, 1); err != nil {
				return err
			} else if again {
				return ErrInconsistent
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
// on the returned channel, which is closed when the watch ends: ctx done,
// the hub closed (even while the consumer is not reading), or the source
// failed. Nothing is delivered once the hub is closed.
func Channel[T any](ctx context.Context, h *Hub, src Source, from uint64, convert func(Entry) T) <-chan T {
	ch := make(chan T)
	done := h.Done()
	go func() {
		defer close(ch)
		_ = h.Follow(ctx, src, from, func(e Entry) bool {
			select {
			case <-done:
				return false // closed: deliver nothing more, even if the consumer is ready
			default:
			}
			select {
			case ch <- convert(e):
				return true
			case <-ctx.Done():
				return false
			case <-done:
				return false
			}
		})
	}()
	return ch
}
