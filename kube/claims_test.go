package kube_test

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// countingClient is the store user's client, counting the requests it
// sends to the API server.
func countingClient(t *testing.T) (kubernetes.Interface, *atomic.Int64) {
	t.Helper()
	var requests atomic.Int64
	cfg := rest.CopyConfig(storeCfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			requests.Add(1)
			return rt.RoundTrip(r)
		})
	})
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return client, &requests
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A write on a record the store has just read or written is one request:
// the claim it must keep is the one the store saw at that
// resourceVersion, and the update lands only on that resourceVersion.
// A claim changed is refused without a request; another store's write
// in between makes the update conflict, and the conflict carries what
// that store wrote.
func TestWriteOnARevisionSeenIsOneRequest(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	client, requests := countingClient(t)
	a, err := kube.New(client, kube.Options{Namespace: ns})
	require.NoError(t, err)
	b := newStoreIn(t, ns)

	rec, err := a.Create(bg, storagetest.Sample("ex-1"))
	require.NoError(t, err)
	next := rec
	next.Reason = "written by a"
	requests.Store(0)
	rec, err = a.CompareAndSwap(bg, "ex-1", rec.Revision, next)
	require.NoError(t, err)
	require.Equal(t, int64(1), requests.Load(), "the update alone")

	stolen := rec
	stolen.Owner, stolen.Epoch = "pod-x", rec.Epoch+1
	requests.Store(0)
	_, err = a.CompareAndSwap(bg, "ex-1", rec.Revision, stolen)
	require.ErrorIs(t, err, storage.ErrInvalidRecord)
	require.ErrorContains(t, err, "ownership changes only through Acquire")
	require.Zero(t, requests.Load(), "refused before any request")

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
// (Persisted.Observe) writes in one request too.
func TestWriteOnAListedRevisionIsOneRequest(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	_, err := newStoreIn(t, ns).Create(bg, storagetest.Sample("ex-1"))
	require.NoError(t, err)
	client, requests := countingClient(t)
	a, err := kube.New(client, kube.Options{Namespace: ns})
	require.NoError(t, err)
	recs, _, err := a.List(bg)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	next := recs[0]
	next.Reason = "decided on the listing"
	requests.Store(0)
	_, err = a.CompareAndSwap(bg, "ex-1", recs[0].Revision, next)
	require.NoError(t, err)
	require.Equal(t, int64(1), requests.Load(), "the update alone")
}
