package boltstore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/storage"

	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/stretchr/testify/require"
)

// A write waiting behind other writers gives up at its deadline: the
// reproduction's compare-and-swap with a 5 ms deadline among 50 writers
// returned up to 482 ms late, since bbolt takes its writer lock without
// looking at the context. Here the call returns while the writer's turn
// is still held, so it cannot have waited for it.
func TestAWriteWaitingForItsTurnGivesUpAtItsDeadline(t *testing.T) {
	db, s := openStore(t, filepath.Join(t.TempDir(), "db"), boltstore.Options{})
	rec, err := s.Create(bg, storagetest.Unowned("ex-1"))
	require.NoError(t, err)
	release := db.HoldWriter()
	defer release()
	for name, call := range map[string]func(ctx context.Context) error{
		"CompareAndSwap": func(ctx context.Context) error {
			next := rec
			next.Status = "paused"
			_, err := s.CompareAndSwap(ctx, "ex-1", rec.Revision, next)
			return err
		},
		"Create": func(ctx context.Context) error {
			_, err := s.Create(ctx, storagetest.Unowned("ex-2"))
			return err
		},
		"Acquire": func(ctx context.Context) error {
			_, _, err := s.Acquire(ctx, "ex-1", storagetest.Lease("pod-a"))
			return err
		},
	} {
		ctx, cancel := context.WithTimeout(bg, 5*time.Millisecond)
		err := call(ctx)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, name)
	}
	release()
	got, err := s.Get(bg, "ex-1")
	require.NoError(t, err)
	require.Equal(t, rec.Revision, got.Revision, "nothing was written")
	_, err = s.Get(bg, "ex-2")
	require.ErrorIs(t, err, storage.ErrNotFound)
	own, _, err := s.Acquire(bg, "ex-1", storagetest.Lease("pod-b"))
	require.NoError(t, err, "the refused Acquire holds nothing")
	require.NoError(t, own.Release(bg))
}
