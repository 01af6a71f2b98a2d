package transition_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/execfsm/execfsm/archive"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// An ended execution is deleted with its reason; the archive holds it,
// trail and all, before the store lets it go.
func TestDeleteRemovesAnEndedExecutionAfterTheArchiveKeptIt(t *testing.T) {
	p, store := created(t, transition.PersistedOptions{Actor: "master"})
	_, err := p.Walk(bg, Done, "finished")
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "retired.jsonl")
	kept, err := archive.Open(path)
	require.NoError(t, err)
	defer kept.Close()

	gone, err := p.Delete(bg, transition.Deletion{Reason: "completed, kept 24h0m0s", Archive: kept})
	require.NoError(t, err)
	require.Equal(t, "done", gone.Status)
	_, err = store.Get(bg, "ex-1")
	require.ErrorIs(t, err, storage.ErrNotFound)

	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	rd := archive.NewReader(f)
	got, err := rd.Next()
	require.NoError(t, err)
	require.Equal(t, "completed, kept 24h0m0s", got.Reason)
	require.Equal(t, gone.Revision, got.Record.Revision)
	require.Equal(t, gone.History.Len(), got.Record.History.Len())
	_, err = rd.Next()
	require.ErrorIs(t, err, io.EOF)
}

// A live execution is deleted only when forced; without, nothing goes.
func TestDeleteOfALiveExecutionNeedsForce(t *testing.T) {
	p, store := created(t, transition.PersistedOptions{Actor: "operator"})
	_, err := p.Fire(bg, Work, "scheduled")
	require.NoError(t, err)
	_, err = p.Delete(bg, transition.Deletion{Reason: "tidying up"})
	require.ErrorIs(t, err, transition.ErrNotEnded)
	require.ErrorContains(t, err, "working")
	_, err = store.Get(bg, "ex-1")
	require.NoError(t, err, "nothing deleted")

	_, err = p.Delete(bg, transition.Deletion{Reason: "a duplicate submission", Force: true})
	require.NoError(t, err)
	_, err = store.Get(bg, "ex-1")
	require.ErrorIs(t, err, storage.ErrNotFound)
}

// Forced or not, a live holder is never overruled.
func TestDeleteNeverOverrulesALiveHolder(t *testing.T) {
	master, store := created(t, transition.PersistedOptions{Actor: "master"})
	_, _ = controllerOf(t, store, lease("pod-a"))
	_, err := master.Delete(bg, transition.Deletion{Reason: "a duplicate submission", Force: true})
	require.ErrorIs(t, err, storage.ErrHeld)
	_, err = store.Get(bg, "ex-1")
	require.NoError(t, err, "nothing deleted")
}

// An archive that fails stops the delete: nothing the user asked to
// keep is lost.
func TestAnArchiveThatFailsStopsTheDelete(t *testing.T) {
	p, store := created(t, transition.PersistedOptions{Actor: "master"})
	_, err := p.Walk(bg, Done, "finished")
	require.NoError(t, err)
	full := errors.New("disk full")
	_, err = p.Delete(bg, transition.Deletion{Reason: "retention", Archive: failingArchive{full}})
	require.ErrorIs(t, err, full)
	_, err = store.Get(bg, "ex-1")
	require.NoError(t, err, "nothing deleted")
}

// failingArchive is an archive this test plays: one whose disk is full.
type failingArchive struct{ err error }

func (a failingArchive) Keep(context.Context, []storage.Retired) error { return a.err }

// What Delete refuses before it reads anything: no reason, a
// controller's handle, a store that cannot delete.
func TestDeleteRefusesWhatItCannotDo(t *testing.T) {
	p, store := created(t, transition.PersistedOptions{Actor: "master"})
	_, err := p.Delete(bg, transition.Deletion{})
	require.ErrorContains(t, err, "a reason is required")

	pod, _ := controllerOf(t, store, lease("pod-a"))
	_, err = pod.Delete(bg, transition.Deletion{Reason: "mine", Force: true})
	require.ErrorContains(t, err, "a controller's handle deletes nothing")

	noDelete, err := transition.NewPersisted(jobTable(t), storeWithoutDelete{store}, "ex-1", transition.PersistedOptions{})
	require.NoError(t, err)
	_, err = noDelete.Delete(bg, transition.Deletion{Reason: "retention", Force: true})
	require.ErrorIs(t, err, errors.ErrUnsupported)
	_, err = store.Get(bg, "ex-1")
	require.NoError(t, err, "nothing deleted")
}

// storeWithoutDelete is a store that does not implement storage.Deleter.
type storeWithoutDelete struct{ storage.Store }

// The id deleted may be created again: a new execution, which the old
// handle neither sees nor writes.
func TestADeletedIDIsCreatedAgainAsANewExecution(t *testing.T) {
	p, store := created(t, transition.PersistedOptions{Actor: "master"})
	pod, _ := controllerOf(t, store, lease("pod-a"))
	_, err := pod.Walk(bg, Done, "finished")
	require.NoError(t, err)
	require.NoError(t, pod.Ownership().Release(bg))
	old, err := p.Delete(bg, transition.Deletion{Reason: "retention"})
	require.NoError(t, err)

	_, err = p.Create(bg, transition.To(Queued).Because("submitted again"))
	require.NoError(t, err)
	_, err = pod.Fire(bg, Work, "a controller of the old life")
	require.ErrorIs(t, err, storage.ErrFenced)
	again, rec := controllerOf(t, store, lease("pod-a"))
	require.Greater(t, rec.Epoch, old.Epoch, "the new life's epochs are above the old one's")
	require.Greater(t, rec.Revision, old.Revision)
	_, err = again.Fire(bg, Work, "scheduled")
	require.NoError(t, err)
}

// An operator removes an ended execution, keeping it in an archive; a
// live one stays unless forced.
func ExamplePersisted_Delete() {
	table, _ := transition.New("queued").Allow("queued", "running").Allow("running", "done").Terminal("done").Build()
	store := storage.NewMemory()
	exec, _ := transition.NewPersisted(table, store, "ex-1", transition.PersistedOptions{Actor: "operator"})
	_, _ = exec.Create(context.Background(), transition.To("queued"))
	_, _ = exec.Fire(context.Background(), "running", "scheduled")

	_, err := exec.Delete(context.Background(), transition.Deletion{Reason: "tidying up"})
	fmt.Println(errors.Is(err, transition.ErrNotEnded))

	dir, _ := os.MkdirTemp("", "archive")
	defer os.RemoveAll(dir)
	kept, _ := archive.Open(filepath.Join(dir, "retired.jsonl"))
	defer kept.Close()
	_, _ = exec.Fire(context.Background(), "done", "finished")
	gone, err := exec.Delete(context.Background(), transition.Deletion{Reason: "completed, kept 0s", Archive: kept})
	fmt.Println(gone.Status, err)
	_, err = store.Get(context.Background(), "ex-1")
	fmt.Println(errors.Is(err, storage.ErrNotFound))
	// Output:
	// true
	// done <nil>
	// true
}
