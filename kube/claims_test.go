package kube_test

import (
	"testing"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/stretchr/testify/require"
)

// A write on a record the store has just read or written is one request:
// the claim it must keep is the one the store saw at that
// resourceVersion, and the update lands only on that resourceVersion.
// A claim changed is refused without a request; another store's write
// in between makes the update conflict, and the conflict carries what
// that store wrote.
func TestWriteOnARevisionSeenIsOneRequest(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	var seen attempts
	a, err := kube.New(seen.client(t, storeCfg), kube.Options{Namespace: ns})
	require.NoError(t, err)
	b := newStoreIn(t, ns)

	rec, err := a.Create(bg, storagetest.Sample("ex-1"))
	require.NoError(t, err)
	next := rec
	next.Reason = "written by a"
	before := seen.count()
	rec, err = a.CompareAndSwap(bg, "ex-1", rec.Revision, next)
	require.NoError(t, err)
	require.Equal(t, 1, seen.count()-before, "the update alone")

	stolen := rec
	stolen.Owner, stolen.Epoch = "pod-x", rec.Epoch+1
	before = seen.count()
	_, err = a.CompareAndSwap(bg, "ex-1", rec.Revision, stolen)
	require.ErrorIs(t, err, storage.ErrInvalidRecord)
	require.ErrorContains(t, err, "ownership changes only through Acquire")
	require.Zero(t, seen.count()-before, "refused before any request")

	byB := rec
	byB.Reason = "written by b"
	fromB, err := b.CompareAndSwap(bg, "ex-1", rec.Revision, byB)
	require.NoError(t, err)
	next.Reason = "a again, on what it last saw"
	_, err = a.CompareAndSwap(bg, "ex-1", rec.Revision, next)
	var conflict *storage.ConflictError
	require.ErrorAs(t, err, &conflict)
	require.Equal(t, fromB.Revision, conflict.Current.Revision)
	require.Equal(t, "written by b", conflict.Current.Reason)
	got, err := b.Get(bg, "ex-1")
	require.NoError(t, err)
	require.Equal(t, "written by b", got.Reason, "nothing overwritten unseen")
}

// A record the store listed is one it has seen: a handle given it
// (Persisted.Prime) writes in one request too.
func TestWriteOnAListedRevisionIsOneRequest(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	_, err := newStoreIn(t, ns).Create(bg, storagetest.Sample("ex-1"))
	require.NoError(t, err)
	var seen attempts
	a, err := kube.New(seen.client(t, storeCfg), kube.Options{Namespace: ns})
	require.NoError(t, err)
	recs, _, err := a.List(bg)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	next := recs[0]
	next.Reason = "decided on the listing"
	before := seen.count()
	_, err = a.CompareAndSwap(bg, "ex-1", recs[0].Revision, next)
	require.NoError(t, err)
	require.Equal(t, 1, seen.count()-before, "the update alone")
}
