package storagetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/storage"

	"github.com/stretchr/testify/require"
)

// ownershipTests are the ownership part of the contract.
var ownershipTests = []struct {
	name string
	fn   func(*testing.T, storage.Store)
}{
	{"AcquireTakesTheRecordAtTheNextEpoch", acquireTakesTheRecordAtTheNextEpoch},
	{"AcquireOfALiveHolderIsHeldAndWritesNothing", acquireOfALiveHolderIsHeld},
	{"ReleaseClosesLostAndFreesTheRecord", releaseClosesLostAndFreesTheRecord},
	{"AcquireWaitsForTheHolderToEnd", acquireWaitsForTheHolderToEnd},
	{"AcquireWaitEndsWithItsContext", acquireWaitEndsWithItsContext},
	{"AcquireUnknownIsNotFound", acquireUnknownIsNotFound},
	{"AcquireRefusesAnInvalidLease", acquireRefusesAnInvalidLease},
	{"AcquireWithADoneContextWritesNothing", acquireWithADoneContextWritesNothing},
	{"CompareAndSwapCannotChangeTheClaim", casCannotChangeTheClaim},
	{"ConcurrentAcquirersHaveExactlyOneWinner", concurrentAcquirersHaveOneWinner},
	{"AcquireKeepsTheRecordsOwnTrailLength", acquireKeepsTheTrailLength},
	{"AcquireWithAMoveWritesBothInOneWrite", acquireWithAMoveWritesOnce},
	{"AcquireWithAMoveOnAStaleRevisionWritesAndHoldsNothing", acquireWithAStaleMoveWritesNothing},
	{"TheHoldersWritesLandOnlyWhileItOwns", holdersWritesLandOnlyWhileItOwns},
	{"AWriteInFlightLandsBeforeReleaseReturnsOrNotAtAll", writeInFlightLandsBeforeRelease},
	{"HeldNamesTheLiveHolderOnly", heldNamesTheLiveHolderOnly},
	{"UnderHoldsEveryRecordWhileItsOwnershipLasts", underHoldsWhileItsOwnershipLasts},
	{"UnderLetsOneRecordGoAlone", underLetsOneRecordGo},
	{"UnderRefusesAnOwnershipItCannotHoldUnder", underRefusesWhatItCannotHoldUnder},
}

// Lease returns a valid lease for holder with the given wait, for tests.
func Lease(holder string) storage.Lease {
	return storage.Lease{Holder: holder, TTL: 30 * time.Second, Reason: "controller " + holder + " started"}
}

// Unowned returns Sample(id) owned by nobody.
func Unowned(id string) storage.Record {
	rec := Sample(id)
	rec.Owner, rec.Epoch = "", 0
	return rec
}

// release ends own at the end of the test, whatever happens.
func release(t *testing.T, own storage.Ownership) {
	t.Cleanup(func() { _ = own.Release(context.Background()) })
}

// requireLost fails unless own's Lost channel is (or soon becomes) closed.
func requireLost(t *testing.T, own storage.Ownership, why string) {
	t.Helper()
	select {
	case <-own.Lost():
	case <-time.After(20 * time.Second):
		t.Fatalf("Lost was not closed: %s", why)
	}
}

func requireNotLost(t *testing.T, own storage.Ownership, why string) {
	t.Helper()
	select {
	case <-own.Lost():
		t.Fatalf("Lost was closed: %s", why)
	default:
	}
}

func acquireTakesTheRecordAtTheNextEpoch(t *testing.T, s storage.Store) {
	created, err := s.Create(ctx(t), Unowned("ex-1"))
	require.NoError(t, err)
	own, rec, err := s.Acquire(ctx(t), "ex-1", Lease("pod-a"))
	require.NoError(t, err)
	release(t, own)
	require.Equal(t, storage.Claim{Owner: "pod-a", Epoch: 1}, own.Claim())
	require.Greater(t, rec.Revision, created.Revision)
	require.Equal(t, "pod-a", rec.Owner)
	require.Equal(t, uint64(1), rec.Epoch)
	require.Equal(t, created.Status, rec.Status, "a take-over keeps the status")
	require.True(t, created.Since.Equal(rec.Since), "and the time the status was entered")
	last, _ := rec.History.Last()
	require.Equal(t, storage.Entry{From: created.Status, To: created.Status, Reason: "controller pod-a started",
		Actor: "pod-a", Owner: "pod-a", Epoch: 1, At: last.At, Revision: created.Revision}, last)
	got, err := s.Get(ctx(t), "ex-1")
	require.NoError(t, err)
	require.Equal(t, rec.Revision, got.Revision)
	requireSameRecord(t, rec, got)
	requireNotLost(t, own, "a fresh ownership")

	// A record that had an owner before is taken over above its epoch.
	_, err = s.Create(ctx(t), Sample("ex-2")) // owned by pod-a at epoch 3, with no live holder
	require.NoError(t, err)
	own2, rec2, err := s.Acquire(ctx(t), "ex-2", Lease("pod-b"))
	require.NoError(t, err)
	release(t, own2)
	require.Equal(t, storage.Claim{Owner: "pod-b", Epoch: 4}, own2.Claim())
	require.Equal(t, uint64(4), rec2.Epoch)
}

func acquireOfALiveHolderIsHeld(t *testing.T, s storage.Store) {
	_, err := s.Create(ctx(t), Unowned("ex-1"))
	require.NoError(t, err)
	own, _, err := s.Acquire(ctx(t), "ex-1", Lease("pod-a"))
	require.NoError(t, err)
	release(t, own)
	before, err := s.Get(ctx(t), "ex-1")
	require.NoError(t, err)
	for _, holder := range []string{"pod-b", "pod-a"} { // not even under the holder's own name
		_, _, err = s.Acquire(ctx(t), "ex-1", Lease(holder))
		require.ErrorIs(t, err, storage.ErrHeld, holder)
		var held *storage.HeldError
		require.ErrorAs(t, err, &held)
		require.Equal(t, "ex-1", held.ID)
		require.Contains(t, []string{"", "pod-a"}, held.Holder)
		require.Contains(t, []string{"", before.Status}, held.Status)
	}
	after, err := s.Get(ctx(t), "ex-1")
	require.NoError(t, err)
	require.Equal(t, before.Revision, after.Revision, "a refused take-over writes nothing")
	requireNotLost(t, own, "a refused take-over leaves the holder alone")
}

func releaseClosesLostAndFreesTheRecord(t *testing.T, s storage.Store) {
	_, err := s.Create(ctx(t), Unowned("ex-1"))
	require.NoError(t, err)
	own, _, err := s.Acquire(ctx(t), "ex-1", Lease("pod-a"))
	require.NoError(t, err)
	require.NoError(t, own.Release(ctx(t)))
	requireLost(t, own, "after Release")
	require.NoError(t, own.Release(ctx(t)), "Release is idempotent")
	next, rec, err := s.Acquire(ctx(t), "ex-1", Lease("pod-b"))
	require.NoError(t, err, "a released record is free at once")
	release(t, next)
	require.Equal(t, storage.Claim{Owner: "pod-b", Epoch: 2}, next.Claim())
	require.Equal(t, uint64(2), rec.Epoch)
}

func acquireWaitsForTheHolderToEnd(t *testing.T, s storage.Store) {
	_, err := s.Create(ctx(t), Unowned("ex-1"))
	require.NoError(t, err)
	own, _, err := s.Acquire(ctx(t), "ex-1", Lease("pod-a"))
	require.NoError(t, err)
	type result struct {
		own storage.Ownership
		err error
	}
	got := make(chan result, 1)
	go func() {
		l := Lease("pod-b")
		l.Wait = true
		o, _, err := s.Acquire(ctx(t), "ex-1", l)
		got <- result{o, err}
	}()
	select {
	case r := <-got:
		t.Fatalf("a waiting Acquire returned while the holder lived: %v", r.err)
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, own.Release(ctx(t)))
	select {
	case r := <-got:
		require.NoError(t, r.err)
		release(t, r.own)
		require.Equal(t, storage.Claim{Owner: "pod-b", Epoch: 2}, r.own.Claim())
	case <-time.After(20 * time.Second):
		t.Fatal("a waiting Acquire did not take over after the holder released")
	}
}

func acquireWaitEndsWithItsContext(t *testing.T, s storage.Store) {
	_, err := s.Create(ctx(t), Unowned("ex-1"))
	require.NoError(t, err)
	own, _, err := s.Acquire(ctx(t), "ex-1", Lease("pod-a"))
	require.NoError(t, err)
	release(t, own)
	waitCtx, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
	defer cancel()
	l := Lease("pod-b")
	l.Wait = true
	start := time.Now()
	_, _, err = s.Acquire(waitCtx, "ex-1", l)
	require.ErrorIs(t, err, storage.ErrHeld)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 20*time.Second, "the wait ended with its context")
	requireNotLost(t, own, "a waiter that gave up leaves the holder alone")
}

func acquireUnknownIsNotFound(t *testing.T, s storage.Store) {
	_, _, err := s.Acquire(ctx(t), "nope", Lease("pod-a"))
	require.ErrorIs(t, err, storage.ErrNotFound)
	// The failed attempt holds nothing: once the record exists it is free.
	_, err = s.Create(ctx(t), Unowned("nope"))
	require.NoError(t, err)
	own, _, err := s.Acquire(ctx(t), "nope", Lease("pod-b"))
	require.NoError(t, err)
	release(t, own)
}

func acquireRefusesAnInvalidLease(t *testing.T, s storage.Store) {
	created, err := s.Create(ctx(t), Unowned("ex-1"))
	require.NoError(t, err)
	for name, l := range map[string]storage.Lease{
		"no holder": {TTL: time.Minute},
		"short TTL": {Holder: "pod-a", TTL: time.Millisecond},
		"long TTL":  {Holder: "pod-a", TTL: storage.MaxLeaseTTL + time.Second},
		"no status": {Holder: "pod-a", Move: &storage.Move{Revision: created.Revision}},
		"bad UTF-8": {Holder: "pod-\xff", TTL: time.Minute},
	} {
		_, _, err := s.Acquire(ctx(t), "ex-1", l)
		require.ErrorIs(t, err, storage.ErrInvalidLease, name)
	}
	got, err := s.Get(ctx(t), "ex-1")
	require.NoError(t, err)
	require.Equal(t, created.Revision, got.Revision)
}

func acquireWithADoneContextWritesNothing(t *testing.T, s storage.Store) {
	created, err := s.Create(ctx(t), Unowned("ex-1"))
	require.NoError(t, err)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = s.Acquire(done, "ex-1", Lease("pod-a"))
	require.ErrorIs(t, err, context.Canceled)
	got, err := s.Get(ctx(t), "ex-1")
	require.NoError(t, err)
	require.Equal(t, created.Revision, got.Revision)
	own, _, err := s.Acquire(ctx(t), "ex-1", Lease("pod-b"))
	require.NoError(t, err, "the refused call holds nothing")
	release(t, own)
}

func casCannotChangeTheClaim(t *testing.T, s storage.Store) {
	created, err := s.Create(ctx(t), Sample("ex-1"))
	require.NoError(t, err)
	for name, change := range map[string]func(*storage.Record){
		"owner":           func(r *storage.Record) { r.Owner = "pod-b" },
		"epoch":           func(r *storage.Record) { r.Epoch++ },
		"owner and epoch": func(r *storage.Record) { r.Owner, r.Epoch = "pod-b", r.Epoch+1 },
		"no owner":        func(r *storage.Record) { r.Owner, r.Epoch = "", 0 },
	} {
		next := created
		change(&next)
		_, err := s.CompareAndSwap(ctx(t), "ex-1", created.Revision, next)
		require.ErrorIs(t, err, storage.ErrInvalidRecord, name)
	}
	got, err := s.Get(ctx(t), "ex-1")
	require.NoError(t, err)
	require.Equal(t, created.Revision, got.Revision)
	requireSameRecord(t, Sample("ex-1"), got)
	next := got
	next.Status = "paused" // a write that keeps the claim goes through
	_, err = s.CompareAndSwap(ctx(t), "ex-1", got.Revision, next)
	require.NoError(t, err)
}

// Many controllers start for one record at the same moment: exactly one
// owns it, every other one is told it is held, and the record was taken
// over exactly once.
func concurrentAcquirersHaveOneWinner(t *testing.T, s storage.Store) {
	const acquirers = 8
	for round := range 3 {
		id := fmt.Sprintf("ex-%d", round)
		created, err := s.Create(ctx(t), Unowned(id))
		require.NoError(t, err)
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []storage.Ownership
			others  []error
			held    int
		)
		start := make(chan struct{})
		for a := range acquirers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				own, _, err := s.Acquire(ctx(t), id, Lease(fmt.Sprintf("pod-%d", a)))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					winners = append(winners, own)
				case errors.Is(err, storage.ErrHeld):
					held++
				default:
					others = append(others, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		for _, w := range winners {
			release(t, w)
		}
		require.Empty(t, others)
		require.Len(t, winners, 1)
		require.Equal(t, acquirers-1, held)
		got, err := s.Get(ctx(t), id)
		require.NoError(t, err)
		require.Equal(t, winners[0].Claim(), storage.Claim{Owner: got.Owner, Epoch: got.Epoch})
		require.Equal(t, created.Epoch+1, got.Epoch, "taken over exactly once")
	}
}

// A record whose creator asked for a long audit trail keeps it through a
// take-over, whatever the store's own habits.
func acquireKeepsTheTrailLength(t *testing.T, s storage.Store) {
	rec := Unowned("ex-1")
	rec.HistoryLimit, rec.History = 64, storage.Trail{}
	rec, err := s.Create(ctx(t), rec)
	require.NoError(t, err)
	for k := range 40 { // writes that record themselves, as a Persisted's do
		next := rec.Clone()
		next.History, err = next.History.Append(storage.Entry{From: rec.Status, To: rec.Status, Reason: fmt.Sprint("write ", k), Revision: rec.Revision}, 64)
		require.NoError(t, err)
		rec, err = s.CompareAndSwap(ctx(t), "ex-1", rec.Revision, next)
		require.NoError(t, err)
	}
	own, taken, err := s.Acquire(ctx(t), "ex-1", Lease("pod-a"))
	require.NoError(t, err)
	release(t, own)
	require.Equal(t, 41, taken.History.Len())
	require.Equal(t, "write 0", taken.History.Entries()[0].Reason, "nothing was dropped")
	got, err := s.Get(ctx(t), "ex-1")
	require.NoError(t, err)
	require.Equal(t, 41, got.History.Len())
	require.Equal(t, 64, got.HistoryLimit)
}

// A take-over with a move is one write: the claim, the move and one
// audit entry land together.
func acquireWithAMoveWritesOnce(t *testing.T, s storage.Store) {
	created, err := s.Create(ctx(t), Unowned("ex-1"))
	require.NoError(t, err)
	l := Lease("pod-a")
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	l.Reason = "relocated controller took over; back to running"
	l.Move = &storage.Move{Revision: created.Revision, Status: "stopping", Meta: map[string]string{"execfsm.startup": "stop@1"},
		Actor: "controller", At: at}
	own, rec, err := s.Acquire(ctx(t), "ex-1", l)
	require.NoError(t, err)
	release(t, own)
	require.Equal(t, storage.Claim{Owner: "pod-a", Epoch: 1}, own.Claim())
	require.Equal(t, "stopping", rec.Status)
	require.Equal(t, created.Status, rec.Previous)
	require.True(t, rec.Since.Equal(at))
	require.Equal(t, l.Reason, rec.Reason)
	require.Equal(t, map[string]string{"execfsm.startup": "stop@1"}, rec.Meta, "the move's metadata is the record's")
	require.Equal(t, created.History.Len()+1, rec.History.Len(), "one audit entry for the take-over and the move")
	last, _ := rec.History.Last()
	require.Equal(t, storage.Entry{From: created.Status, To: "stopping", Reason: l.Reason, Actor: "controller",
		Owner: "pod-a", Epoch: 1, At: at, Revision: created.Revision}, last)
	got, err := s.Get(ctx(t), "ex-1")
	require.NoError(t, err)
	require.Equal(t, rec.Revision, got.Revision)
	requireSameRecord(t, rec, got)

	// A move that keeps the status keeps the time it was entered.
	require.NoError(t, own.Release(ctx(t)))
	l2 := Lease("pod-b")
	l2.Move = &storage.Move{Revision: got.Revision, Status: got.Status, Meta: got.Meta}
	own2, rec2, err := s.Acquire(ctx(t), "ex-1", l2)
	require.NoError(t, err)
	release(t, own2)
	require.Equal(t, "stopping", rec2.Status)
	require.True(t, rec2.Since.Equal(at))
	require.Equal(t, created.Status, rec2.Previous)
}

// A move decided on a revision the record has left is refused with the
// record as it is now, and nothing is written or held.
func acquireWithAStaleMoveWritesNothing(t *testing.T, s storage.Store) {
	created, err := s.Create(ctx(t), Unowned("ex-1"))
	require.NoError(t, err)
	moved := created
	moved.Status = "failed"
	moved, err = s.CompareAndSwap(ctx(t), "ex-1", created.Revision, moved) // the cluster master ends it
	require.NoError(t, err)
	l := Lease("pod-a")
	l.Move = &storage.Move{Revision: created.Revision, Status: "running"}
	_, _, err = s.Acquire(ctx(t), "ex-1", l)
	var conflict *storage.ConflictError
	require.ErrorAs(t, err, &conflict)
	require.Equal(t, moved.Revision, conflict.Current.Revision)
	require.Equal(t, "failed", conflict.Current.Status)
	got, err := s.Get(ctx(t), "ex-1")
	require.NoError(t, err)
	require.Equal(t, moved.Revision, got.Revision, "nothing written")
	require.Empty(t, got.Owner)
	_, held, err := s.Held(ctx(t), "ex-1")
	require.NoError(t, err)
	require.False(t, held, "nothing held")
	own, _, err := s.Acquire(ctx(t), "ex-1", Lease("pod-b"))
	require.NoError(t, err, "and the record is free")
	release(t, own)
}

// The ownership's CompareAndSwap writes while it lasts, and from Release
// on writes nothing.
func holdersWritesLandOnlyWhileItOwns(t *testing.T, s storage.Store) {
	_, err := s.Create(ctx(t), Unowned("ex-1"))
	require.NoError(t, err)
	own, rec, err := s.Acquire(ctx(t), "ex-1", Lease("pod-a"))
	require.NoError(t, err)
	next := rec.Clone()
	next.Status = "paused"
	written, err := own.CompareAndSwap(ctx(t), rec.Revision, next)
	require.NoError(t, err)
	require.Greater(t, written.Revision, rec.Revision)

	other := written.Clone()
	other.Owner, other.Epoch = "pod-b", 9
	_, err = own.CompareAndSwap(ctx(t), written.Revision, other)
	require.ErrorIs(t, err, storage.ErrInvalidRecord, "a write under another claim")
	stale := written.Clone()
	stale.Status = "running"
	_, err = own.CompareAndSwap(ctx(t), rec.Revision, stale)
	var conflict *storage.ConflictError
	require.ErrorAs(t, err, &conflict, "a stale revision is a conflict, as for the store")

	require.NoError(t, own.Release(ctx(t)))
	_, err = own.CompareAndSwap(ctx(t), written.Revision, stale)
	var fenced *storage.FencedError
	require.ErrorAs(t, err, &fenced, "after Release")
	require.True(t, fenced.Lost)
	require.Equal(t, own.Claim(), storage.Claim{Owner: fenced.Owner, Epoch: fenced.Epoch})
	got, err := s.Get(ctx(t), "ex-1")
	require.NoError(t, err)
	require.Equal(t, written.Revision, got.Revision, "nothing landed after Release")
	require.Equal(t, "paused", got.Status)
}

// Writes racing Release either land before Lost closes or fail fenced:
// none lands after.
func writeInFlightLandsBeforeRelease(t *testing.T, s storage.Store) {
	const maxWrites = 2000 // per writer: a store that never fences them ends the test, not the machine
	for round := range 5 {
		id := fmt.Sprintf("ex-%d", round)
		_, err := s.Create(ctx(t), Unowned(id))
		require.NoError(t, err)
		own, rec, err := s.Acquire(ctx(t), id, Lease("pod-a"))
		require.NoError(t, err)
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			landed  []uint64
			others  []error
			writeMu sync.Mutex // one write at a time: each from the last one written
		)
		last := rec
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range maxWrites {
					writeMu.Lock()
					next := last.Clone()
					next.Reason = fmt.Sprint("write at ", last.Revision)
					w, err := own.CompareAndSwap(ctx(t), last.Revision, next)
					if err == nil {
						last = w
					}
					writeMu.Unlock()
					mu.Lock()
					switch {
					case err == nil:
						landed = append(landed, w.Revision)
					case !errors.Is(err, storage.ErrFenced):
						others = append(others, err)
					}
					mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(round) * 5 * time.Millisecond)
		require.NoError(t, own.Release(ctx(t)))
		requireLost(t, own, "after Release")
		atLost, err := s.Get(ctx(t), id)
		require.NoError(t, err)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("writes went on after Release")
		}
		got, err := s.Get(ctx(t), id)
		require.NoError(t, err)
		require.Equal(t, atLost.Revision, got.Revision, "a write landed after Lost closed")
		require.Empty(t, others, "writes racing Release land or are fenced")
		for _, r := range landed {
			require.LessOrEqual(t, r, atLost.Revision)
		}
	}
}

func heldNamesTheLiveHolderOnly(t *testing.T, s storage.Store) {
	_, err := s.Create(ctx(t), Sample("ex-1")) // a claim on the record, no live holder
	require.NoError(t, err)
	_, held, err := s.Held(ctx(t), "ex-1")
	require.NoError(t, err)
	require.False(t, held, "a claim in the record is not a live holder")
	_, held, err = s.Held(ctx(t), "nope")
	require.NoError(t, err)
	require.False(t, held, "nobody holds an unknown record")
	own, _, err := s.Acquire(ctx(t), "ex-1", Lease("pod-b"))
	require.NoError(t, err)
	claim, held, err := s.Held(ctx(t), "ex-1")
	require.NoError(t, err)
	require.True(t, held)
	require.Equal(t, own.Claim(), claim)
	require.NoError(t, own.Release(ctx(t)))
	_, held, err = s.Held(ctx(t), "ex-1")
	require.NoError(t, err)
	require.False(t, held, "after Release")
}

// manager takes the manager's own record over: what its executions are
// taken under ([storage.Lease].Under).
func manager(t *testing.T, s storage.Store, holder string) storage.Ownership {
	t.Helper()
	_, err := s.Create(ctx(t), Unowned("manager-"+holder))
	require.NoError(t, err)
	own, _, err := s.Acquire(ctx(t), "manager-"+holder, Lease(holder))
	require.NoError(t, err)
	release(t, own)
	return own
}

// under returns a lease for holder under own.
func under(holder string, own storage.Ownership) storage.Lease {
	return storage.Lease{Holder: holder, Under: own, Reason: "manager " + holder + " took it over"}
}

// One lease for all of a manager's executions: each is held while the
// manager's ownership lasts, written only then, and free for the next
// manager at once when it ends.
func underHoldsWhileItsOwnershipLasts(t *testing.T, s storage.Store) {
	mgr := manager(t, s, "mgr-a")
	var jobs []storage.Ownership
	for _, id := range []string{"job-1", "job-2", "job-3"} {
		_, err := s.Create(ctx(t), Unowned(id))
		require.NoError(t, err)
		own, rec, err := s.Acquire(ctx(t), id, under("mgr-a", mgr))
		require.NoError(t, err)
		release(t, own)
		require.Equal(t, storage.Claim{Owner: "mgr-a", Epoch: 1}, own.Claim())
		require.Equal(t, own.Claim(), rec.Claim())
		claim, held, err := s.Held(ctx(t), id)
		require.NoError(t, err)
		require.True(t, held, id)
		require.Equal(t, own.Claim(), claim, id)
		_, _, err = s.Acquire(ctx(t), id, Lease("mgr-b"))
		require.ErrorIs(t, err, storage.ErrHeld, "%s is held under the manager's ownership", id)
		next := rec
		next.Reason = "synced"
		_, err = own.CompareAndSwap(ctx(t), rec.Revision, next)
		require.NoError(t, err, "%s is written while the manager's ownership lasts", id)
		jobs = append(jobs, own)
	}

	require.NoError(t, mgr.Release(ctx(t)))
	for k, own := range jobs {
		requireLost(t, own, "its manager's ownership ended")
		id := fmt.Sprintf("job-%d", k+1)
		rec, err := s.Get(ctx(t), id)
		require.NoError(t, err)
		_, err = own.CompareAndSwap(ctx(t), rec.Revision, rec)
		require.ErrorIs(t, err, storage.ErrFenced, "%s: no write after the manager's ownership ended", id)
		_, held, err := s.Held(ctx(t), id)
		require.NoError(t, err)
		require.False(t, held, id)
		next, _, err := s.Acquire(ctx(t), id, Lease("mgr-b"))
		require.NoError(t, err, "%s is free for the next manager at once", id)
		release(t, next)
		require.Equal(t, storage.Claim{Owner: "mgr-b", Epoch: 2}, next.Claim())
	}
}

// Releasing one record taken under a manager's ownership lets that one
// go, and nothing else.
func underLetsOneRecordGo(t *testing.T, s storage.Store) {
	mgr := manager(t, s, "mgr-a")
	for _, id := range []string{"job-1", "job-2"} {
		_, err := s.Create(ctx(t), Unowned(id))
		require.NoError(t, err)
	}
	one, _, err := s.Acquire(ctx(t), "job-1", under("mgr-a", mgr))
	require.NoError(t, err)
	other, _, err := s.Acquire(ctx(t), "job-2", under("mgr-a", mgr))
	require.NoError(t, err)
	release(t, other)
	require.NoError(t, one.Release(ctx(t)))
	requireLost(t, one, "released")
	require.NoError(t, one.Release(ctx(t)), "Release is idempotent")
	requireNotLost(t, other, "its sibling's release")
	requireNotLost(t, mgr, "one of its records' release")
	_, held, err := s.Held(ctx(t), "job-1")
	require.NoError(t, err)
	require.False(t, held)
	_, held, err = s.Held(ctx(t), "job-2")
	require.NoError(t, err)
	require.True(t, held)
	again, _, err := s.Acquire(ctx(t), "job-1", under("mgr-a", mgr))
	require.NoError(t, err, "taken again under the same ownership")
	release(t, again)
	require.Equal(t, uint64(2), again.Claim().Epoch)
}

// An ownership that is not this store's, another holder's, one taken
// under another, or one that has ended holds nothing; the record is left
// as it was.
func underRefusesWhatItCannotHoldUnder(t *testing.T, s storage.Store) {
	mgr := manager(t, s, "mgr-a")
	_, err := s.Create(ctx(t), Unowned("job-1"))
	require.NoError(t, err)
	_, err = s.Create(ctx(t), Unowned("job-2"))
	require.NoError(t, err)
	before, err := s.Get(ctx(t), "job-1")
	require.NoError(t, err)

	elsewhere := storage.NewMemory()
	_, err = elsewhere.Create(ctx(t), Unowned("manager-mgr-a"))
	require.NoError(t, err)
	foreign, _, err := elsewhere.Acquire(ctx(t), "manager-mgr-a", Lease("mgr-a"))
	require.NoError(t, err)
	release(t, foreign)
	child, _, err := s.Acquire(ctx(t), "job-2", under("mgr-a", mgr))
	require.NoError(t, err)
	release(t, child)

	for name, lease := range map[string]storage.Lease{
		"another store's":     under("mgr-a", foreign),
		"another holder's":    under("mgr-b", mgr),
		"with a TTL":          {Holder: "mgr-a", Under: mgr, TTL: time.Minute},
		"taken under another": under("mgr-a", child),
	} {
		_, _, err := s.Acquire(ctx(t), "job-1", lease)
		require.ErrorIs(t, err, storage.ErrInvalidLease, name)
	}
	ended := manager(t, s, "mgr-c")
	require.NoError(t, ended.Release(ctx(t)))
	_, _, err = s.Acquire(ctx(t), "job-1", under("mgr-c", ended))
	require.ErrorIs(t, err, storage.ErrFenced, "under an ownership that has ended")
	after, err := s.Get(ctx(t), "job-1")
	require.NoError(t, err)
	require.Equal(t, before.Revision, after.Revision, "nothing written")
	_, held, err := s.Held(ctx(t), "job-1")
	require.NoError(t, err)
	require.False(t, held)
}
