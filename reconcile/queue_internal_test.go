package reconcile

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/internal/testwait"
	"github.com/stretchr/testify/require"
)

// The sharded queue under concurrent adders and workers, some finishing
// with a retry: no key is ever handed to two workers at once, and no add
// is lost (the last time each key is handed out comes after its last
// add), whichever shard a key lands in and whichever worker takes it.
func TestQueueNeverLosesAnAddNorRunsAKeyTwiceAtOnce(t *testing.T) {
	for _, workers := range []int{1, 3, 8} {
		t.Run(fmt.Sprint("workers=", workers), func(t *testing.T) {
			for seed := range uint64(5) {
				stressQueue(t, workers, seed)
			}
		})
	}
}

func stressQueue(t *testing.T, workers int, seed uint64) {
	const keys, adders, addsEach = 50, 3, 2000
	q := newQueue[int](workers)
	var mu sync.Mutex
	added := make([]int, keys) // adds of each key so far
	seen := make([]int, keys)  // the adds a hand-out of the key came after
	inFlight := make([]bool, keys)
	var fault error

	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			k, ok := q.get(w % len(q.shards))
			for ok {
				mu.Lock()
				if inFlight[k] && fault == nil {
					fault = fmt.Errorf("key %d handed to two workers at once", k)
				}
				inFlight[k] = true
				seen[k] = max(seen[k], added[k])
				mu.Unlock()
				if rng.IntN(4) == 0 {
					time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
				}
				mu.Lock()
				inFlight[k] = false
				mu.Unlock()
				retry := time.Duration(0)
				if rng.IntN(20) == 0 {
					retry = time.Nanosecond // due at once: the delayer below queues it
				}
				k, ok = q.finishNext(k, w%len(q.shards), retry == 0, retry, time.Now())
				if !ok {
					k, ok = q.get(w % len(q.shards))
				}
			}
		}()
	}
	stopDelayer := make(chan struct{})
	delayerDone := make(chan struct{})
	go func() {
		defer close(delayerDone)
		for {
			q.promote(time.Now())
			select {
			case <-stopDelayer:
				return
			case <-q.wake:
			case <-time.After(time.Millisecond):
			}
		}
	}()
	var adding sync.WaitGroup
	for a := range adders {
		adding.Add(1)
		go func() {
			defer adding.Done()
			rng := rand.New(rand.NewPCG(seed, 100+uint64(a)))
			for range addsEach {
				k := rng.IntN(keys)
				mu.Lock()
				added[k]++
				mu.Unlock()
				q.add(k)
			}
		}()
	}
	adding.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Bound)
	defer cancel()
	require.NoError(t, q.waitIdle(ctx), "the queue drains")
	q.stop()
	close(stopDelayer)
	<-delayerDone
	wg.Wait()
	require.NoError(t, fault)
	require.Equal(t, added, seen, "every key was handed out after its last add")
	require.Zero(t, q.depth())
}

// Keys added together while every worker sleeps wake as many workers as
// there are keys: a resync's keys are not left to one worker while the
// others sleep.
func TestQueueAddWakesAWorkerPerKey(t *testing.T) {
	const workers = 4
	q := newQueue[int](workers)
	got := make(chan int, workers)
	for w := range workers {
		go func() {
			if k, ok := q.get(w); ok {
				got <- k
			}
		}()
	}
	deadline := time.Now().Add(testwait.Bound)
	for q.sleepers.Load() < workers {
		require.True(t, time.Now().Before(deadline), "the workers did not go to sleep: %d of %d", q.sleepers.Load(), workers)
		time.Sleep(time.Millisecond)
	}
	q.add(1, 2, 3, 4)
	for range workers {
		testwait.Recv(t, got, "a worker to wake for each key") // none of them finishes its key
	}
	q.stop()
}

// A key added while its worker is on the way to sleep is still taken: the
// worker counts itself a sleeper before its last look at the shards, and
// an add looks for sleepers after it counted its key. The add is put in
// that window by the test hook, every time, in each shard.
func TestQueueAKeyAddedAsItsWorkerGoesToSleepIsTaken(t *testing.T) {
	const workers = 3
	q := newQueue[int](workers)
	const keys = 3 * workers // keys in every shard
	next := 0                // touched by the one worker only
	q.beforeSleep = func() { // the worker found nothing and is about to sleep
		if next < keys {
			q.add(next) // nobody sleeps yet: this add wakes nobody
			next++
		}
	}
	got := make(chan int)
	go func() {
		for {
			k, ok := q.get(0)
			if !ok {
				close(got)
				return
			}
			got <- k
			q.done(k)
		}
	}()
	for k := range keys {
		require.Equal(t, k, testwait.Recv(t, got, fmt.Sprintf("key %d, added as the worker went to sleep", k)))
	}
	q.stop()
	testwait.Closed(t, got, "the worker to stop")
}

// With nobody taking keys, a hot key added over and over is one entry
// once its shard's inbox fills: the adding goroutine deduplicates it, so
// the inbox stays bounded, and each key is handed out once.
func TestQueueInboxIsBoundedWhileNoWorkerDrainsIt(t *testing.T) {
	const keys = 10
	q := newQueue[int](4)
	for i := range 100 * inboxCap {
		q.add(i % keys)
	}
	tracked := 0
	for i := range q.shards {
		s := &q.shards[i]
		require.Less(t, s.inN.Load(), int64(inboxCap), "shard %d's inbox", i)
		s.mu.Lock()
		tracked += len(s.keys)
		s.mu.Unlock()
	}
	require.LessOrEqual(t, tracked, keys)
	seen := map[int]bool{}
	for range keys {
		k, ok := q.tryGet(0)
		require.True(t, ok)
		require.False(t, seen[k], "key %d handed out twice", k)
		seen[k] = true
	}
	_, ok := q.tryGet(0)
	require.False(t, ok, "every key once")
	q.stop()
}

// Adds of a key made while it is processed ask for one pass more, however
// many and wherever they wait: one drained before the key finished and
// one still in the inbox then are one pass, not two. (Drained only when a
// worker ran out of keys, the second found the key processing its second
// pass and asked for a third; TestLoopNeverRunsAKeyTwiceAtOnce... saw it
// about once in a hundred runs.)
func TestQueueAddsDuringAPassStillInTheInboxMakeOnePassMore(t *testing.T) {
	q := newQueue[int](4)
	q.add(1)
	k, ok := q.tryGet(0)
	require.True(t, ok)
	require.Equal(t, 1, k)
	q.add(1)
	_, ok = q.tryGet(0) // drains that add: 1 is dirty
	require.False(t, ok)
	q.add(1) // waits in the inbox while pass 1 ends
	q.done(1)
	k, ok = q.tryGet(0)
	require.True(t, ok, "pass 2")
	require.Equal(t, 1, k)
	_, ok = q.tryGet(0)
	require.False(t, ok)
	q.done(1)
	_, ok = q.tryGet(0)
	require.False(t, ok, "no pass 3: every add came before pass 2")
}
