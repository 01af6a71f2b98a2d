package reconcile

import (
	"container/heap"
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// queue is the loop's work queue, with the semantics of client-go's
// workqueue that controller-runtime builds on:
//
//   - a key queued twice is queued once (dedup);
//   - a key handed to a worker is "processing"; adding it again meanwhile
//     marks it dirty, and it is queued once more when the worker is done,
//     so no key is ever reconciled by two workers at once and no change
//     seen during a pass is lost;
//   - keys can be added after a delay (backoff, RequeueAfter); the
//     earliest due time of a key wins.
type queue[K comparable] struct {
	mu       sync.Mutex
	cond     sync.Cond
	items    []K
	head     int
	keys     map[K]keyState // every key queued or processing; one map, few lookups
	busy     int            // keys processing
	failures map[K]int
	delayed  delayHeap[K]
	due      map[K]time.Time // earliest due time per delayed key
	stopped  bool
	wake     chan struct{} // tells the delayer the earliest due time changed
	changed  chan struct{} // closed on every change while someone waits for idle
	waiters  int
}

func newQueue[K comparable]() *queue[K] {
	q := &queue[K]{
		keys:     map[K]keyState{},
		failures: map[K]int{},
		due:      map[K]time.Time{},
		wake:     make(chan struct{}, 1),
	}
	q.cond.L = &q.mu
	return q
}

// addLocked queues k unless it is queued already or being processed.
func (q *queue[K]) addLocked(k K) {
	if q.stopped {
		return
	}
	switch st := q.keys[k]; st {
	case queued, processingDirty:
		return
	case processing:
		q.keys[k] = processingDirty
		return
	}
	q.keys[k] = queued
	q.items = append(q.items, k)
	q.cond.Signal()
}

func (q *queue[K]) add(keys ...K) {
	q.mu.Lock()
	for _, k := range keys {
		q.addLocked(k)
	}
	q.changedLocked()
	q.mu.Unlock()
}

// get blocks until a key is ready or the queue is stopped.
func (q *queue[K]) get() (K, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.head == len(q.items) && !q.stopped {
		q.cond.Wait()
	}
	if q.stopped {
		var zero K
		return zero, false
	}
	return q.popLocked()
}

// popLocked hands the next queued key to the caller; one must be queued.
func (q *queue[K]) popLocked() (K, bool) {
	k := q.items[q.head]
	var zero K
	q.items[q.head] = zero
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	} else if q.head > 1024 && q.head*2 > len(q.items) {
		q.items, q.head = append(q.items[:0], q.items[q.head:]...), 0
	}
	q.keys[k] = processing
	q.busy++
	return k, true
}

// finishNext ends processing of k and gets the next key without waiting,
// in one critical section, so a busy worker takes the lock once per key
// instead of twice: it resets k's backoff if asked, schedules k again
// after retryIn if positive, queues it at once if it was added meanwhile,
// and returns the next queued key, if any, with the depth after all that.
func (q *queue[K]) finishNext(k K, forget bool, retryIn time.Duration, now time.Time) (next K, ok bool, depth int) {
	q.mu.Lock()
	if forget && len(q.failures) > 0 {
		delete(q.failures, k)
	}
	if retryIn > 0 {
		q.addAfterLocked(k, retryIn, now)
	}
	q.doneLocked(k)
	if q.head < len(q.items) && !q.stopped {
		next, ok = q.popLocked()
	}
	depth = q.depthLocked()
	q.mu.Unlock()
	return next, ok, depth
}

// done ends processing of k and queues it again if it was added meanwhile.
func (q *queue[K]) done(k K) {
	q.mu.Lock()
	q.doneLocked(k)
	q.mu.Unlock()
}

func (q *queue[K]) doneLocked(k K) {
	q.busy--
	if q.keys[k] != processingDirty || q.stopped {
		delete(q.keys, k)
	} else {
		q.keys[k] = queued
		q.items = append(q.items, k)
		q.cond.Signal()
	}
	q.changedLocked()
}

// addAfterLocked queues k after d.
func (q *queue[K]) addAfterLocked(k K, d time.Duration, now time.Time) {
	if q.stopped {
		return
	}
	if d <= 0 {
		q.addLocked(k)
		q.changedLocked()
		return
	}
	at := now.Add(d)
	if cur, ok := q.due[k]; ok && !at.Before(cur) {
		return
	}
	q.due[k] = at
	heap.Push(&q.delayed, delayed[K]{key: k, at: at})
	if q.delayed[0].key == k && q.delayed[0].at.Equal(at) {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
	q.changedLocked()
}

// promote queues the delayed keys due by now and returns the next due
// time, if any.
func (q *queue[K]) promote(now time.Time) (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.delayed) > 0 {
		next := q.delayed[0]
		if cur, ok := q.due[next.key]; !ok || !cur.Equal(next.at) {
			heap.Pop(&q.delayed) // superseded by an earlier due time
			continue
		}
		if next.at.After(now) {
			return next.at, true
		}
		heap.Pop(&q.delayed)
		delete(q.due, next.key)
		q.addLocked(next.key)
	}
	q.changedLocked()
	return time.Time{}, false
}

// backoff counts a failure of k and returns how long to wait before the
// next attempt.
func (q *queue[K]) backoff(k K, b Backoff) time.Duration {
	q.mu.Lock()
	n := q.failures[k]
	q.failures[k] = n + 1
	q.mu.Unlock()
	d := b.delay(n)
	if b.Jitter > 0 {
		d -= time.Duration(float64(d) * b.Jitter * rand.Float64())
	}
	return d
}

// stop ends the queue: workers get no more keys, and the keys waiting
// (queued or delayed) are dropped, so depth is 0 from then on. Keys being
// processed finish; done and finish ignore them.
func (q *queue[K]) stop() {
	q.mu.Lock()
	q.stopped = true
	for _, k := range q.items[q.head:] {
		delete(q.keys, k)
	}
	q.items, q.head = nil, 0
	q.delayed = nil
	clear(q.due)
	clear(q.failures)
	q.cond.Broadcast()
	q.changedLocked()
	q.mu.Unlock()
}

// depth returns the number of keys waiting: queued and delayed.
func (q *queue[K]) depth() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.depthLocked()
}

func (q *queue[K]) depthLocked() int {
	return len(q.items) - q.head + len(q.due)
}

func (q *queue[K]) idleLocked() bool {
	return q.head == len(q.items) && q.busy == 0 && len(q.due) == 0
}

// changedLocked wakes idle waiters once the queue is idle or stopped;
// waking them on every change would cost a channel per key.
func (q *queue[K]) changedLocked() {
	if q.waiters > 0 && q.changed != nil && (q.stopped || q.idleLocked()) {
		close(q.changed)
		q.changed = nil
	}
}

// waitIdle blocks until nothing is queued, processing or delayed.
func (q *queue[K]) waitIdle(ctx context.Context) error {
	for {
		q.mu.Lock()
		if q.idleLocked() || q.stopped {
			q.mu.Unlock()
			return nil
		}
		if q.changed == nil {
			q.changed = make(chan struct{})
		}
		ch := q.changed
		q.waiters++
		q.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		q.mu.Lock()
		q.waiters--
		q.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// keyState is where a key is: waiting in items, handed to a worker, or
// handed to a worker and added again meanwhile.
type keyState uint8

const (
	absent keyState = iota
	queued
	processing
	processingDirty
)

type delayed[K comparable] struct {
	key K
	at  time.Time
}

type delayHeap[K comparable] []delayed[K]

func (h delayHeap[K]) Len() int           { return len(h) }
func (h delayHeap[K]) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h delayHeap[K]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *delayHeap[K]) Push(x any)        { *h = append(*h, x.(delayed[K])) }
func (h *delayHeap[K]) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
