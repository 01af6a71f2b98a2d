package etcdstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/execfsm/execfsm/etcdstore"
	"github.com/execfsm/execfsm/etcdstore/embedded"
	"github.com/execfsm/execfsm/recovery/recoverytest"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/stretchr/testify/require"
)

// A snapshot taken while eight writers go on, restored into a new
// cluster, is this store at the snapshot's revision: every record and
// trail equal to the last write acknowledged by then, revisions
// unchanged, the status index with it; a controller opens it and
// recovers. A snapshot whose bytes were damaged is refused.
func TestASnapshotUnderLoadRestoresTheStoreAtItsRevision(t *testing.T) {
	s := newStore(t, etcdstore.Options{})
	load := storagetest.StartLoad(s, 8, 5)
	time.Sleep(300 * time.Millisecond) // the writers under way
	dir := t.TempDir()
	path := filepath.Join(dir, "snapshot.db")
	info, err := etcdstore.Snapshot(context.Background(), client(t, shared), path)
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond) // and after it
	history := load.Stop(t)
	_, err = etcdstore.Snapshot(context.Background(), client(t, shared), path)
	require.ErrorIs(t, err, os.ErrExist, "a snapshot never overwrites")

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	damaged := filepath.Join(dir, "damaged.db")
	data[len(data)/2] ^= 0xff
	require.NoError(t, os.WriteFile(damaged, data, 0o600))
	_, err = etcdstore.CheckSnapshot(damaged)
	require.ErrorIs(t, err, etcdstore.ErrDamagedSnapshot)

	restored, err := embedded.Start(filepath.Join(dir, "restored"), 1, embedded.Options{Snapshot: path})
	require.NoError(t, err)
	defer restored.Close()
	rs, err := etcdstore.New(client(t, restored), etcdstore.Options{Prefix: s.Prefix()})
	require.NoError(t, err)
	want := storagetest.AsOf(history, uint64(info.Revision))
	require.Greater(t, len(want), 20)
	recs, bad, err := rs.List(context.Background())
	require.NoError(t, err)
	require.Empty(t, bad)
	require.Len(t, recs, len(want))
	for _, got := range recs {
		require.Equal(t, storagetest.Encoded(t, want[got.ID]), storagetest.Encoded(t, got), "%s as of revision %d", got.ID, info.Revision)
	}
	paged, _, err := storage.ListAll(context.Background(), rs, 7, "running", "paused")
	require.NoError(t, err)
	require.Len(t, paged, len(want), "the status index came along")

	var id string
	for k := range want {
		id = k
		break
	}
	recoverytest.ResumesAfterRestore(t, rs, id)
}
