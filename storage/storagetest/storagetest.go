// Package storagetest is the conformance suite every [storage.Store]
// must pass. A store's tests call [Run] with a function that returns a
// fresh, empty store (see the example).
//
// The suite checks the contract documented on [storage.Store]: the
// sentinel errors, compare-and-swap with the current record on conflict,
// revisions that strictly increase, validation before any write, context
// handling, no aliasing, exactly one winner among concurrent writers, and
// ownership: Acquire takes a record at the next epoch, a live holder is
// never taken over (not even by its own name), Release closes Lost and
// frees the record, a waiting Acquire takes over when the holder ends or
// gives up with its context, and CompareAndSwap never changes a claim.
// How a store's ownership expires is its own (an etcd lease, a Kubernetes
// Lease) and is tested by the store.
package storagetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/storage"

	"github.com/execfsm/execfsm/internal/testwait"
	"github.com/stretchr/testify/require"
)

// Run runs the suite as subtests; newStore is called once per subtest.
// Stores that implement [storage.Lister], [storage.Watcher],
// [storage.Deleter], [storage.PageLister] or [storage.Counter] have
// those checked too; the others skip those
// subtests, saying so.
func Run(t *testing.T, newStore func(t *testing.T) storage.Store) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, storage.Store)
	}{
		{"GetUnknownIsNotFound", getUnknownIsNotFound},
		{"CreateThenGetRoundTrips", createThenGetRoundTrips},
		{"CreateTwiceIsExists", createTwiceIsExists},
		{"CreateIgnoresGivenRevision", createIgnoresGivenRevision},
		{"CompareAndSwapAtCurrentRevisionWrites", casAtCurrentRevisionWrites},
		{"CompareAndSwapAtStaleRevisionConflicts", casAtStaleRevisionConflicts},
		{"CompareAndSwapUnknownIsNotFound", casUnknownIsNotFound},
		{"CompareAndSwapChecksTheID", casChecksTheID},
		{"RevisionsStrictlyIncrease", revisionsStrictlyIncrease},
		{"AnIdenticalWriteStillAdvancesTheRevision", identicalWriteAdvancesTheRevision},
		{"InvalidRecordsAreRefusedAndNothingIsWritten", invalidRecordsAreRefused},
		{"DoneContextWritesNothing", doneContextWritesNothing},
		{"ReturnedRecordsAreNotAliased", returnedRecordsAreNotAliased},
		{"ConcurrentWritersHaveExactlyOneWinner", concurrentWritersHaveOneWinner},
		{"LargestValidRecordRoundTrips", largestValidRecordRoundTrips},
		{"ListReturnsEveryRecordByID", listReturnsEveryRecord},
		{"WatchSeesEveryWriteInOrder", watchSeesEveryWrite},
		{"WatchFromARevisionSeesOnlyLaterWrites", watchFromRevision},
		{"WatchEndsWithItsContext", watchEndsWithContext},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
	for _, tc := range ownershipTests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
	runIfImplemented(t, newStore, deleteTests)
	runIfImplemented(t, newStore, pageTests)
	runIfImplemented(t, newStore, countTests)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// Sample returns a valid record with every field set, for id.
func Sample(id string) storage.Record {
	at := time.Date(2026, 12, 2, 16, 41, 37, 123456789, time.UTC)
	return storage.Record{
		ID: id, Status: "running", Previous: "initializing", Owner: "pod-a", Epoch: 3,
		UpdatedAt: at, Since: at.Add(-time.Second), Reason: "slicer ready ✓",
		// One entry, at revision 0: a store assigns the record's revision
		// on Create, and a trail must stay below the revisions that later
		// writes append at.
		History: mustTrail(storage.NewTrail(
			storage.Entry{From: "initializing", To: "running", Reason: "slicer ready ✓", Actor: "pod-a", Owner: "pod-a", Epoch: 3, At: at},
		)),
		HistoryLimit: 32,
		Meta:         map[string]string{"restarts": "1", "realm": "lab-β"},
	}
}

// CreateSamples creates a [Sample] record for each id, sixteen at a
// time (a store over a network is slow one by one), and fails t if any
// creation fails: a store of many records, for tests of listing and
// paging.
func CreateSamples(t testing.TB, store storage.Store, ids ...string) {
	t.Helper()
	const writers = 16
	todo := make(chan string)
	errs := make(chan error, writers)
	for range writers {
		go func() {
			var err error
			for id := range todo {
				if err == nil {
					_, err = store.Create(context.Background(), Sample(id))
				}
			}
			errs <- err
		}()
	}
	for _, id := range ids {
		todo <- id
	}
	close(todo)
	var failed []error
	for range writers {
		if err := <-errs; err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		t.Fatalf("storagetest: CreateSamples: %v", errors.Join(failed...))
	}
}

// mustTrail is for trails made here of entries known to be valid.
func mustTrail(trail storage.Trail, err error) storage.Trail {
	if err != nil {
		panic("storagetest: a trail made here is invalid: " + err.Error())
	}
	return trail
}

// Trail returns an audit trail of n entries (at most storage.MaxHistory)
// that ends in running: see [TrailEntries].
func Trail(t testing.TB, n int) storage.Trail {
	t.Helper()
	trail, err := storage.NewTrail(TrailEntries(n)...)
	require.NoError(t, err)
	return trail
}

// TrailEntries returns the entries of an audit trail of n entries that
// ends in running: one path moving between running and paused, at
// revisions 1 to n.
func TrailEntries(n int) []storage.Entry {
	at := time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC)
	trail := make([]storage.Entry, n)
	for k := range trail {
		from, to := "paused", "running"
		if (n-k)%2 == 0 {
			from, to = to, from
		}
		trail[k] = storage.Entry{From: from, To: to, Reason: fmt.Sprint("move ", k), Actor: "pod-a", At: at.Add(time.Duration(k) * time.Second), Revision: uint64(k + 1)}
	}
	return trail
}

// requireSameRecord compares two records field by field, with times
// compared as instants and nil and empty collections treated alike.
func requireSameRecord(t *testing.T, want, got storage.Record) {
	t.Helper()
	require.Equal(t, want.ID, got.ID)
	require.Equal(t, want.Status, got.Status)
	require.Equal(t, want.Previous, got.Previous)
	require.Equal(t, want.Owner, got.Owner)
	require.Equal(t, want.Epoch, got.Epoch)
	require.Equal(t, want.Reason, got.Reason)
	require.True(t, want.UpdatedAt.Equal(got.UpdatedAt), "UpdatedAt %v, want %v", got.UpdatedAt, want.UpdatedAt)
	require.True(t, want.Since.Equal(got.Since), "Since %v, want %v", got.Since, want.Since)
	require.Equal(t, want.History.Len(), got.History.Len())
	wantTrail, gotTrail := want.History.Entries(), got.History.Entries()
	for k := range wantTrail {
		w, g := wantTrail[k], gotTrail[k]
		require.True(t, w.At.Equal(g.At), "History[%d].At", k)
		w.At, g.At = time.Time{}, time.Time{}
		require.Equal(t, w, g, "History[%d]", k)
	}
	require.Equal(t, len(want.Meta), len(got.Meta))
	for k, v := range want.Meta {
		require.Equal(t, v, got.Meta[k], "Meta[%q]", k)
	}
}

func getUnknownIsNotFound(t *testing.T, s storage.Store) {
	_, err := s.Get(ctx(t), "nope")
	require.ErrorIs(t, err, storage.ErrNotFound)
	// An id no record can have is refused as such, on every store.
	for _, id := range []string{"", strings.Repeat("i", storage.MaxIDLen+1), "ex-\xff"} {
		_, err := s.Get(ctx(t), id)
		require.ErrorIs(t, err, storage.ErrInvalidRecord, "%q", id)
	}
}

func createThenGetRoundTrips(t *testing.T, s storage.Store) {
	want := Sample("ex-1")
	created, err := s.Create(ctx(t), want)
	require.NoError(t, err)
	require.NotZero(t, created.Revision)
	requireSameRecord(t, want, created)
	got, err := s.Get(ctx(t), "ex-1")
	require.NoError(t, err)
	require.Equal(t, created.Revision, got.Revision)
	requireSameRecord(t, want, got)
}

func createTwiceIsExists(t *testing.T, s storage.Store) {
	first, err := s.Create(ctx(t), Sample("ex-1"))
	require.NoError(t, err)
	other := Sample("ex-1")
	other.Status = "failed"
	_, err = s.Create(ctx(t), other)
	require.ErrorIs(t, err, storage.ErrExists)
	got, err := s.Get(ctx(t), "ex-1")
	require.NoError(t, err)
	require.Equal(t, first.Revision, got.Revision)
	require.Equal(t, "running", got.Status, "the second Create changed nothing")
}

func createIgnoresGivenRevision(t *testing.T, s storage.Store) {
	rec := Sample("ex-1")
	rec.Revision = 1 << 60
	created, err := s.Create(ctx(t), rec)
	require.NoError(t, err)
	require.NotEqual(t, rec.Revision, created.Revision)
	next := created
	next.Status = "paused"
	_, err = s.CompareAndSwap(ctx(t), "ex-1", created.Revision, next)
	require.NoError(t, err, "the assigned revision is the one CompareAndSwap compares")
}

func casAtCurrentRevisionWrites(t *testing.T, s storage.Store) {
	created, err := s.Create(ctx(t), Sample("ex-1"))
	require.NoError(t, err)
	next := created
	next.Status, next.Previous, next.Reason = "relocating", "running", "node drained"
	next.Meta = map[string]string{"k": "v"}
	written, err := s.CompareAndSwap(ctx(t), "ex-1", created.Revision, next)
	require.NoError(t, err)
	require.Greater(t, written.Revision, created.Revision)
	requireSameRecord(t, next, written)
	got, err := s.Get(ctx(t), "ex-1")
	require.NoError(t, err)
	require.Equal(t, written.Revision, got.Revision)
	requireSameRecord(t, next, got)
}

func casAtStaleRevisionConflicts(t *testing.T, s storage.Store) {
	created, err := s.Create(ctx(t), Sample("ex-1"))
	require.NoError(t, err)
	first := created
	first.Status = "stopping"
	written, err := s.CompareAndSwap(ctx(t), "ex-1", created.Revision, first)
	require.NoError(t, err)

	stale := created
	stale.Status = "relocating"
	_, err = s.CompareAndSwap(ctx(t), "ex-1", created.Revision, stale)
	require.ErrorIs(t, err, storage.ErrConflict)
	var conflict *storage.ConflictError
	require.ErrorAs(t, err, &conflict)
	require.Equal(t, written.Revision, conflict.Current.Revision, "the conflict carries the current record")
	require.Equal(t, "stopping", conflict.Current.Status)

	got, err := s.Get(ctx(t), "ex-1")
	require.NoError(t, err)
	require.Equal(t, "stopping", got.Status, "the stale write changed nothing")
	require.Equal(t, written.Revision, got.Revision)
}

func casUnknownIsNotFound(t *testing.T, s storage.Store) {
	_, err := s.CompareAndSwap(ctx(t), "ex-1", 1, Sample("ex-1"))
	require.ErrorIs(t, err, storage.ErrNotFound)
	_, err = s.Get(ctx(t), "ex-1")
	require.ErrorIs(t, err, storage.ErrNotFound, "CompareAndSwap does not create")
}

func casChecksTheID(t *testing.T, s storage.Store) {
	a, err := s.Create(ctx(t), Sample("ex-a"))
	require.NoError(t, err)
	_, err = s.Create(ctx(t), Sample("ex-b"))
	require.NoError(t, err)
	_, err = s.CompareAndSwap(ctx(t), "ex-a", a.Revision, Sample("ex-b"))
	require.ErrorIs(t, err, storage.ErrInvalidRecord)
	got, err := s.Get(ctx(t), "ex-a")
	require.NoError(t, err)
	require.Equal(t, a.Revision, got.Revision)
}

func revisionsStrictlyIncrease(t *testing.T, s storage.Store) {
	var last uint64
	for k := range 3 {
		rec, err := s.Create(ctx(t), Sample(fmt.Sprintf("ex-%d", k)))
		require.NoError(t, err)
		require.Greater(t, rec.Revision, last)
		last = rec.Revision
	}
	cur, err := s.Get(ctx(t), "ex-1")
	require.NoError(t, err)
	for k := range 20 {
		next := cur
		next.Reason = fmt.Sprintf("write %d", k)
		written, err := s.CompareAndSwap(ctx(t), "ex-1", cur.Revision, next)
		require.NoError(t, err)
		require.Greater(t, written.Revision, cur.Revision)
		cur = written
	}
}

// Hostile records: each is refused with ErrInvalidRecord and nothing is
// written.
// A compare-and-swap whose record equals the stored one is still a write:
// it gets a new revision, and a writer holding the old one conflicts.
func identicalWriteAdvancesTheRevision(t *testing.T, s storage.Store) {
	created, err := s.Create(ctx(t), Sample("ex-1"))
	require.NoError(t, err)
	again, err := s.CompareAndSwap(ctx(t), "ex-1", created.Revision, created)
	require.NoError(t, err)
	require.Greater(t, again.Revision, created.Revision)
	got, err := s.Get(ctx(t), "ex-1")
	require.NoError(t, err)
	require.Equal(t, again.Revision, got.Revision)
	_, err = s.CompareAndSwap(ctx(t), "ex-1", created.Revision, created)
	require.ErrorIs(t, err, storage.ErrConflict)
}

func invalidRecordsAreRefused(t *testing.T, s storage.Store) {
	created, err := s.Create(ctx(t), Sample("ex-1"))
	require.NoError(t, err)
	huge := strings.Repeat("x", 1<<20)
	cases := map[string]func(*storage.Record){
		"empty id":           func(r *storage.Record) { r.ID = "" },
		"long id":            func(r *storage.Record) { r.ID = strings.Repeat("i", storage.MaxIDLen+1) },
		"invalid UTF-8 id":   func(r *storage.Record) { r.ID = "ex-\xff" },
		"empty status":       func(r *storage.Record) { r.Status = "" },
		"1 MB reason":        func(r *storage.Record) { r.Reason = huge },
		"invalid UTF-8":      func(r *storage.Record) { r.Reason = "bad \xc3\x28" },
		"long owner":         func(r *storage.Record) { r.Owner = huge },
		"huge meta value":    func(r *storage.Record) { r.Meta = map[string]string{"k": huge} },
		"empty meta key":     func(r *storage.Record) { r.Meta = map[string]string{"": "v"} },
		"too many meta keys": func(r *storage.Record) { r.Meta = manyKeys(storage.MaxMetaEntries + 1) },
		// A trail's own entries (lengths, order) are checked when the
		// Trail is made: a record cannot carry a bad one.
		"history beyond its limit": func(r *storage.Record) { r.HistoryLimit, r.History = 4, Trail(t, 5) },
		"history limit too high":   func(r *storage.Record) { r.HistoryLimit = storage.MaxHistory + 1 },
		"negative history limit":   func(r *storage.Record) { r.HistoryLimit = -1 },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			rec := Sample("ex-new")
			mutate(&rec)
			_, err := s.Create(ctx(t), rec)
			require.ErrorIs(t, err, storage.ErrInvalidRecord)
			if rec.ID != "" && rec.ID != "ex-new" {
				return
			}
			_, err = s.Get(ctx(t), "ex-new")
			require.ErrorIs(t, err, storage.ErrNotFound, "nothing was created")

			next := created.Clone()
			mutate(&next)
			if next.ID != created.ID {
				return // the id case is CompareAndSwapChecksTheID
			}
			_, err = s.CompareAndSwap(ctx(t), "ex-1", created.Revision, next)
			require.ErrorIs(t, err, storage.ErrInvalidRecord)
			got, err := s.Get(ctx(t), "ex-1")
			require.NoError(t, err)
			require.Equal(t, created.Revision, got.Revision, "nothing was written")
		})
	}
}

func manyKeys(n int) map[string]string {
	m := make(map[string]string, n)
	for k := range n {
		m[fmt.Sprintf("k%d", k)] = "v"
	}
	return m
}

func doneContextWritesNothing(t *testing.T, s storage.Store) {
	created, err := s.Create(ctx(t), Sample("ex-1"))
	require.NoError(t, err)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.Create(done, Sample("ex-2"))
	require.ErrorIs(t, err, context.Canceled)
	next := created
	next.Status = "failed"
	_, err = s.CompareAndSwap(done, "ex-1", created.Revision, next)
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.Get(done, "ex-1")
	require.ErrorIs(t, err, context.Canceled)

	_, err = s.Get(ctx(t), "ex-2")
	require.ErrorIs(t, err, storage.ErrNotFound)
	got, err := s.Get(ctx(t), "ex-1")
	require.NoError(t, err)
	require.Equal(t, created.Revision, got.Revision)
}

func returnedRecordsAreNotAliased(t *testing.T, s storage.Store) {
	rec := Sample("ex-1")
	created, err := s.Create(ctx(t), rec)
	require.NoError(t, err)
	rec.Meta["realm"] = "changed after Create"
	created.Meta["restarts"] = "changed in the result"
	got, err := s.Get(ctx(t), "ex-1")
	require.NoError(t, err)
	requireSameRecord(t, Sample("ex-1"), got)
	got.Meta["realm"] = "changed after Get"
	again, err := s.Get(ctx(t), "ex-1")
	require.NoError(t, err)
	requireSameRecord(t, Sample("ex-1"), again)
}

// Many goroutines race to write the same revision: exactly one wins and
// every loser sees a conflict carrying the winner's record.
func concurrentWritersHaveOneWinner(t *testing.T, s storage.Store) {
	const writers = 16
	for round := range 5 {
		id := fmt.Sprintf("ex-%d", round)
		created, err := s.Create(ctx(t), Sample(id))
		require.NoError(t, err)
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []storage.Record
			losers  []*storage.ConflictError
			others  []error
		)
		start := make(chan struct{})
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				next := created
				next.Reason = fmt.Sprintf("writer %d", w)
				<-start
				written, err := s.CompareAndSwap(ctx(t), id, created.Revision, next)
				mu.Lock()
				defer mu.Unlock()
				var conflict *storage.ConflictError
				switch {
				case err == nil:
					winners = append(winners, written)
				case errors.As(err, &conflict):
					losers = append(losers, conflict)
				default:
					others = append(others, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		require.Empty(t, others)
		require.Len(t, winners, 1)
		require.Len(t, losers, writers-1)
		for _, l := range losers {
			require.Equal(t, winners[0].Revision, l.Current.Revision)
			require.Equal(t, winners[0].Reason, l.Current.Reason)
		}
		got, err := s.Get(ctx(t), id)
		require.NoError(t, err)
		require.Equal(t, winners[0].Reason, got.Reason)
	}
}

func largestValidRecordRoundTrips(t *testing.T, s storage.Store) {
	rec := Sample("ex-" + strings.Repeat("é", (storage.MaxIDLen-3)/2))
	rec.Reason = strings.Repeat("r", storage.MaxReasonLen)
	entries := TrailEntries(16)
	for k := range entries {
		entries[k].Reason = strings.Repeat("h", 1024)
	}
	var err error
	rec.History, err = storage.NewTrail(entries...)
	require.NoError(t, err)
	rec.Meta = manyKeys(storage.MaxMetaEntries)
	rec.Meta["k0"] = strings.Repeat("v", storage.MaxMetaValueLen)
	require.NoError(t, rec.Validate())
	created, err := s.Create(ctx(t), rec)
	require.NoError(t, err)
	got, err := s.Get(ctx(t), rec.ID)
	require.NoError(t, err)
	require.Equal(t, created.Revision, got.Revision)
	requireSameRecord(t, rec, got)
}

func listReturnsEveryRecord(t *testing.T, s storage.Store) {
	l, ok := s.(storage.Lister)
	if !ok {
		t.Skipf("%T does not implement storage.Lister", s)
	}
	recs, bad, err := l.List(ctx(t))
	require.NoError(t, err)
	require.Empty(t, recs)
	require.Empty(t, bad)
	for _, id := range []string{"ex-b", "ex-a", "ex-c"} {
		_, err := s.Create(ctx(t), Sample(id))
		require.NoError(t, err)
	}
	recs, bad, err = l.List(ctx(t))
	require.NoError(t, err)
	require.Empty(t, bad)
	require.Len(t, recs, 3)
	for k, id := range []string{"ex-a", "ex-b", "ex-c"} {
		got, err := s.Get(ctx(t), id)
		require.NoError(t, err)
		require.Equal(t, got.Revision, recs[k].Revision)
		requireSameRecord(t, Sample(id), recs[k])
	}
}

func watcherOf(t *testing.T, s storage.Store) storage.Watcher {
	w, ok := s.(storage.Watcher)
	if !ok {
		t.Skipf("%T does not implement storage.Watcher", s)
	}
	return w
}

// next reads one event or fails after a generous wait.
func next(t *testing.T, ch <-chan storage.WatchEvent) storage.WatchEvent {
	t.Helper()
	return testwait.Recv(t, ch, "a watch event")
}

func watchSeesEveryWrite(t *testing.T, s storage.Store) {
	w := watcherOf(t, s)
	watchCtx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	ch, err := w.Watch(watchCtx, 0)
	require.NoError(t, err)
	var want []storage.WatchEvent
	a, err := s.Create(ctx(t), Sample("ex-a"))
	require.NoError(t, err)
	want = append(want, storage.WatchEvent{ID: "ex-a", Revision: a.Revision})
	b, err := s.Create(ctx(t), Sample("ex-b"))
	require.NoError(t, err)
	want = append(want, storage.WatchEvent{ID: "ex-b", Revision: b.Revision})
	next2 := a
	next2.Status = "paused"
	a2, err := s.CompareAndSwap(ctx(t), "ex-a", a.Revision, next2)
	require.NoError(t, err)
	want = append(want, storage.WatchEvent{ID: "ex-a", Revision: a2.Revision})
	for _, w := range want {
		require.Equal(t, w, next(t, ch))
	}
	// A refused write is no event: the next event is the next real write.
	_, err = s.CompareAndSwap(ctx(t), "ex-a", a.Revision, next2)
	require.ErrorIs(t, err, storage.ErrConflict)
	c, err := s.Create(ctx(t), Sample("ex-c"))
	require.NoError(t, err)
	require.Equal(t, storage.WatchEvent{ID: "ex-c", Revision: c.Revision}, next(t, ch))
}

func watchFromRevision(t *testing.T, s storage.Store) {
	w := watcherOf(t, s)
	a, err := s.Create(ctx(t), Sample("ex-a"))
	require.NoError(t, err)
	b, err := s.Create(ctx(t), Sample("ex-b"))
	require.NoError(t, err)
	watchCtx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	ch, err := w.Watch(watchCtx, a.Revision)
	require.NoError(t, err)
	require.Equal(t, storage.WatchEvent{ID: "ex-b", Revision: b.Revision}, next(t, ch), "writes at or below the revision are not replayed")
}

func watchEndsWithContext(t *testing.T, s storage.Store) {
	w := watcherOf(t, s)
	watchCtx, cancel := context.WithCancel(ctx(t))
	ch, err := w.Watch(watchCtx, 0)
	require.NoError(t, err)
	cancel()
	select {
	case _, ok := <-ch:
		for ok {
			_, ok = <-ch
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the watch channel was not closed after its context ended")
	}
	done, stop := context.WithCancel(context.Background())
	stop()
	_, err = w.Watch(done, 0)
	require.ErrorIs(t, err, context.Canceled, "a watch with a done context is refused")
}

// Unusable checks that store, a value that was not made by its
// constructor (a zero value), refuses every call with an error that
// mentions hint (the constructor to use), and neither panics nor hangs.
// Its Lister and Watcher methods are checked too, if it has them.
func Unusable(t testing.TB, store storage.Store, hint string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	refused := func(op string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), hint) {
			t.Errorf("%s of an unusable store: %v, want an error mentioning %q", op, err, hint)
		}
	}
	_, err := store.Get(ctx, "ex-1")
	refused("Get", err)
	_, err = store.Create(ctx, Sample("ex-1"))
	refused("Create", err)
	_, err = store.CompareAndSwap(ctx, "ex-1", 1, Sample("ex-1"))
	refused("CompareAndSwap", err)
	_, _, err = store.Acquire(ctx, "ex-1", Lease("pod-a"))
	refused("Acquire", err)
	if l, ok := store.(storage.Lister); ok {
		_, _, err = l.List(ctx)
		refused("List", err)
	}
	if w, ok := store.(storage.Watcher); ok {
		_, err = w.Watch(ctx, 0)
		refused("Watch", err)
	}
}

// WaitBound is how long Recv and Closed wait, as the suite's own waits
// do.
const WaitBound = testwait.Bound

// Recv receives one value from ch for a store's own tests (a watch
// event, a write's outcome), or fails t naming what it waited for: a
// regression is a failure that says what never came, not a hung test.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	return testwait.Recv(t, ch, what)
}

// Closed waits for ch to be closed (a watch ended), or fails t naming
// what it waited for.
func Closed[T any](t testing.TB, ch <-chan T, what string) {
	t.Helper()
	testwait.Closed(t, ch, what)
}
