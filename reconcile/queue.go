package reconcile

import (
	"container/heap"
	"context"
	"hash/maphash"
	"math/rand/v2"
	"sync"
	"sync/atomic"
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
//
// The keys are spread over shards by hash, one per worker (up to
// maxShards), each with its own lock, and a key's state lives in its
// shard only. A worker takes keys from its own shard first and from the
// others when its own is empty, so no key waits while a worker is idle.
// The counts of waiting and processing keys are kept per shard too: one
// count for the queue, written by the goroutine adding keys and by every
// worker, was a cache line the two cores handed back and forth on every
// key. With one lock for every key, the workers and the goroutine adding keys
// handed it back and forth on every key, and four workers were slower
// than one. Keys come out of a shard in the order they went in; across
// shards the order is roughly the order of adding.
type queue[K comparable] struct {
	// Read on every add and get, written once: kept off the lines the
	// park fields below are written on, or every add would miss its
	// cache for them.
	shards  []shard[K]
	seed    maphash.Seed
	stopped atomic.Bool
	_       [64]byte

	// Workers with nothing to do sleep on park; sleepers is counted
	// before they look at the shards' waiting counts one last time, and
	// read by add after it counted its key, so a key never waits while
	// every worker sleeps.
	// waking is set while a worker woken for new keys has not run yet:
	// keys queued meanwhile wake nobody else, and that worker, once it
	// has a key, wakes the next if more wait (see get).
	parkMu   sync.Mutex
	park     sync.Cond
	sleepers atomic.Int32
	waking   atomic.Bool
	// beforeSleep, when set (by tests only), runs as a worker that found
	// nothing is about to count itself a sleeper.
	beforeSleep func()

	// Delays, retries and failure counts: only keys that fail or ask to
	// be requeued come here.
	delayMu  sync.Mutex
	failures map[K]int
	failed   atomic.Int64 // len(failures), read without delayMu
	delayed  delayHeap[K]
	due      map[K]time.Time // earliest due time per delayed key
	delays   atomic.Int64    // len(due)
	wake     chan struct{}   // tells the delayer the earliest due time changed

	idleMu  sync.Mutex
	idleNow chan struct{} // closed when the queue is idle or stopped while someone waits
	idlers  atomic.Int32
}

// maxShards bounds the shards: a worker that finds its own empty looks
// at every other one.
const maxShards = 64

// shard holds the keys that hash to it.
type shard[K comparable] struct {
	mu    sync.Mutex
	keys  map[K]keyState // every key queued or processing
	dirty int            // keys processingDirty: while none, done need not look
	items []K
	head  int
	// Written under mu, read without it (to pass an empty shard by, to
	// decide to sleep, for depth and idle hints).
	waiting atomic.Int64 // len(items) - head
	busy    atomic.Int64 // keys processing
	spare   []K          // the inbox's other buffer; guarded by mu
	_       [64]byte     // keep the inbox off the lines above

	// The inbox: adds only append here, under inMu, and the keys are
	// deduplicated into keys and items, under mu, when a worker looks
	// for one (drainLocked) or the inbox is full. An add then costs an
	// append under a lock the workers take once per drain, instead of a
	// map lookup under the lock every worker takes for every key: the
	// lines the adding goroutine writes stay in its core's cache.
	inMu  sync.Mutex
	inbox []K
	inN   atomic.Int64 // len(inbox), read without inMu
	_     [64]byte     // keep neighbouring shards off one cache line
}

// inboxCap is how many adds an inbox holds before the adding goroutine
// deduplicates them itself: it bounds the inbox when workers are busy
// (a hot key added a million times is one entry after a drain). Each
// drain folds the adds of a key it finds still queued, so a longer inbox
// folds more: 100k adds over 1k keys with 4 workers ran 14k reconciles
// at 256 and 10k at 1024, a tenth less time an add (BENCHMARKS.md,
// BenchmarkQueue/hot); idle workers drain it at once whatever its length,
// so no key waits longer for it.
const inboxCap = 1024

func newQueue[K comparable](workers int) *queue[K] {
	n := min(max(workers, 1), maxShards)
	q := &queue[K]{
		shards:   make([]shard[K], n),
		seed:     maphash.MakeSeed(),
		failures: map[K]int{},
		due:      map[K]time.Time{},
		wake:     make(chan struct{}, 1),
	}
	for i := range q.shards {
		q.shards[i].keys = map[K]keyState{}
	}
	q.park.L = &q.parkMu
	return q
}

func (q *queue[K]) shardOf(k K) *shard[K] {
	if len(q.shards) == 1 {
		return &q.shards[0]
	}
	// maphash.Comparable was a quarter of an add's time: strings and
	// integers, the keys controllers use, hash the cheap way. A bad
	// spread costs speed (one busy shard), never correctness.
	var h uint64
	switch v := any(k).(type) {
	case string:
		h = maphash.String(q.seed, v)
	case int:
		h = fibonacci(uint64(v))
	case int64:
		h = fibonacci(uint64(v))
	case uint64:
		h = fibonacci(v)
	case int32:
		h = fibonacci(uint64(v))
	case uint32:
		h = fibonacci(uint64(v))
	default:
		h = maphash.Comparable(q.seed, k)
	}
	return &q.shards[h%uint64(len(q.shards))]
}

// fibonacci spreads consecutive integers over the high bits, which it
// then brings down.
func fibonacci(v uint64) uint64 { return (v * 0x9e3779b97f4a7c15) >> 32 }

// addLocked queues k in s unless it is queued already or being processed;
// s.mu must be held. It reports whether k was queued.
func (q *queue[K]) addLocked(s *shard[K], k K) bool {
	if q.stopped.Load() {
		return false
	}
	switch st := s.keys[k]; st {
	case queued, processingDirty:
		return false
	case processing:
		s.keys[k] = processingDirty
		s.dirty++
		return false
	}
	s.keys[k] = queued
	s.items = append(s.items, k)
	s.waiting.Add(1)
	return true
}

func (q *queue[K]) add(keys ...K) {
	added := false
	for _, k := range keys {
		s := q.shardOf(k)
		if len(q.shards) == 1 {
			// One worker has nobody to share the map work with: given
			// the inbox, it would do it all while the adding goroutine
			// idles, and it got slower than this.
			s.mu.Lock()
			added = q.addLocked(s, k) || added
			s.mu.Unlock()
			continue
		}
		s.inMu.Lock()
		if q.stopped.Load() {
			s.inMu.Unlock()
			continue
		}
		s.inbox = append(s.inbox, k)
		n := len(s.inbox)
		s.inN.Store(int64(n))
		s.inMu.Unlock()
		added = true
		if n >= inboxCap {
			s.mu.Lock()
			q.drainLocked(s)
			s.mu.Unlock()
		}
	}
	if added {
		q.wakeWorker()
	}
}

// drainLocked moves the keys of s's inbox into s, deduplicating them as
// addLocked does, in the order they were added; s.mu must be held.
func (q *queue[K]) drainLocked(s *shard[K]) {
	if s.inN.Load() == 0 {
		return
	}
	s.inMu.Lock()
	in := s.inbox
	s.inbox = s.spare[:0]
	s.inN.Store(0)
	s.inMu.Unlock()
	for _, k := range in {
		q.addLocked(s, k)
	}
	clear(in) // let keys that hold pointers go
	s.spare = in[:0]
}

// wakeWorker wakes a sleeping worker for keys just queued, unless one
// woken before has yet to run. Waking one per key made the goroutine
// adding keys pay a wake-up for nearly every key while the workers kept
// up (they go back to sleep as soon as the queue is empty); woken one at
// a time, each passes the wake on when it finds more keys than it takes,
// so keys added together (a resync) still spread over the workers.
func (q *queue[K]) wakeWorker() {
	if q.sleepers.Load() <= 0 || q.waking.Load() {
		return
	}
	q.parkMu.Lock()
	if q.sleepers.Load() > 0 && !q.waking.Load() {
		q.waking.Store(true)
		q.park.Signal()
	}
	q.parkMu.Unlock()
}

// popLocked hands the next key of s to the caller, if it has one; s.mu
// must be held.
func (q *queue[K]) popLocked(s *shard[K]) (K, bool) {
	var zero K
	if s.head == len(s.items) {
		q.drainLocked(s) // the inbox's keys were added after every key in items
	}
	if s.head == len(s.items) || q.stopped.Load() {
		return zero, false
	}
	k := s.items[s.head]
	s.items[s.head] = zero
	s.head++
	if s.head == len(s.items) {
		s.items, s.head = s.items[:0], 0
	} else if s.head > 1024 && s.head*2 > len(s.items) {
		s.items, s.head = append(s.items[:0], s.items[s.head:]...), 0
	}
	s.keys[k] = processing
	s.busy.Add(1)
	s.waiting.Add(-1)
	return k, true
}

// tryGet takes a queued key without waiting: from shard home first, then
// from the others.
func (q *queue[K]) tryGet(home int) (K, bool) {
	n := len(q.shards)
	for i := range n {
		s := &q.shards[(home+i)%n]
		if s.waiting.Load() <= 0 && s.inN.Load() == 0 {
			continue
		}
		s.mu.Lock()
		k, ok := q.popLocked(s)
		s.mu.Unlock()
		if ok {
			return k, true
		}
	}
	var zero K
	return zero, false
}

// get blocks until a key is ready or the queue is stopped; home is the
// worker's own shard.
func (q *queue[K]) get(home int) (K, bool) {
	for {
		if k, ok := q.tryGet(home); ok {
			if q.waiting() > 0 {
				q.wakeWorker() // more than this worker takes: pass it on
			}
			return k, true
		}
		if q.stopped.Load() {
			var zero K
			return zero, false
		}
		if q.beforeSleep != nil {
			q.beforeSleep()
		}
		q.parkMu.Lock()
		q.sleepers.Add(1)
		// Counted as a sleeper before this last look: an add after it
		// wakes this worker (or one woken before it, still to run, that
		// will see the key), an add before it is seen here.
		if q.waiting() <= 0 && !q.stopped.Load() {
			q.park.Wait()
			q.waking.Store(false) // this is the worker woken (or the queue stopped)
		}
		q.sleepers.Add(-1)
		q.parkMu.Unlock()
	}
}

// finishNext ends processing of k and gets the next key without waiting:
// it resets k's backoff if asked, schedules k again after retryIn if
// positive, queues it at once if it was added meanwhile, and returns the
// next queued key, if any (from k's shard while it holds its lock, then
// from home and the others).
func (q *queue[K]) finishNext(k K, home int, forget bool, retryIn time.Duration, now time.Time) (next K, ok bool) {
	if (forget && q.failed.Load() > 0) || retryIn > 0 {
		q.delayMu.Lock()
		if forget && len(q.failures) > 0 {
			delete(q.failures, k)
			q.failed.Store(int64(len(q.failures)))
		}
		if retryIn > 0 {
			q.addAfterLocked(k, retryIn, now)
		}
		q.delayMu.Unlock()
	}
	s := q.shardOf(k)
	s.mu.Lock()
	requeued := q.doneLocked(s, k)
	next, ok = q.popLocked(s)
	s.mu.Unlock()
	if !ok {
		next, ok = q.tryGet(home)
	}
	if requeued && !(ok && next == k) {
		// k waits in the queue while this worker goes on with another:
		// a sleeping worker takes it.
		q.wakeWorker()
	}
	q.notifyIdle()
	return next, ok
}

// done ends processing of k and queues it again if it was added meanwhile.
func (q *queue[K]) done(k K) {
	s := q.shardOf(k)
	s.mu.Lock()
	requeued := q.doneLocked(s, k)
	s.mu.Unlock()
	if requeued {
		q.wakeWorker()
	}
	q.notifyIdle()
}

// doneLocked ends processing of k in s, whose lock must be held, and
// reports whether k was queued again.
func (q *queue[K]) doneLocked(s *shard[K], k K) bool {
	// Adds of k made while it was processed may still sit in the inbox:
	// folded in now, they make the one pass more they ask for. Drained
	// after k was queued again, they found it processing once more and
	// asked for a third.
	q.drainLocked(s)
	// A key is looked up only if some key of the shard was added while
	// processing: with distinct keys done is one delete, not a lookup
	// and a delete (a tenth of a key's time with 100k of them).
	requeue := false
	if s.dirty > 0 && s.keys[k] == processingDirty {
		s.dirty--
		requeue = !q.stopped.Load()
	}
	if requeue {
		s.keys[k] = queued
		s.items = append(s.items, k)
		s.waiting.Add(1)
	} else {
		delete(s.keys, k)
	}
	s.busy.Add(-1)
	return requeue
}

// addAfterLocked queues k after d; delayMu must be held.
func (q *queue[K]) addAfterLocked(k K, d time.Duration, now time.Time) {
	if q.stopped.Load() {
		return
	}
	at := now.Add(d)
	if cur, ok := q.due[k]; ok && !at.Before(cur) {
		return
	}
	q.due[k] = at
	q.delays.Store(int64(len(q.due)))
	heap.Push(&q.delayed, delayed[K]{key: k, at: at})
	if q.delayed[0].key == k && q.delayed[0].at.Equal(at) {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// promote queues the delayed keys due by now and returns the next due
// time, if any.
func (q *queue[K]) promote(now time.Time) (time.Time, bool) {
	var ready []K
	var next time.Time
	var pending bool
	q.delayMu.Lock()
	for len(q.delayed) > 0 {
		d := q.delayed[0]
		if cur, ok := q.due[d.key]; !ok || !cur.Equal(d.at) {
			heap.Pop(&q.delayed) // superseded by an earlier due time
			continue
		}
		if d.at.After(now) {
			next, pending = d.at, true
			break
		}
		heap.Pop(&q.delayed)
		delete(q.due, d.key)
		ready = append(ready, d.key)
	}
	// Queued while delayMu is still held, so that idle, which holds it
	// too, never sees a key in neither place.
	q.add(ready...)
	q.delays.Store(int64(len(q.due)))
	q.delayMu.Unlock()
	q.notifyIdle()
	return next, pending
}

// backoff counts a failure of k and returns how long to wait before the
// next attempt.
func (q *queue[K]) backoff(k K, b Backoff) time.Duration {
	q.delayMu.Lock()
	n := q.failures[k]
	q.failures[k] = n + 1
	q.failed.Store(int64(len(q.failures)))
	q.delayMu.Unlock()
	d := b.delay(n)
	if b.Jitter > 0 {
		d -= time.Duration(float64(d) * b.Jitter * rand.Float64())
	}
	return d
}

// stop ends the queue: workers get no more keys, and the keys waiting
// (queued or delayed) are dropped, so depth is 0 from then on. Keys being
// processed finish; done and finishNext forget them.
func (q *queue[K]) stop() {
	q.stopped.Store(true)
	for i := range q.shards {
		s := &q.shards[i]
		s.mu.Lock()
		for _, k := range s.items[s.head:] {
			delete(s.keys, k)
		}
		s.items, s.head = nil, 0
		s.waiting.Store(0)
		s.inMu.Lock()
		s.inbox, s.spare = nil, nil
		s.inN.Store(0)
		s.inMu.Unlock()
		s.mu.Unlock()
	}
	q.delayMu.Lock()
	q.delayed = nil
	clear(q.due)
	q.delays.Store(0)
	clear(q.failures)
	q.failed.Store(0)
	q.delayMu.Unlock()
	q.parkMu.Lock()
	q.park.Broadcast()
	q.parkMu.Unlock()
	q.notifyIdle()
}

// depth returns the number of keys waiting: queued and delayed.
func (q *queue[K]) depth() int {
	return int(q.waiting() + q.delays.Load())
}

// waiting sums the keys waiting in the shards, their inboxes' adds
// included (a key added twice since the last drain counts twice).
func (q *queue[K]) waiting() int64 {
	var n int64
	for i := range q.shards {
		n += q.shards[i].waiting.Load() + q.shards[i].inN.Load()
	}
	return n
}

// mayBeIdle is idle as the counters say; they are read one after
// another, so it is a hint. Every change updates them before it calls
// notifyIdle, so the change that leaves the queue idle sees it.
func (q *queue[K]) mayBeIdle() bool {
	if q.delays.Load() != 0 {
		return false
	}
	for i := range q.shards {
		if q.shards[i].waiting.Load() != 0 || q.shards[i].busy.Load() != 0 || q.shards[i].inN.Load() != 0 {
			return false
		}
	}
	return true
}

// idle reports whether nothing is queued, processing or delayed, from
// one snapshot: delayMu and every shard's lock held (in that order, the
// order promote takes them in).
func (q *queue[K]) idle() bool {
	q.delayMu.Lock()
	defer q.delayMu.Unlock()
	if len(q.due) > 0 {
		return false
	}
	for i := range q.shards {
		q.shards[i].mu.Lock()
	}
	empty := true
	for i := range q.shards {
		empty = empty && len(q.shards[i].keys) == 0 && q.shards[i].inN.Load() == 0
	}
	for i := range q.shards {
		q.shards[i].mu.Unlock()
	}
	return empty
}

// notifyIdle wakes idle waiters once the queue is idle or stopped;
// waking them on every change would cost a channel per key.
func (q *queue[K]) notifyIdle() {
	if q.idlers.Load() == 0 || (!q.stopped.Load() && !q.mayBeIdle()) {
		return
	}
	if !q.stopped.Load() && !q.idle() {
		return
	}
	q.idleMu.Lock()
	if q.idleNow != nil {
		close(q.idleNow)
		q.idleNow = nil
	}
	q.idleMu.Unlock()
}

// waitIdle blocks until nothing is queued, processing or delayed.
func (q *queue[K]) waitIdle(ctx context.Context) error {
	for {
		q.idleMu.Lock()
		if q.idleNow == nil {
			q.idleNow = make(chan struct{})
		}
		ch := q.idleNow
		q.idlers.Add(1)
		q.idleMu.Unlock()
		// Registered before looking: a change that leaves the queue idle
		// after this look closes ch.
		if q.stopped.Load() || q.idle() {
			q.idlers.Add(-1)
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
		}
		q.idlers.Add(-1)
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
