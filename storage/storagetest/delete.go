package storagetest

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/execfsm/execfsm/storage"
	"github.com/stretchr/testify/require"
)

// deleteTests check the contract of [storage.Deleter], for the stores
// that implement it.
var deleteTests = []optionalTest[storage.Deleter]{
	{"DeleteAtTheRevisionRemovesTheRecord", deleteRemovesTheRecord},
	{"DeleteAtAStaleRevisionConflictsAndDeletesNothing", deleteAtAStaleRevisionConflicts},
	{"DeleteUnknownIsNotFound", deleteUnknownIsNotFound},
	{"DeleteUnderALiveHolderIsHeldAndDeletesNothing", deleteUnderALiveHolderIsHeld},
	{"DeleteIsWatched", deleteIsWatched},
	{"ARecreatedIDStartsANewLife", aRecreatedIDStartsANewLife},
	{"DeleteWithADoneContextDeletesNothing", deleteWithADoneContext},
}

// optionalTest is a test of the contract of I, an interface a store may
// implement beside storage.Store.
type optionalTest[I any] struct {
	name string
	fn   func(*testing.T, storage.Store, I)
}

// runIfImplemented runs tests on the stores that implement I, and says
// so for the others.
func runIfImplemented[I any](t *testing.T, newStore func(t *testing.T) storage.Store, tests []optionalTest[I]) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			impl, ok := s.(I)
			if !ok {
				t.Skipf("%T does not implement %v", s, reflect.TypeFor[I]())
			}
			tc.fn(t, s, impl)
		})
	}
}

func deleteRemovesTheRecord(t *testing.T, s storage.Store, d storage.Deleter) {
	c := ctx(t)
	kept, err := s.Create(c, Sample("ex-kept"))
	require.NoError(t, err)
	rec, err := s.Create(c, Sample("ex-1"))
	require.NoError(t, err)
	require.NoError(t, d.Delete(c, "ex-1", rec.Revision))
	_, err = s.Get(c, "ex-1")
	require.ErrorIs(t, err, storage.ErrNotFound)
	got, err := s.Get(c, "ex-kept")
	require.NoError(t, err)
	require.Equal(t, kept.Revision, got.Revision, "the other record untouched")
	if l, ok := s.(storage.Lister); ok {
		recs, _, err := l.List(c)
		require.NoError(t, err)
		require.Len(t, recs, 1)
		require.Equal(t, "ex-kept", recs[0].ID, "a lister no longer returns it")
	}
	require.ErrorIs(t, d.Delete(c, "ex-1", rec.Revision), storage.ErrNotFound, "deleted once")
}

func deleteAtAStaleRevisionConflicts(t *testing.T, s storage.Store, d storage.Deleter) {
	c := ctx(t)
	rec, err := s.Create(c, Sample("ex-1"))
	require.NoError(t, err)
	next := rec
	next.Reason = "moved on"
	moved, err := s.CompareAndSwap(c, "ex-1", rec.Revision, next)
	require.NoError(t, err)
	err = d.Delete(c, "ex-1", rec.Revision)
	var conflict *storage.ConflictError
	require.ErrorAs(t, err, &conflict)
	require.ErrorIs(t, err, storage.ErrConflict)
	require.Equal(t, moved.Revision, conflict.Current.Revision, "the conflict carries the record as it is")
	got, err := s.Get(c, "ex-1")
	require.NoError(t, err)
	require.Equal(t, moved.Revision, got.Revision, "nothing deleted")
}

func deleteUnknownIsNotFound(t *testing.T, _ storage.Store, d storage.Deleter) {
	require.ErrorIs(t, d.Delete(ctx(t), "ex-nobody", 1), storage.ErrNotFound)
}

func deleteUnderALiveHolderIsHeld(t *testing.T, s storage.Store, d storage.Deleter) {
	c := ctx(t)
	_, err := s.Create(c, Sample("ex-1"))
	require.NoError(t, err)
	own, held, err := s.Acquire(c, "ex-1", Lease("pod-a"))
	require.NoError(t, err)
	err = d.Delete(c, "ex-1", held.Revision)
	require.ErrorIs(t, err, storage.ErrHeld)
	got, err := s.Get(c, "ex-1")
	require.NoError(t, err, "nothing deleted")
	require.Equal(t, held.Revision, got.Revision)
	require.NoError(t, own.Release(c))
	require.NoError(t, d.Delete(c, "ex-1", held.Revision), "once released, it goes")
}

func deleteIsWatched(t *testing.T, s storage.Store, d storage.Deleter) {
	w, ok := s.(storage.Watcher)
	if !ok {
		t.Skipf("%T does not implement storage.Watcher", s)
	}
	c := ctx(t)
	rec, err := s.Create(c, Sample("ex-1"))
	require.NoError(t, err)
	events, err := w.Watch(c, rec.Revision)
	require.NoError(t, err)
	require.NoError(t, d.Delete(c, "ex-1", rec.Revision))
	ev := Recv(t, events, "the delete's event")
	require.Equal(t, "ex-1", ev.ID)
	require.Greater(t, ev.Revision, rec.Revision, "a delete is a write at a new revision")
}

func aRecreatedIDStartsANewLife(t *testing.T, s storage.Store, d storage.Deleter) {
	c := ctx(t)
	_, err := s.Create(c, Sample("ex-1"))
	require.NoError(t, err)
	var last storage.Record
	for range 3 { // three lives of ownership in the first life
		own, rec, err := s.Acquire(c, "ex-1", Lease("pod-a"))
		require.NoError(t, err)
		require.NoError(t, own.Release(c))
		last = rec
	}
	require.NoError(t, d.Delete(c, "ex-1", last.Revision))
	again, err := s.Create(c, Sample("ex-1"))
	require.NoError(t, err)
	require.Greater(t, again.Revision, last.Revision, "revisions never come back")
	own, taken, err := s.Acquire(c, "ex-1", Lease("pod-a"))
	require.NoError(t, err)
	defer own.Release(c)
	require.Greater(t, taken.Epoch, last.Epoch, "the old life's epochs never come back: no claim of it matches the new one")
}

func deleteWithADoneContext(t *testing.T, s storage.Store, d storage.Deleter) {
	rec, err := s.Create(ctx(t), Sample("ex-1"))
	require.NoError(t, err)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	err = d.Delete(done, "ex-1", rec.Revision)
	require.True(t, errors.Is(err, context.Canceled), "%v", err)
	_, err = s.Get(ctx(t), "ex-1")
	require.NoError(t, err, "nothing deleted")
}
