package boltstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// A backup taken while eight writers go on (moves, deletes, records
// created again, some writes applied to the file and some still in the
// log) is the database at its revision: every record and trail equals
// the last write of it acknowledged at or before that revision, the
// status index agrees, and a controller opens it and recovers from it.
func TestABackupUnderLoadIsTheDatabaseAtItsRevision(t *testing.T) {
	dir := t.TempDir()
	db, s := openStore(t, filepath.Join(dir, "db"), boltstore.Options{})
	db.CheckpointEvery(64) // some of the writes in the file, some in the log
	var mu sync.Mutex
	history := map[string][]storagetest.Written{}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for k := 0; ctx.Err() == nil; k++ {
				id := fmt.Sprintf("ex-%d-%d", w, k%5)
				written, err := storagetest.Churn(context.Background(), s, id, k)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				history[id] = append(history[id], written)
				mu.Unlock()
			}
		})
	}
	time.Sleep(200 * time.Millisecond) // the writers under way
	backup := filepath.Join(dir, "backup.db")
	info, err := db.Backup(context.Background(), backup)
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond) // and after it
	stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	_, err = db.Backup(context.Background(), backup)
	require.ErrorIs(t, err, os.ErrExist, "a backup never overwrites")

	restored, err := boltstore.Open(backup, boltstore.Options{ReadOnly: true})
	require.NoError(t, err)
	rs, err := restored.Store("executions")
	require.NoError(t, err)
	want := storagetest.AsOf(history, info.Revision)
	require.Greater(t, len(want), 20)
	recs, bad, err := rs.List(context.Background())
	require.NoError(t, err)
	require.Empty(t, bad)
	require.Len(t, recs, len(want))
	for _, got := range recs {
		require.Equal(t, encoded(t, want[got.ID]), encoded(t, got), "%s as of revision %d", got.ID, info.Revision)
	}
	for _, status := range []string{"running", "paused"} {
		paged, _, err := storage.ListAll(context.Background(), rs, 7, status)
		require.NoError(t, err)
		n := 0
		for _, rec := range want {
			if rec.Status == status {
				n++
			}
		}
		require.Len(t, paged, n, "the status index came along")
	}
	require.NoError(t, restored.Close())

	// A controller opens the backup as its store and recovers from it.
	_, store := openStore(t, backup, boltstore.Options{})
	var id string
	for k := range want {
		id = k
		break
	}
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), store, id, transition.PersistedOptions{Actor: "pod-b"})
	require.NoError(t, err)
	d, err := recovery.NewDecider(teraslice.Roles(), recovery.Policy{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true), Failovers: teraslice.Failovers})
	require.NoError(t, err)
	v, err := d.Start(context.Background(), exec, storage.Lease{Holder: "pod-b", TTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionResume, v.Decision, "a running execution whose controller died resumes: %s", v.Reason)
}

// encoded is rec as the store writes it: two records that encode alike
// are the same record, trail and all.
func encoded(t *testing.T, rec storage.Record) string {
	t.Helper()
	data, err := rec.MarshalBinary()
	require.NoError(t, err)
	return string(data)
}
