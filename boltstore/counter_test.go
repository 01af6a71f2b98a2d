package boltstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/execfsm/execfsm/storage"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// tamper changes the file with bbolt directly, as a foreign tool or a
// damaged disk would, while no DB has it open.
func tamper(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	b, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, b.Update(fn))
	require.NoError(t, b.Close())
}

// The reproduction: the revision counter goes missing, revisions restart
// at 1, climb back to a revision a stale writer still holds, and that
// writer's compare-and-swap overwrites a user's stop request. Revisions
// must never come round again.
func TestAMissingRevisionCounterIsRebuiltAndAStaleWriteStillConflicts(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db")
	db, s := openStore(t, path, boltstore.Options{})
	rec, err := s.Create(ctx, storage.Record{ID: "ex-001", Status: "running"})
	require.NoError(t, err)
	stale := rec // a controller read this and will write later
	for range 7 {
		next := rec
		next.Reason = "progress"
		rec, err = s.CompareAndSwap(ctx, "ex-001", rec.Revision, next)
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())
	tamper(t, path, func(tx *bolt.Tx) error { return tx.Bucket([]byte("execfsm")).Delete([]byte("revision")) })

	db, s = openStore(t, path, boltstore.Options{})
	defer db.Close()
	other, err := s.Create(ctx, storage.Record{ID: "ex-002", Status: "pending"})
	require.NoError(t, err)
	require.Greater(t, other.Revision, rec.Revision, "revisions go on from the highest one in the file")
	for k := range 8 { // climb past the stale writer's revision, as the reproduction did
		next := other
		next.Reason = "noise"
		other, err = s.CompareAndSwap(ctx, "ex-002", other.Revision, next)
		require.NoError(t, err, "write %d", k)
	}
	stopping := rec
	stopping.Status = "stopping"
	rec, err = s.CompareAndSwap(ctx, "ex-001", rec.Revision, stopping)
	require.NoError(t, err)
	stale.Status = "completed"
	_, err = s.CompareAndSwap(ctx, "ex-001", stale.Revision, stale)
	require.ErrorIs(t, err, storage.ErrConflict, "a stale compare-and-swap never succeeds")
	got, err := s.Get(ctx, "ex-001")
	require.NoError(t, err)
	require.Equal(t, "stopping", got.Status)
}

// A record stored with a revision above the counter (tampered, or written
// by a tool that kept its own count) does not make its revisions go down.
func TestARecordAboveTheCounterKeepsItsRevisionsGoingUp(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db")
	db, s := openStore(t, path, boltstore.Options{})
	_, err := s.Create(ctx, storage.Record{ID: "ex-1", Status: "running"})
	require.NoError(t, err)
	require.NoError(t, db.Close())
	tamper(t, path, func(tx *bolt.Tx) error {
		high := storage.Record{ID: "ex-1", Status: "running", Revision: 1000}
		data, err := high.MarshalBinary()
		if err != nil {
			return err
		}
		return tx.Bucket([]byte("ns/executions")).Bucket([]byte("records")).Put([]byte("ex-1"), data)
	})
	_, s = openStore(t, path, boltstore.Options{})
	cur, err := s.Get(ctx, "ex-1")
	require.NoError(t, err)
	require.Equal(t, uint64(1000), cur.Revision)
	next := cur
	next.Status = "paused"
	written, err := s.CompareAndSwap(ctx, "ex-1", cur.Revision, next)
	require.NoError(t, err)
	require.Greater(t, written.Revision, cur.Revision)
}

// A counter of the wrong length is refused when the file is opened.
func TestACounterOfTheWrongLengthIsRefusedAtOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, _ := openStore(t, path, boltstore.Options{})
	require.NoError(t, db.Close())
	tamper(t, path, func(tx *bolt.Tx) error { return tx.Bucket([]byte("execfsm")).Put([]byte("revision"), []byte{1, 2, 3}) })
	_, err := boltstore.Open(path, boltstore.Options{})
	require.ErrorIs(t, err, storage.ErrCorrupt)
	require.ErrorContains(t, err, path)
}
