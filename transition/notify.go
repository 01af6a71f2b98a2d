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
	onPanic   func(Change[S], any)

	mu         sync.Mutex
	queue      []Change[S]
	delivering bool
}

func newNotifier[S comparable](observers []func(Change[S]), onPanic func(Change[S], any)) *notifier[S] {
	if len(observers) == 0 {
		return nil
	}
	return &notifier[S]{observers: observers, onPanic: onPanic}
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

// deliver calls every observer with c. An observer that panics is
// recovered and reported; the others still see c.
func (n *notifier[S]) deliver(c Change[S]) {
	for _, o := range n.observers {
		callObserver(o, c, n.onPanic, c)
	}
}

// callObserver calls o with v. A panic is recovered and handed to
// onPanic with the change it was about; a panicking onPanic is recovered
// too: it has nobody left to tell. OnChange and OnFailure observers both
// go through it.
func callObserver[S comparable, T any](o func(T), v T, onPanic func(Change[S], any), about Change[S]) {
	defer func() {
		if r := recover(); r != nil {
			defer func() { _ = recover() }()
			onPanic(about, r)
		}
	}()
	o(v)
}
