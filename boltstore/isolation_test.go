package boltstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/reconcile"

	"github.com/execfsm/execfsm/storage"

	"github.com/stretchr/testify/require"
)

// The reproduction: five executions, one of whose records no longer
// decodes (damage, or a newer version's format during a rolling upgrade).
// A Loop whose adoption pass lists the store, as a controller's does,
// reconciles the four healthy ones and hears of the fifth; it does not
// retry its adoption pass forever with nothing reconciled.
func TestOneCorruptRecordDoesNotStopTheOthersFromBeingReconciled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "db")
	db, s := openStore(t, path, boltstore.Options{})
	for k := range 5 {
		_, err := s.Create(ctx, storage.Record{ID: fmt.Sprint("ex-", k), Status: "running"})
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())
	corrupt(t, path, "ex-2", []byte("\x02a format from a newer version"))
	_, s = openStore(t, path, boltstore.Options{})

	var mu sync.Mutex
	var reconciled []string
	var reported []storage.Unreadable
	known := func(ctx context.Context) ([]string, error) {
		recs, bad, err := s.List(ctx)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		reported = append(reported, bad...)
		mu.Unlock()
		ids := make([]string, len(recs))
		for k, r := range recs {
			ids[k] = r.ID
		}
		return ids, nil
	}
	loop, err := reconcile.NewLoop(reconcile.Options[string]{
		Known: known, Resync: -1,
		Reconciler: reconcile.ReconcilerFunc[string](func(ctx context.Context, id string) (reconcile.Result, error) {
			if _, err := s.Get(ctx, id); err != nil {
				return reconcile.Result{}, err
			}
			mu.Lock()
			reconciled = append(reconciled, id)
			mu.Unlock()
			return reconcile.Result{}, nil
		}),
	})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- loop.Run(runCtx) }()
	require.NoError(t, loop.Idle(ctx))
	stop()
	require.NoError(t, <-done)

	mu.Lock()
	defer mu.Unlock()
	require.ElementsMatch(t, []string{"ex-0", "ex-1", "ex-3", "ex-4"}, reconciled)
	require.Len(t, reported, 1)
	require.Equal(t, "ex-2", reported[0].ID)
	require.ErrorIs(t, reported[0].Err, storage.ErrCorrupt)
	require.Equal(t, uint64(4), loop.Stats().Reconciles)
}
