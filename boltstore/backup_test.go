package boltstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/recovery/recoverytest"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
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
	load := storagetest.StartLoad(s, 8, 5)
	time.Sleep(200 * time.Millisecond) // the writers under way
	backup := filepath.Join(dir, "backup.db")
	info, err := db.Backup(context.Background(), backup)
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond) // and after it
	history := load.Stop(t)
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
		require.Equal(t, storagetest.Encoded(t, want[got.ID]), storagetest.Encoded(t, got), "%s as of revision %d", got.ID, info.Revision)
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
	recoverytest.ResumesAfterRestore(t, store, id)
}
