package boltstore_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/stretchr/testify/require"
)

// A delete reaches the file the three ways a write does: applied by a
// checkpoint while the DB is open, by Close, or replayed from the log
// after a crash. Each way the record stays gone, its neighbour stays,
// the watch log announces it, and the namespace's epoch floor comes
// along: the id created again is taken over above every epoch of its
// old life.
func TestADeleteReachesTheFileAndKeepsTheEpochFloor(t *testing.T) {
	for name, settle := range map[string]func(t *testing.T, db *boltstore.DB){
		"checkpointed": func(t *testing.T, db *boltstore.DB) {
			require.NoError(t, db.Checkpoint())
			db.Crash() // the log after the checkpoint is empty: the file alone has it
		},
		"closed":  func(t *testing.T, db *boltstore.DB) { require.NoError(t, db.Close()) },
		"crashed": func(t *testing.T, db *boltstore.DB) { db.Crash() },
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "db")
			db, s := openStore(t, path, boltstore.Options{})
			_, err := s.Create(bg, storagetest.Sample("ex-kept"))
			require.NoError(t, err)
			_, err = s.Create(bg, storagetest.Sample("ex-1"))
			require.NoError(t, err)
			var last storage.Record
			for _, owner := range []string{"pod-a", "pod-b", "pod-c"} {
				own, held, err := s.Acquire(bg, "ex-1", storagetest.Lease(owner))
				require.NoError(t, err)
				require.NoError(t, own.Release(bg))
				last = held
			}
			require.Equal(t, uint64(6), last.Epoch, "three take-overs of a record at epoch 3")
			require.NoError(t, s.Delete(bg, "ex-1", last.Revision))
			settle(t, db)

			for _, readOnly := range []bool{true, false} {
				again, err := boltstore.Open(path, boltstore.Options{ReadOnly: readOnly})
				require.NoError(t, err)
				s, err := again.Store("executions")
				require.NoError(t, err)
				_, err = s.Get(bg, "ex-1")
				require.ErrorIs(t, err, storage.ErrNotFound, "read-only %v", readOnly)
				recs, bad, err := s.List(bg)
				require.NoError(t, err)
				require.Empty(t, bad)
				require.Len(t, recs, 1)
				require.Equal(t, "ex-kept", recs[0].ID)
				if readOnly {
					require.NoError(t, again.Close())
					continue
				}
				events, err := s.Watch(bg, last.Revision)
				require.NoError(t, err)
				ev := storagetest.Recv(t, events, "the delete, replayed from the watch log")
				require.Equal(t, "ex-1", ev.ID)
				require.Greater(t, ev.Revision, last.Revision)

				reborn, err := s.Create(bg, storagetest.Sample("ex-1"))
				require.NoError(t, err)
				require.Greater(t, reborn.Revision, ev.Revision, "a new life's revisions are above the old one's")
				own, held, err := s.Acquire(bg, "ex-1", storagetest.Lease("pod-a"))
				require.NoError(t, err)
				require.Greater(t, held.Epoch, last.Epoch, "the epoch floor came through %s and a reopen", name)
				require.NoError(t, own.Release(bg))
				require.NoError(t, again.Close())
			}
		})
	}
}

// A delete and writes of the same id in one batch see one another in
// order, as they would one at a time: a create after the delete is a new
// record, a write at the deleted revision conflicts.
func TestADeleteInABatchIsSeenByTheWritesAfterIt(t *testing.T) {
	db, s := openStore(t, filepath.Join(t.TempDir(), "db"), boltstore.Options{})
	rec, err := s.Create(bg, storagetest.Sample("ex-1"))
	require.NoError(t, err)
	release := db.HoldWriter() // the writes below queue up and go in one batch
	deleted := make(chan error, 1)
	go func() { deleted <- s.Delete(bg, "ex-1", rec.Revision) }()
	waitPending(t, db, 1)
	stale := make(chan error, 1)
	go func() {
		next := rec
		next.Reason = "written over a deleted record"
		_, err := s.CompareAndSwap(bg, "ex-1", rec.Revision, next)
		stale <- err
	}()
	waitPending(t, db, 2)
	created := make(chan error, 1)
	go func() { _, err := s.Create(bg, storagetest.Sample("ex-1")); created <- err }()
	waitPending(t, db, 3)
	release()
	require.NoError(t, storagetest.Recv(t, deleted, "the delete"))
	require.ErrorIs(t, storagetest.Recv(t, stale, "the write after it"), storage.ErrNotFound)
	require.NoError(t, storagetest.Recv(t, created, "the create after it"))
	require.Equal(t, 3, db.LastBatch(), "the three went in one batch")
}

// waitPending waits, bounded, until n writes are queued for a leader.
func waitPending(t *testing.T, db *boltstore.DB, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return db.Pending() >= n }, 10*time.Second, time.Millisecond, "%d writes queued", n)
}
