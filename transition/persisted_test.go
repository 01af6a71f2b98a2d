package transition_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/internal/testwait"
	"github.com/execfsm/execfsm/storage"

	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// A job table with a remembering state: "moving" returns only to where
// it came from, as relocating does in the execution lifecycle.
type Job string

const (
	Queued Job = "queued"
	Work   Job = "working"
	Hold   Job = "held"
	Moving Job = "moving"
	Halt   Job = "halting"
	Done   Job = "done"
	Broken Job = "broken"
)

func jobBuilder() *transition.Builder[Job] {
	return transition.New(Queued).
		Allow(Queued, Work, Halt).
		Allow(Work, Hold, Moving, Halt, Done, Broken).
		Allow(Hold, Work, Moving, Halt, Broken).
		Return(Moving, Work, Hold).
		Allow(Moving, Broken, Halt).
		Allow(Halt, Done, Broken).
		Terminal(Done, Broken)
}

func jobTable(t testing.TB) *transition.Table[Job] {
	table, err := jobBuilder().Build()
	require.NoError(t, err)
	return table
}

func fixedClock() func() time.Time {
	var mu sync.Mutex
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second)
		return now
	}
}

// newJob returns a handle on ex-1 of store; a nil Clock in opts is a
// fixed clock that ticks a second per reading.
func newJob(t testing.TB, store storage.Store, opts transition.PersistedOptions, observers ...transition.Observers[Job]) *transition.Persisted[Job] {
	if opts.Clock == nil {
		opts.Clock = fixedClock()
	}
	p, err := transition.NewPersisted(jobTable(t), store, "ex-1", opts, observers...)
	require.NoError(t, err)
	return p
}

func created(t testing.TB, opts transition.PersistedOptions, observers ...transition.Observers[Job]) (*transition.Persisted[Job], *storage.Memory) {
	store := storage.NewMemory()
	p := newJob(t, store, opts, observers...)
	_, err := p.Create(bg, transition.Update[Job]{To: Queued, Reason: "submitted", Meta: map[string]string{"owner": "alice"}})
	require.NoError(t, err)
	return p, store
}

func TestPersistedCreatesFiresAndLoads(t *testing.T) {
	p, store := created(t, transition.PersistedOptions{Actor: "master"})
	rec, err := store.Get(bg, "ex-1")
	require.NoError(t, err)
	require.Equal(t, "queued", rec.Status)
	require.Equal(t, "submitted", rec.Reason)
	require.Equal(t, map[string]string{"owner": "alice"}, rec.Meta)
	require.Equal(t, 1, rec.History.Len())
	require.Equal(t, storage.Entry{To: "queued", Reason: "submitted", Actor: "master", At: rec.UpdatedAt}, rec.History.Entries()[0])

	c, err := p.Fire(bg, Work, "controller ready")
	require.NoError(t, err)
	require.True(t, c.Changed())
	require.Equal(t, Queued, c.From)
	require.Equal(t, "master", c.Actor)
	require.Greater(t, c.Revision, rec.Revision)

	cur, loaded, err := p.Load(bg)
	require.NoError(t, err)
	require.Equal(t, Work, cur)
	require.Equal(t, c.Revision, loaded.Revision)
	require.Equal(t, "queued", loaded.Previous)
	require.Equal(t, "controller ready", loaded.Reason)
	require.True(t, c.At.Equal(loaded.UpdatedAt))
	require.True(t, c.At.Equal(loaded.Since), "Since moves with the status")
	last, _ := loaded.History.Last()
	require.Equal(t, storage.Entry{From: "queued", To: "working", Reason: "controller ready", Actor: "master", At: c.At, Revision: rec.Revision}, last)

	_, err = p.Create(bg, transition.To(Queued))
	require.ErrorIs(t, err, storage.ErrExists)
}

func TestPersistedWritingTheCurrentStateWritesNothing(t *testing.T) {
	p, store := created(t, transition.PersistedOptions{})
	before, err := store.Get(bg, "ex-1")
	require.NoError(t, err)
	c, err := p.Fire(bg, Queued, "again")
	require.NoError(t, err)
	require.False(t, c.Changed())
	require.Equal(t, before.Revision, c.Revision)
	after, err := store.Get(bg, "ex-1")
	require.NoError(t, err)
	require.Equal(t, before.Revision, after.Revision)
}

func TestPersistedRefusedMovesWriteNothing(t *testing.T) {
	errNope := errors.New("nope")
	table, err := jobBuilder().Guard(Work, Done, func(context.Context, transition.Change[Job], transition.View) error { return errNope }).Build()
	require.NoError(t, err)
	store := storage.NewMemory()
	p, err := transition.NewPersisted(table, store, "ex-1", transition.PersistedOptions{})
	require.NoError(t, err)
	_, err = p.Create(bg, transition.To(Queued))
	require.NoError(t, err)

	_, err = p.Fire(bg, Done, "skip the work")
	require.ErrorIs(t, err, transition.ErrNotAllowed)
	_, err = p.Fire(bg, "exploded", "")
	require.ErrorIs(t, err, transition.ErrNotAllowed)
	_, err = p.Fire(bg, Work, "")
	require.NoError(t, err)
	rev := mustGet(t, store).Revision
	_, err = p.Fire(bg, Done, "finished")
	require.ErrorIs(t, err, transition.ErrGuard)
	require.ErrorIs(t, err, errNope)
	require.Equal(t, rev, mustGet(t, store).Revision)
}

func mustGet(t require.TestingT, s storage.Store) storage.Record {
	rec, err := s.Get(bg, "ex-1")
	require.NoError(t, err)
	return rec
}

func TestPersistedReturnEdgeLeadsBackToTheRecordedPreviousState(t *testing.T) {
	p, store := created(t, transition.PersistedOptions{})
	for _, to := range []Job{Work, Hold, Moving} {
		_, err := p.Fire(bg, to, "")
		require.NoError(t, err)
	}
	require.Equal(t, "held", mustGet(t, store).Previous)

	// A different process, reading only the store, still knows where to go.
	other := newJob(t, store, transition.PersistedOptions{})
	_, err := other.Fire(bg, Work, "resume")
	require.ErrorIs(t, err, transition.ErrNotAllowed)
	require.Contains(t, err.Error(), "moving returns only to held")
	_, err = other.Fire(bg, Hold, "resume")
	require.NoError(t, err)
}

func TestPersistedRecordCreatedInARememberingStateCannotReturn(t *testing.T) {
	store := storage.NewMemory()
	p := newJob(t, store, transition.PersistedOptions{})
	_, err := p.Create(bg, transition.To(Moving).Because("adopted mid-move"))
	require.NoError(t, err)
	_, err = p.Fire(bg, Work, "")
	require.ErrorIs(t, err, transition.ErrNotAllowed)
	require.Contains(t, err.Error(), "that is unknown")
	_, err = p.Fire(bg, Broken, "nobody knows where it came from")
	require.NoError(t, err)
}

func TestPersistedAuditTrailIsBounded(t *testing.T) {
	p, store := created(t, transition.PersistedOptions{History: 3})
	for _, to := range []Job{Work, Hold, Work, Hold, Work} {
		_, err := p.Fire(bg, to, "to "+string(to))
		require.NoError(t, err)
	}
	rec := mustGet(t, store)
	require.Equal(t, 3, rec.History.Len())
	trail := rec.History.Entries()
	require.Equal(t, []string{"working", "held", "working"}, []string{trail[0].To, trail[1].To, trail[2].To})
	for k := 1; k < 3; k++ {
		require.Equal(t, trail[k-1].To, trail[k].From)
		require.Greater(t, trail[k].Revision, trail[k-1].Revision)
	}
}

// The trail's length is the record's: a writer with another History
// option, the store's take-over and the deadline reaper all keep it.
func TestEveryWriterKeepsTheRecordsOwnTrailLength(t *testing.T) {
	creator, store := created(t, transition.PersistedOptions{History: 200})
	for k := range 40 {
		to := Work
		if k%2 == 1 {
			to = Hold
		}
		_, err := creator.Fire(bg, to, "progress")
		require.NoError(t, err)
	}
	rec := mustGet(t, store)
	require.Equal(t, 200, rec.HistoryLimit)
	require.Equal(t, 41, rec.History.Len())

	owned := newJob(t, store, transition.PersistedOptions{History: 3}) // its own option applies to records it creates
	_, _, err := owned.Acquire(bg, lease("pod-a"), nil)
	require.NoError(t, err)
	require.Equal(t, 42, mustGet(t, store).History.Len(), "the take-over kept the trail")
	_, err = owned.Fire(bg, Moving, "SIGTERM")
	require.NoError(t, err)
	require.Equal(t, 43, mustGet(t, store).History.Len(), "and so did a writer whose own option is 3")
}

func TestPersistedMetaIsMergedInTheSameWrite(t *testing.T) {
	p, store := created(t, transition.PersistedOptions{})
	_, rec, err := p.Apply(bg, func(cur Job, rec storage.Record) (transition.Update[Job], error) {
		require.Equal(t, "alice", rec.Meta["owner"])
		return transition.To(Work).Because("started").Set("restarts", "0").Remove("owner"), nil
	})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"restarts": "0"}, rec.Meta)
	require.Equal(t, rec, mustGet(t, store))

	// A metadata-only update writes, keeps the state and the reason.
	c, rec2, err := p.Apply(bg, func(cur Job, _ storage.Record) (transition.Update[Job], error) {
		return transition.To(cur).Set("restarts", "1"), nil
	})
	require.NoError(t, err)
	require.False(t, c.Changed())
	require.Greater(t, rec2.Revision, rec.Revision)
	require.Equal(t, "started", rec2.Reason)
	require.Equal(t, "1", rec2.Meta["restarts"])

	// Setting what is already there writes nothing.
	_, rec3, err := p.Apply(bg, func(cur Job, _ storage.Record) (transition.Update[Job], error) {
		return transition.To(cur).Set("restarts", "1").Remove("absent"), nil
	})
	require.NoError(t, err)
	require.Equal(t, rec2.Revision, rec3.Revision)
}

func TestPersistedDecideErrorWritesNothing(t *testing.T) {
	p, store := created(t, transition.PersistedOptions{})
	rev := mustGet(t, store).Revision
	errRefuse := errors.New("refuse")
	_, _, err := p.Apply(bg, func(Job, storage.Record) (transition.Update[Job], error) {
		return transition.Update[Job]{}, errRefuse
	})
	require.ErrorIs(t, err, errRefuse)
	require.Equal(t, rev, mustGet(t, store).Revision)
	_, _, err = p.Apply(bg, nil)
	require.Error(t, err)
}

// Hostile updates get a clear error and nothing is written.
func TestPersistedHostileUpdatesWriteNothing(t *testing.T) {
	p, store := created(t, transition.PersistedOptions{})
	before := mustGet(t, store)
	huge := strings.Repeat("r", 1<<20)
	for name, u := range map[string]transition.Update[Job]{
		"1 MB reason":        {To: Work, Reason: huge},
		"invalid UTF-8":      {To: Work, Reason: "\xff\xfe"},
		"huge meta":          {To: Work, Meta: map[string]string{"k": huge}},
		"invalid meta key":   {To: Work, Meta: map[string]string{"\xff": "v"}},
		"too many meta keys": {To: Work, Meta: manyMeta(storage.MaxMetaEntries + 1)},
	} {
		_, _, err := p.Apply(bg, func(Job, storage.Record) (transition.Update[Job], error) { return u, nil })
		require.ErrorIs(t, err, storage.ErrInvalidRecord, name)
		require.Equal(t, before, mustGet(t, store), name)
	}
	_, err := transition.NewPersisted(jobTable(t), store, strings.Repeat("i", storage.MaxIDLen+1), transition.PersistedOptions{})
	require.ErrorIs(t, err, storage.ErrInvalidRecord)
	_, err = transition.NewPersisted(jobTable(t), store, "", transition.PersistedOptions{})
	require.ErrorIs(t, err, storage.ErrInvalidRecord)
	_, err = transition.NewPersisted(jobTable(t), nil, "x", transition.PersistedOptions{})
	require.Error(t, err)
	for name, opts := range map[string]transition.PersistedOptions{
		"negative history":   {History: -1},
		"history too long":   {History: storage.MaxHistory + 1},
		"retries too many":   {Retries: transition.MaxRetries + 1},
		"retries below none": {Retries: transition.NoRetries - 1},
		"a huge actor":       {Actor: huge},
	} {
		_, err = transition.NewPersisted(jobTable(t), store, "x", opts)
		require.Error(t, err, name)
	}
	_, err = transition.NewPersisted(jobTable(t), store, "x", transition.PersistedOptions{}, transition.Observers[Job]{OnChange: []func(transition.Change[Job]){nil}})
	require.Error(t, err, "nil observer")
	for name, l := range map[string]storage.Lease{
		"no holder":      {TTL: time.Minute},
		"huge holder":    {Holder: huge, TTL: time.Minute},
		"invalid UTF-8":  {Holder: "pod-\xff", TTL: time.Minute},
		"TTL too long":   {Holder: "pod-a", TTL: storage.MaxLeaseTTL + 1},
		"a 1 MB reason":  {Holder: "pod-a", TTL: time.Minute, Reason: huge},
		"negative TTL":   {Holder: "pod-a", TTL: -time.Second},
		"sub-second TTL": {Holder: "pod-a", TTL: time.Millisecond},
	} {
		_, _, err = p.Acquire(bg, l, nil)
		require.ErrorIs(t, err, storage.ErrInvalidLease, name)
		require.Equal(t, before, mustGet(t, store), name)
	}
	_, _, err = p.Acquire(bg, storage.Lease{Holder: "pod-a", Move: &storage.Move{Status: "work"}}, nil)
	require.ErrorContains(t, err, "lease.Move", "a move is Acquire's to make")
	require.Equal(t, before, mustGet(t, store))
}

func manyMeta(n int) map[string]string {
	m := map[string]string{}
	for k := range n {
		m[fmt.Sprint("k", k)] = "v"
	}
	return m
}

func TestPersistedRefusesARecordWithAStatusItsTableDoesNotKnow(t *testing.T) {
	store := storage.NewMemory()
	_, err := store.Create(bg, storage.Record{ID: "ex-1", Status: "exploded"})
	require.NoError(t, err)
	p := newJob(t, store, transition.PersistedOptions{})
	_, _, err = p.Load(bg)
	require.ErrorIs(t, err, transition.ErrUnknownState)
	_, err = p.Fire(bg, Work, "")
	require.ErrorIs(t, err, transition.ErrUnknownState)
	require.Equal(t, "exploded", mustGet(t, store).Status)
}

func TestPersistedDoneContextWritesNothing(t *testing.T) {
	p, store := created(t, transition.PersistedOptions{})
	rev := mustGet(t, store).Revision
	done, cancel := context.WithCancel(bg)
	cancel()
	_, err := p.Fire(done, Work, "")
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, rev, mustGet(t, store).Revision)
}

// lease returns a valid lease for holder.
func lease(holder string) storage.Lease {
	return storage.Lease{Holder: holder, TTL: time.Minute}
}

// controllerOf returns a controller's handle on the job in store,
// taken over for pod.
func controllerOf(t *testing.T, store storage.Store, l storage.Lease) (*transition.Persisted[Job], storage.Record) {
	t.Helper()
	p := newJob(t, store, transition.PersistedOptions{Actor: l.Holder})
	_, rec, err := p.Acquire(bg, l, nil)
	require.NoError(t, err)
	return p, rec
}

func TestPersistedFencesTheOwnerThatWasTakenOver(t *testing.T) {
	master, store := created(t, transition.PersistedOptions{Actor: "master"})
	_, err := master.Fire(bg, Work, "scheduled")
	require.NoError(t, err)

	podA, recA := controllerOf(t, store, storage.Lease{Holder: "pod-a", TTL: time.Minute, Reason: "controller started"})
	require.Equal(t, storage.Claim{Owner: "pod-a", Epoch: 1}, podA.Claim())
	require.False(t, podA.Authority())
	require.Equal(t, "pod-a", recA.Owner)
	require.Nil(t, master.Ownership(), "the master stays an outside authority")
	require.True(t, master.Authority())
	_, err = podA.Fire(bg, Moving, "SIGTERM from the platform")
	require.NoError(t, err)

	// A second controller cannot take a live holder's execution.
	podB := newJob(t, store, transition.PersistedOptions{Actor: "pod-b"})
	_, _, err = podB.Acquire(bg, lease("pod-b"), nil)
	var held *storage.HeldError
	require.ErrorAs(t, err, &held)
	require.Equal(t, storage.HeldError{ID: "ex-1", Holder: "pod-a", Status: "moving"}, *held)

	// pod-a's ownership ends (its pod was deleted); pod-b takes over.
	require.NoError(t, podA.Ownership().Release(bg))
	moved := mustGet(t, store)
	_, recB, err := podB.Acquire(bg, storage.Lease{Holder: "pod-b", TTL: time.Minute, Reason: "relocated controller took over"}, nil)
	require.NoError(t, err)
	require.Equal(t, uint64(2), recB.Epoch)
	require.Equal(t, "moving", recB.Status, "taking over changes owner, not state")
	require.True(t, recB.Since.Equal(moved.Since), "nor the time the state was entered")
	last, _ := recB.History.Last()
	require.Equal(t, storage.Entry{From: "moving", To: "moving", Reason: "relocated controller took over", Actor: "pod-b",
		Owner: "pod-b", Epoch: 2, At: last.At, Revision: recA.Revision + 1}, last)

	// The old pod is still alive and tries to write: fenced, nothing changes.
	before := mustGet(t, store)
	_, err = podA.Fire(bg, Broken, "old pod still running")
	require.ErrorIs(t, err, storage.ErrFenced)
	var fenced *storage.FencedError
	require.ErrorAs(t, err, &fenced)
	require.Equal(t, storage.FencedError{ID: "ex-1", Owner: "pod-a", Epoch: 1, Lost: true}, *fenced)
	require.Equal(t, before, mustGet(t, store))

	c, err := podB.Fire(bg, Work, "resumed")
	require.NoError(t, err)
	require.Equal(t, "pod-b", c.Owner)

	// The cluster master holds no claim: an outside authority, never fenced.
	_, err = master.Fire(bg, Halt, "user stop")
	require.NoError(t, err)
	rec := mustGet(t, store)
	require.Equal(t, "pod-b", rec.Owner, "an unclaimed write keeps the owner")
	_, err = podB.Fire(bg, Done, "stopped cleanly")
	require.NoError(t, err)
}

// A take-over and a move decided on the record are one write; decided
// on a record that changed before the take-over landed, the move is
// decided again on the fresh one.
func TestPersistedAcquireMakesTheMoveInTheSameWrite(t *testing.T) {
	master, store := created(t, transition.PersistedOptions{Actor: "master"})
	_, err := master.Fire(bg, Work, "scheduled")
	require.NoError(t, err)
	var changes []transition.Change[Job]
	p := newJob(t, store, transition.PersistedOptions{Actor: "pod-a"}, transition.Observers[Job]{OnChange: []func(transition.Change[Job]){
		func(c transition.Change[Job]) { changes = append(changes, c) }}})
	asked := 0
	before := mustGet(t, store)
	c, rec, err := p.Acquire(bg, lease("pod-a"), func(cur Job, rec storage.Record) (transition.Update[Job], error) {
		asked++
		if asked == 1 {
			_, err := master.Fire(bg, Hold, "paused meanwhile") // lands before the take-over
			require.NoError(t, err)
		}
		return transition.Update[Job]{To: Moving, Reason: fmt.Sprintf("decided on %s", cur), Meta: map[string]string{"k": "v"}}, nil
	})
	require.NoError(t, err)
	require.Equal(t, 2, asked, "decided again on the fresh record")
	require.Equal(t, "moving", rec.Status)
	require.Equal(t, "held", rec.Previous)
	require.Equal(t, "decided on held", rec.Reason)
	require.Equal(t, "v", rec.Meta["k"])
	require.Equal(t, before.Revision+2, rec.Revision, "the master's write and one write for the take-over and the move")
	last, _ := rec.History.Last()
	require.Equal(t, storage.Entry{From: "held", To: "moving", Reason: "decided on held", Actor: "pod-a", Owner: "pod-a", Epoch: 1,
		At: last.At, Revision: before.Revision + 1}, last)
	require.Equal(t, transition.Change[Job]{ID: "ex-1", From: Hold, To: Moving, Reason: "decided on held", Actor: "pod-a",
		At: last.At, Revision: rec.Revision, Owner: "pod-a", Epoch: 1}, c)
	require.Equal(t, []transition.Change[Job]{c}, changes)

	// A move the table refuses, or an error from decide, writes nothing
	// and holds nothing.
	require.NoError(t, p.Ownership().Release(bg))
	before = mustGet(t, store)
	q := newJob(t, store, transition.PersistedOptions{Actor: "pod-b"})
	_, _, err = q.Acquire(bg, lease("pod-b"), func(Job, storage.Record) (transition.Update[Job], error) {
		return transition.To(Queued), nil
	})
	require.ErrorIs(t, err, transition.ErrNotAllowed)
	veto := errors.New("veto")
	_, _, err = q.Acquire(bg, lease("pod-b"), func(Job, storage.Record) (transition.Update[Job], error) {
		return transition.Update[Job]{}, veto
	})
	require.ErrorIs(t, err, veto)
	require.Equal(t, before, mustGet(t, store))
	_, held, err := store.Held(bg, "ex-1")
	require.NoError(t, err)
	require.False(t, held)
	_, err = q.Fire(bg, Hold, "")
	require.ErrorIs(t, err, storage.ErrFenced, "a handle that tried to take over is a controller's, owning nothing")
}

// unnoticing plays a store whose ownerships never notice that they ended
// (a lease whose loss has not reached its holder yet, whose writes the
// store does not check): the record's epoch still fences their writes.
type unnoticing struct{ *storage.Memory }

type stillHeld struct {
	storage.Ownership
	store *storage.Memory
	id    string
}

func (stillHeld) Lost() <-chan struct{} { return nil }

func (o stillHeld) CompareAndSwap(ctx context.Context, expect uint64, next storage.Record) (storage.Record, error) {
	return o.store.CompareAndSwap(ctx, o.id, expect, next)
}

func (s unnoticing) Acquire(ctx context.Context, id string, l storage.Lease) (storage.Ownership, storage.Record, error) {
	own, rec, err := s.Memory.Acquire(ctx, id, l)
	if err != nil {
		return nil, rec, err
	}
	return stillHeld{own, s.Memory, id}, rec, nil
}

func TestPersistedFencesByEpochAnOwnerThatHasNotNoticedItsLoss(t *testing.T) {
	store := unnoticing{storage.NewMemory()}
	master := newJob(t, store, transition.PersistedOptions{})
	_, err := master.Create(bg, transition.To(Queued))
	require.NoError(t, err)
	podA, _ := controllerOf(t, store, lease("pod-a"))
	require.NoError(t, podA.Ownership().Release(bg))
	controllerOf(t, store, lease("pod-b"))

	before := mustGet(t, store)
	_, err = podA.Fire(bg, Work, "old pod still running")
	var fenced *storage.FencedError
	require.ErrorAs(t, err, &fenced)
	require.Equal(t, storage.FencedError{ID: "ex-1", Owner: "pod-a", Epoch: 1, CurrentOwner: "pod-b", CurrentEpoch: 2}, *fenced)
	require.Equal(t, before, mustGet(t, store))
}

// The observers of a handle run one at a time, in write order, however
// many goroutines write through it.
func TestPersistedObserversRunOneAtATime(t *testing.T) {
	var (
		mu       sync.Mutex
		inside   int
		overlaps int
		revs     []uint64
	)
	observe := transition.Observers[Job]{OnChange: []func(transition.Change[Job]){func(c transition.Change[Job]) {
		mu.Lock()
		inside++
		if inside > 1 {
			overlaps++
		}
		revs = append(revs, c.Revision)
		mu.Unlock()
		time.Sleep(10 * time.Microsecond) // widen any overlap
		mu.Lock()
		inside--
		mu.Unlock()
	}}}
	master, store := created(t, transition.PersistedOptions{})
	owner := newJob(t, store, transition.PersistedOptions{}, observe)
	_, _, err := owner.Acquire(bg, lease("pod-a"), nil)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 200 {
				_, _, err := owner.Apply(bg, func(cur Job, _ storage.Record) (transition.Update[Job], error) {
					return transition.To(cur).Set("n", fmt.Sprint(k)), nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	_ = master
	mu.Lock()
	defer mu.Unlock()
	require.Zero(t, overlaps, "observer calls overlapped")
	// The store numbers every write of its one record: the observers saw
	// each, from the take-over to the last, once and in order.
	last := mustGet(t, store).Revision
	require.Equal(t, last-revs[0]+1, uint64(len(revs)))
	require.True(t, slices.IsSorted(revs), "observers saw the writes out of order")
}

// interfering plays another writer: before each of the first n
// CompareAndSwap calls it lets write change the record underneath.
type interfering struct {
	storage.Store
	mu    sync.Mutex
	n     int
	write func()
}

func (s *interfering) CompareAndSwap(ctx context.Context, id string, expect uint64, next storage.Record) (storage.Record, error) {
	s.mu.Lock()
	interfere := s.n > 0
	s.n--
	s.mu.Unlock()
	if interfere {
		s.write()
	}
	return s.Store.CompareAndSwap(ctx, id, expect, next)
}

func TestPersistedApplyDecidesAgainOnTheFreshRecord(t *testing.T) {
	base, mem := created(t, transition.PersistedOptions{})
	_, err := base.Fire(bg, Work, "")
	require.NoError(t, err)
	master := newJob(t, mem, transition.PersistedOptions{Actor: "master"})
	store := &interfering{Store: mem, n: 1, write: func() {
		_, err := master.Fire(bg, Halt, "cluster master: stop")
		require.NoError(t, err)
	}}
	controller := newJob(t, store, transition.PersistedOptions{Actor: "controller"})

	var saw []Job
	c, rec, err := controller.Apply(bg, func(cur Job, _ storage.Record) (transition.Update[Job], error) {
		saw = append(saw, cur)
		if cur == Halt {
			return transition.To(Done).Because("SIGTERM while halting: shut down"), nil
		}
		return transition.To(Moving).Because("SIGTERM: relocate"), nil
	})
	require.NoError(t, err)
	require.Equal(t, []Job{Work, Halt}, saw, "the lost race is decided again on the fresh record")
	require.Equal(t, Done, c.To)
	require.Equal(t, "done", rec.Status)
}

func TestPersistedGivesUpAfterItsRetries(t *testing.T) {
	base, mem := created(t, transition.PersistedOptions{})
	n := 0
	store := &interfering{Store: mem, n: 100, write: func() {
		n++
		_, _, err := base.Apply(bg, func(cur Job, _ storage.Record) (transition.Update[Job], error) {
			return transition.To(cur).Set("n", fmt.Sprint(n)), nil
		})
		require.NoError(t, err)
	}}
	p := newJob(t, store, transition.PersistedOptions{Retries: 2})
	_, err := p.Fire(bg, Work, "")
	require.ErrorIs(t, err, storage.ErrConflict)
	require.Contains(t, err.Error(), "gave up after 3 conflicting writes")
	require.Equal(t, "queued", mustGet(t, mem).Status)
}

func TestPersistedObserversSeeWritesInOrderAndMayWriteAgain(t *testing.T) {
	var got []string
	var p *transition.Persisted[Job]
	p, _ = created(t, transition.PersistedOptions{}, transition.Observers[Job]{OnChange: []func(transition.Change[Job]){func(c transition.Change[Job]) {
		got = append(got, fmt.Sprintf("%s>%s", c.From, c.To))
		if c.To == Work {
			_, err := p.Fire(bg, Hold, "observer pauses at once")
			require.NoError(t, err)
		}
	}}})
	_, err := p.Fire(bg, Work, "")
	require.NoError(t, err)
	require.Equal(t, []string{">queued", "queued>working", "working>held"}, got, "the creation, then the moves")
}

// TestPersistedConcurrentWritersStateMachine is a rapid state-machine
// test: a model of the table follows single writes exactly, and after a
// burst of concurrent writers through several handles the audit trail
// must be a legal path from the model's state with one entry per winning
// write, each at its own revision.
func TestPersistedConcurrentWritersStateMachine(t *testing.T) {
	table := jobTable(t)
	states := table.States()
	rapid.Check(t, func(rt *rapid.T) {
		store := storage.NewMemory()
		handles := make([]*transition.Persisted[Job], 3)
		for k := range handles {
			p, err := transition.NewPersisted(table, store, "ex-1", transition.PersistedOptions{History: storage.MaxHistory, Retries: 1000})
			require.NoError(rt, err)
			handles[k] = p
		}
		_, err := handles[0].Create(bg, transition.To(Queued))
		require.NoError(rt, err)
		cur, prev, hasPrev := Queued, Job(""), false
		legal := func(to Job) bool {
			return to == cur || table.Allowed(cur, to) && (!table.IsReturn(cur, to) || hasPrev && prev == to)
		}
		entries := 1
		rt.Repeat(map[string]func(*rapid.T){
			"fire": func(rt *rapid.T) {
				to := rapid.SampledFrom(states).Draw(rt, "to")
				h := rapid.IntRange(0, len(handles)-1).Draw(rt, "handle")
				c, err := handles[h].Fire(bg, to, "single")
				if !legal(to) {
					require.ErrorIs(rt, err, transition.ErrNotAllowed)
					return
				}
				require.NoError(rt, err)
				if c.Changed() {
					prev, hasPrev, cur = cur, true, to
					entries++
				}
			},
			"burst": func(rt *rapid.T) {
				plans := make([][]Job, rapid.IntRange(2, 6).Draw(rt, "writers"))
				for w := range plans {
					plans[w] = rapid.SliceOfN(rapid.SampledFrom(states), 1, 4).Draw(rt, fmt.Sprint("plan", w))
				}
				var wg sync.WaitGroup
				var mu sync.Mutex
				var revisions []uint64
				for w, plan := range plans {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for _, to := range plan {
							c, err := handles[w%len(handles)].Fire(bg, to, fmt.Sprint("writer ", w))
							if err != nil {
								if !errors.Is(err, transition.ErrNotAllowed) {
									rt.Errorf("writer %d → %s: %v", w, to, err)
								}
								continue
							}
							if c.Changed() {
								mu.Lock()
								revisions = append(revisions, c.Revision)
								mu.Unlock()
							}
						}
					}()
				}
				wg.Wait()
				rec := mustGet(rt, store)
				fresh := rec.History.Entries()[entries:]
				require.Len(rt, fresh, len(revisions), "one audit entry per winning write")
				seen := map[uint64]bool{}
				for _, r := range revisions {
					require.False(rt, seen[r], "two writes reported revision %d", r)
					seen[r] = true
				}
				for _, e := range fresh {
					from, err := table.Parse(e.From)
					require.NoError(rt, err)
					to, err := table.Parse(e.To)
					require.NoError(rt, err)
					require.Equal(rt, cur, from, "the trail is a connected path")
					require.True(rt, legal(to), "%s → %s is legal", from, to)
					prev, hasPrev, cur = cur, true, to
				}
				entries += len(fresh)
			},
			"": func(rt *rapid.T) {
				rec := mustGet(rt, store)
				require.Equal(rt, string(cur), rec.Status)
				require.Equal(rt, entries, rec.History.Len())
				if hasPrev {
					require.Equal(rt, string(prev), rec.Previous)
				}
			},
		})
	})
}

func ExamplePersisted() {
	table, _ := transition.New("queued").
		Allow("queued", "working").
		Allow("working", "done").
		Terminal("done").
		Build()
	store := storage.NewMemory()
	master, _ := transition.NewPersisted(table, store, "ex-1", transition.PersistedOptions{Actor: "master"})
	ctx := context.Background()
	_, _ = master.Create(ctx, transition.To("queued").Because("submitted"))

	// A controller takes the execution over through a handle of its own.
	// While it lives nobody else can; when it is gone (here: it released
	// its ownership) the next one takes over at a new epoch.
	first, _ := transition.NewPersisted(table, store, "ex-1", transition.PersistedOptions{Actor: "pod-a"})
	_, _, _ = first.Acquire(ctx, storage.Lease{Holder: "pod-a", Reason: "controller started"}, nil)
	second, _ := transition.NewPersisted(table, store, "ex-1", transition.PersistedOptions{Actor: "pod-b"})
	_, _, err := second.Acquire(ctx, storage.Lease{Holder: "pod-b"}, nil)
	fmt.Println(errors.Is(err, storage.ErrHeld))
	_ = first.Ownership().Release(ctx)
	_, _, _ = second.Acquire(ctx, storage.Lease{Holder: "pod-b", Reason: "controller relocated"}, nil)

	_, err = first.Fire(ctx, "working", "old pod still alive")
	fmt.Println(errors.Is(err, storage.ErrFenced))
	c, _ := second.Fire(ctx, "working", "resumed")
	fmt.Println(c.From, "→", c.To, "by", c.Owner)

	_, rec, _ := master.Load(ctx)
	for _, e := range rec.History.All() {
		fmt.Printf("%q → %q  %s (%s@%d)\n", e.From, e.To, e.Reason, e.Owner, e.Epoch)
	}
	// Output:
	// true
	// true
	// queued → working by pod-b
	// "" → "queued"  submitted (@0)
	// "queued" → "queued"  controller started (pod-a@1)
	// "queued" → "queued"  controller relocated (pod-b@2)
	// "queued" → "working"  resumed (pod-b@2)
}

// A handle starts from the record it last wrote, but never refuses a move,
// or skips one as idempotent, on that memory alone: the record may have
// moved on under another writer.
func TestPersistedDecidesAgainOnAFreshReadWhenItsLastWriteIsStale(t *testing.T) {
	controller, store := created(t, transition.PersistedOptions{})
	master := newJob(t, store, transition.PersistedOptions{})
	_, err := controller.Fire(bg, Work, "")
	require.NoError(t, err)
	_, err = master.Fire(bg, Halt, "stop")
	require.NoError(t, err)
	c, err := controller.Fire(bg, Done, "finished stopping")
	require.NoError(t, err, "working → done is refused only on the stale memory; halting → done is allowed")
	require.Equal(t, Halt, c.From)

	a, store := created(t, transition.PersistedOptions{})
	b := newJob(t, store, transition.PersistedOptions{})
	_, err = a.Fire(bg, Work, "")
	require.NoError(t, err)
	_, err = a.Fire(bg, Hold, "")
	require.NoError(t, err)
	_, err = b.Fire(bg, Work, "someone resumed")
	require.NoError(t, err)
	c, err = a.Fire(bg, Hold, "hold again")
	require.NoError(t, err)
	require.True(t, c.Changed(), "not an idempotent no-op: the record was working")
	require.Equal(t, "held", mustGet(t, store).Status)
}

// With a warm cache the usual write is a single compare-and-swap.
func TestPersistedWarmWriteIsOneRoundTrip(t *testing.T) {
	_, mem := created(t, transition.PersistedOptions{})
	counting := &countingStore{Store: mem}
	p2 := newJob(t, counting, transition.PersistedOptions{})
	_, err := p2.Fire(bg, Work, "")
	require.NoError(t, err)
	counting.gets, counting.cas = 0, 0
	_, err = p2.Fire(bg, Hold, "")
	require.NoError(t, err)
	require.Equal(t, 0, counting.gets)
	require.Equal(t, 1, counting.cas)
}

type countingStore struct {
	storage.Store
	gets, cas int
}

func (s *countingStore) Get(ctx context.Context, id string) (storage.Record, error) {
	s.gets++
	return s.Store.Get(ctx, id)
}

func (s *countingStore) CompareAndSwap(ctx context.Context, id string, expect uint64, next storage.Record) (storage.Record, error) {
	s.cas++
	return s.Store.CompareAndSwap(ctx, id, expect, next)
}

// A guard and a decide function may call back into the Persisted they
// run for, with any context, as they may into a Machine: nothing is held
// while they run. (It deadlocked: the write lock was held throughout.)
func TestPersistedGuardsAndDecideMayCallBackIntoTheirPersisted(t *testing.T) {
	store := storage.NewMemory()
	var p *transition.Persisted[Job]
	table, err := jobBuilder().Guard(Queued, Work, func(context.Context, transition.Change[Job], transition.View) error {
		cur, _, err := p.Load(context.Background())
		if err != nil {
			return err
		}
		if cur != Queued {
			return fmt.Errorf("the guard saw %s", cur)
		}
		return nil
	}).Build()
	require.NoError(t, err)
	p, err = transition.NewPersisted(table, store, "ex-1", transition.PersistedOptions{})
	require.NoError(t, err)
	_, err = p.Create(bg, transition.To(Queued))
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		_, err := p.Fire(context.Background(), Work, "the guard reads the record")
		done <- err
	}()
	require.NoError(t, testwait.Recv(t, done, "a Fire whose guard calls Load"))

	// A decide function that writes through the same Persisted: its own
	// write is a concurrent one, so it decides again on the fresh record.
	var seen []Job
	go func() {
		_, _, err := p.Apply(context.Background(), func(cur Job, _ storage.Record) (transition.Update[Job], error) {
			seen = append(seen, cur)
			if cur == Work {
				if _, err := p.Fire(context.Background(), Hold, "nested"); err != nil {
					return transition.Update[Job]{}, err
				}
			}
			return transition.To(Work).Because("back to work"), nil
		})
		done <- err
	}()
	require.NoError(t, testwait.Recv(t, done, "an Apply whose decide function fires"))
	require.Equal(t, []Job{Work, Hold}, seen, "decided again on the record its nested write left")
	cur, rec, err := p.Load(bg)
	require.NoError(t, err)
	require.Equal(t, Work, cur)
	require.Equal(t, "held", rec.Previous)
}

// An update built from another leaves the first as it was: Set copies
// the metadata, Remove the keys, so a shared base update is safe to
// extend in many places.
func TestAnUpdateBuiltFromAnotherLeavesItAsItWas(t *testing.T) {
	base := transition.To(Queued).Because("submitted").Set("owner", "alice").Remove("draft")
	one := base.Set("owner", "bob").Remove("a")
	two := base.Set("node", "n1").Remove("b")
	require.Equal(t, transition.Update[Job]{To: Queued, Reason: "submitted", Meta: map[string]string{"owner": "alice"}, Unset: []string{"draft"}}, base)
	require.Equal(t, map[string]string{"owner": "bob"}, one.Meta)
	require.Equal(t, []string{"draft", "a"}, one.Unset)
	require.Equal(t, map[string]string{"owner": "alice", "node": "n1"}, two.Meta)
	require.Equal(t, []string{"draft", "b"}, two.Unset)

	p := newJob(t, storage.NewMemory(), transition.PersistedOptions{})
	rec, err := p.Create(bg, one)
	require.NoError(t, err)
	require.Equal(t, "submitted", rec.Reason)
	require.Equal(t, map[string]string{"owner": "bob"}, rec.Meta)
}

func ExampleTo() {
	table, err := transition.New("queued").Allow("queued", "working").Terminal("working").Build()
	if err != nil {
		panic(err)
	}
	p, err := transition.NewPersisted(table, storage.NewMemory(), "ex-1", transition.PersistedOptions{Actor: "master"})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	_, _ = p.Create(ctx, transition.To("queued").Because("submitted").Set("owner", "alice"))
	// A decision returns an update: here the move, one entry set and
	// one removed, in one write.
	_, rec, _ := p.Apply(ctx, func(cur string, rec storage.Record) (transition.Update[string], error) {
		return transition.To("working").Because("picked up").Set("node", "n1").Remove("owner"), nil
	})
	fmt.Println(rec.Status, rec.Reason, rec.Meta)
	// Output:
	// working picked up map[node:n1]
}

// Walk takes a record to a state as many moves away as the table needs,
// and stops at what it cannot reach.
func TestWalkMovesAlongTheTablesShortestPath(t *testing.T) {
	store := storage.NewMemory()
	p, err := transition.NewPersisted(jobTable(t), store, "job-1", transition.PersistedOptions{Actor: "worker"})
	require.NoError(t, err)
	_, err = p.Create(bg, transition.To(Queued))
	require.NoError(t, err)
	changes, err := p.Walk(bg, Hold, "held for review")
	require.NoError(t, err)
	var path []Job
	for _, c := range changes {
		path = append(path, c.To)
		require.Equal(t, "held for review", c.Reason)
	}
	require.Equal(t, []Job{Work, Hold}, path)

	changes, err = p.Walk(bg, Hold, "again")
	require.NoError(t, err)
	require.Empty(t, changes, "already there: nothing written")

	_, err = p.Fire(bg, Broken, "disk full")
	require.NoError(t, err)
	changes, err = p.Walk(bg, Work, "after the end")
	require.ErrorIs(t, err, transition.ErrNotAllowed)
	require.ErrorContains(t, err, "broken → working")
	require.Empty(t, changes)
}

// A write by someone else in the middle of a walk is walked from: the
// rest of the path is planned from where the record is.
func TestWalkPlansFromWhereTheRecordIs(t *testing.T) {
	store := storage.NewMemory()
	master, err := transition.NewPersisted(jobTable(t), store, "job-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = master.Create(bg, transition.To(Queued))
	require.NoError(t, err)
	interfered := false
	p, err := transition.NewPersisted(jobTable(t), store, "job-1", transition.PersistedOptions{Actor: "worker"}, transition.Observers[Job]{
		OnChange: []func(transition.Change[Job]){func(c transition.Change[Job]) {
			if c.To == Work && !interfered {
				interfered = true
				_, err := master.Fire(bg, Halt, "user stop")
				require.NoError(t, err)
			}
		}},
	})
	require.NoError(t, err)
	changes, err := p.Walk(bg, Hold, "held for review")
	require.ErrorIs(t, err, transition.ErrNotAllowed, "halting leads to no held state")
	require.Len(t, changes, 1)
	cur, _, err := p.Load(bg)
	require.NoError(t, err)
	require.Equal(t, Halt, cur, "the stop stands")
}

// A controller that lists its executions hands each handle its record:
// the first decision on it is trusted as a fresh read, so reconciling
// an execution that needs nothing reads nothing; the decisions after it
// are as before.
func TestPersistedObservedRecordSavesTheReadOfOneDecision(t *testing.T) {
	_, mem := created(t, transition.PersistedOptions{})
	counting := &countingStore{Store: mem}
	p := newJob(t, counting, transition.PersistedOptions{})
	listed, _, err := mem.List(bg)
	require.NoError(t, err)
	require.NoError(t, p.Prime(bg, listed[0]))

	nothing := func(cur Job, _ storage.Record) (transition.Update[Job], error) { return transition.To(cur), nil }
	c, rec, err := p.Apply(bg, nothing)
	require.NoError(t, err)
	require.False(t, c.Changed())
	require.Equal(t, listed[0].Revision, rec.Revision)
	require.Equal(t, 0, counting.gets, "decided on the listed record: no read")
	require.Equal(t, 0, counting.cas)

	_, _, err = p.Apply(bg, nothing)
	require.NoError(t, err)
	require.Equal(t, 1, counting.gets, "trusted once: a remembered record is read again before nothing is written")
}

// A write decided on an observed record that moved on since is a
// conflict: the handle reads the record and decides again, and never
// overwrites what it did not see.
func TestPersistedObservedStaleRecordConflictsAndDecidesAgain(t *testing.T) {
	master, mem := created(t, transition.PersistedOptions{Actor: "master"})
	listed, err := mem.Get(bg, "ex-1")
	require.NoError(t, err)
	_, err = master.Fire(bg, Work, "resumed by the master")
	require.NoError(t, err)

	counting := &countingStore{Store: mem}
	p := newJob(t, counting, transition.PersistedOptions{})
	require.NoError(t, p.Prime(bg, listed))
	var seen []Job
	c, err := p.Walk(bg, Hold, "operator hold")
	require.NoError(t, err)
	for _, ch := range c {
		seen = append(seen, ch.From)
	}
	require.Equal(t, []Job{Work}, seen, "decided again on the fresh record: working → held, not queued → …")
	require.Equal(t, 1, counting.gets)
	require.Equal(t, 2, counting.cas, "the write on the stale revision conflicted, then the one on the fresh one landed")
	require.Equal(t, "held", mustGet(t, mem).Status)
}

// A late watch event does not take the handle back to an older record;
// a record of another execution or one never stored is refused and
// changes nothing.
func TestPersistedObserveKeepsTheNewestAndRefusesWhatIsNotStored(t *testing.T) {
	p, mem := created(t, transition.PersistedOptions{})
	old, err := mem.Get(bg, "ex-1")
	require.NoError(t, err)
	_, err = p.Fire(bg, Work, "")
	require.NoError(t, err)
	counting := &countingStore{Store: mem}
	q := newJob(t, counting, transition.PersistedOptions{})
	_, _, err = q.Load(bg)
	require.NoError(t, err)
	counting.gets = 0
	require.NoError(t, q.Prime(bg, old), "older than what the handle knows: ignored")
	c, err := q.Fire(bg, Work, "")
	require.NoError(t, err)
	require.False(t, c.Changed(), "decided on working, not on the older queued")
	require.Equal(t, 1, counting.gets, "the remembered record was not trusted: read again")

	other := old
	other.ID = "ex-2"
	err = q.Prime(bg, other)
	require.ErrorIs(t, err, storage.ErrInvalidRecord)
	require.ErrorContains(t, err, `ex-2`)
	unstored := old
	unstored.Revision = 0
	require.ErrorIs(t, q.Prime(bg, unstored), storage.ErrInvalidRecord)
	//lint:ignore SA1012 the point is that a nil context is an error, not a panic
	require.Error(t, q.Prime(nil, old))
	var zero transition.Persisted[Job]
	require.Error(t, zero.Prime(bg, old))
}

// The handle keeps its own copy: the caller's record may change after.
func TestPersistedObserveCopiesTheRecord(t *testing.T) {
	_, mem := created(t, transition.PersistedOptions{})
	p := newJob(t, mem, transition.PersistedOptions{})
	rec, err := mem.Get(bg, "ex-1")
	require.NoError(t, err)
	require.NoError(t, p.Prime(bg, rec))
	rec.Meta["owner"] = "mallory"
	_, got, err := p.Apply(bg, func(cur Job, rec storage.Record) (transition.Update[Job], error) {
		return transition.To(cur), nil
	})
	require.NoError(t, err)
	require.Equal(t, "alice", got.Meta["owner"])
}

// What Apply returns is the caller's own: changing it changes nothing of
// the handle's, whether decide changed the copy it was lent or not, and
// it is the record as stored, whether a write happened or not.
func TestPersistedApplyHandsBackARecordOfItsOwn(t *testing.T) {
	p, mem := created(t, transition.PersistedOptions{})
	var lent storage.Record
	_, got, err := p.Apply(bg, func(cur Job, rec storage.Record) (transition.Update[Job], error) {
		lent = rec
		return transition.To(cur), nil
	})
	require.NoError(t, err)
	got.Meta["owner"] = "mallory" // the caller's own, as is lent
	require.Equal(t, "mallory", lent.Meta["owner"], "decide's copy is the one handed back")

	_, got, err = p.Apply(bg, func(cur Job, rec storage.Record) (transition.Update[Job], error) {
		require.Equal(t, "alice", rec.Meta["owner"], "the handle's record did not change")
		rec.Meta["owner"] = "eve" // decide changes its copy: not what is stored
		return transition.To(cur), nil
	})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"owner": "alice"}, got.Meta, "the record as stored, not decide's copy")

	_, got, err = p.Apply(bg, func(cur Job, rec storage.Record) (transition.Update[Job], error) {
		return transition.To(Work).Set("node", "n1"), nil
	})
	require.NoError(t, err)
	stored, err := mem.Get(bg, "ex-1")
	require.NoError(t, err)
	require.Equal(t, stored.Meta, got.Meta)
	got.Meta["node"] = "changed by the caller"
	_, again, err := p.Apply(bg, func(cur Job, rec storage.Record) (transition.Update[Job], error) {
		return transition.To(cur), nil
	})
	require.NoError(t, err)
	require.Equal(t, stored.Meta, again.Meta)
}

// A controller starting over many executions lists them once and hands
// each handle the record the listing read: reconciling one that needs
// nothing then reads nothing more, and one that needs a move writes it
// at the listed revision (a conflict, re-read and decided again, if the
// record moved on since).
func ExamplePersisted_Prime() {
	table, err := transition.New("queued").Allow("queued", "working").Terminal("working").Build()
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	store := storage.NewMemory()
	for _, id := range []string{"ex-1", "ex-2"} {
		p, _ := transition.NewPersisted(table, store, id, transition.PersistedOptions{Actor: "master"})
		_, _ = p.Create(ctx, transition.To("queued").Set("node", "n1"))
	}
	lost, _ := store.Get(ctx, "ex-2")
	lost.Meta = nil // its node is gone
	if _, err := store.CompareAndSwap(ctx, "ex-2", lost.Revision, lost); err != nil {
		panic(err)
	}

	listed, _, err := store.List(ctx)
	if err != nil {
		panic(err)
	}
	for _, rec := range listed {
		p, err := transition.NewPersisted(table, store, rec.ID, transition.PersistedOptions{Actor: "controller"})
		if err != nil {
			panic(err)
		}
		if err := p.Prime(ctx, rec); err != nil {
			panic(err)
		}
		c, _, err := p.Apply(ctx, func(cur string, rec storage.Record) (transition.Update[string], error) {
			if rec.Meta["node"] == "" {
				return transition.To("working").Because("placed again").Set("node", "n2"), nil
			}
			return transition.To(cur), nil // still placed: nothing to do, nothing read
		})
		if err != nil {
			panic(err)
		}
		fmt.Println(rec.ID, c.From, "→", c.To)
	}
	// Output:
	// ex-1 queued → queued
	// ex-2 queued → working
}

// In a table where a stop's end leads back to the start, a stop written
// in the middle of a walk ends the walk: planning again from it would
// walk over the stop and start the execution again.
func TestWalkNeverWalksOverAStopInACyclicTable(t *testing.T) {
	table, err := transition.New("idle").
		Allow("idle", "starting").
		Allow("starting", "ready", "stopping").
		Allow("ready", "running", "stopping").
		Allow("running", "stopping").
		Allow("stopping", "idle").
		Build()
	require.NoError(t, err)
	store := storage.NewMemory()
	master, err := transition.NewPersisted(table, store, "sim-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = master.Create(bg, transition.To("idle"))
	require.NoError(t, err)
	var stopped, alongThePath bool
	p, err := transition.NewPersisted(table, store, "sim-1", transition.PersistedOptions{Actor: "manager"}, transition.Observers[string]{
		OnChange: []func(transition.Change[string]){func(c transition.Change[string]) {
			switch {
			case c.To == "starting" && !alongThePath:
				// Another writer moves it along the walk's own path: walked from.
				alongThePath = true
				_, err := master.Fire(bg, "ready", "placed")
				require.NoError(t, err)
			}
		}},
	})
	require.NoError(t, err)
	changes, err := p.Walk(bg, "running", "set up")
	require.NoError(t, err)
	require.Len(t, changes, 2, "idle → starting by the walk, ready by the master, running by the walk")

	_, err = master.Fire(bg, "stopping", "stop")
	require.NoError(t, err)
	_, err = master.Fire(bg, "idle", "stopped")
	require.NoError(t, err)
	p, err = transition.NewPersisted(table, store, "sim-1", transition.PersistedOptions{Actor: "manager"}, transition.Observers[string]{
		OnChange: []func(transition.Change[string]){func(c transition.Change[string]) {
			if c.To == "starting" && !stopped {
				stopped = true
				_, err := master.Fire(bg, "stopping", "user stop")
				require.NoError(t, err)
			}
		}},
	})
	require.NoError(t, err)
	changes, err = p.Walk(bg, "running", "set up")
	require.ErrorIs(t, err, transition.ErrNotAllowed)
	require.ErrorContains(t, err, "another writer moved it off the walk's path")
	require.Len(t, changes, 1)
	cur, _, err := p.Load(bg)
	require.NoError(t, err)
	require.Equal(t, "stopping", cur, "the stop stands")
}
