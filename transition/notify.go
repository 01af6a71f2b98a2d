package transition

import "sync"

// notifier delivers changes to observers in write order without holding
// any lock an observer could need.
//
// Writers enqueue a change while they still hold their own write lock, so
// the queue is in write order. Whoever finds nobody delivering becomes the
// deliverer and drains the queue, calling observers outside the lock;
// everyone else returns at once. An observer that fires a change itself
// therefore only enqueues it, and the drain loop up its stack delivers it
// next: no deadlock, no reordering, no change seen twice.
type notifier[S comparable] struct {
	observers []func(Change[S])

	mu         sync.Mutex
	queue      []Change[S]
	delivering bool
}

func newNotifier[S comparable](observers []func(Change[S])) *notifier[S] {
	if len(observers) == 0 {
		return nil
	}
	return &notifier[S]{observers: observers}
}

func (n *notifier[S]) enqueue(c Change[S]) {
	n.mu.Lock()
	n.queue = append(n.queue, c)
	n.mu.Unlock()
}

func (n *notifier[S]) drain() {
	n.mu.Lock()
	if n.delivering {
		n.mu.Unlock()
		return
	}
	n.delivering = true
	for len(n.queue) > 0 {
		c := n.queue[0]
		n.queue[0] = Change[S]{}
		n.queue = n.queue[1:]
		if len(n.queue) == 0 {
			n.queue = n.queue[:0:0] // let the backing array go
		}
		n.mu.Unlock()
		n.deliver(c)
		n.mu.Lock()
	}
	n.delivering = false
	n.mu.Unlock()
}

// deliver calls every observer with c. If one panics, the panic goes on up
// to the caller of Fire, but the notifier stays usable: the next drain
// delivers what is still queued.
func (n *notifier[S]) deliver(c Change[S]) {
	done := false
	defer func() {
		if !done {
			n.mu.Lock()
			n.delivering = false
			n.mu.Unlock()
		}
	}()
	for _, o := range n.observers {
		o(c)
	}
	done = true
}
